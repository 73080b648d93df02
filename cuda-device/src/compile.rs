//! NVRTC: CUDA C from [`lower`](crate::lower) to a CUBIN for the device's architecture.

use std::ffi::{CString, c_char};

use cudarc::nvrtc::result;
use cudarc::nvrtc::sys;
use lockstep::DeviceError;
use lockstep::kernel::KernelDef;

/// Options every kernel is compiled with. `--fmad=false` keeps `a * b + c` two roundings, as on
/// the host; division and denormals stay IEEE (the defaults, spelled out).
fn options(arch: &str) -> Vec<String> {
    vec![
        format!("--gpu-architecture={arch}"),
        "--fmad=false".to_owned(),
        "--prec-div=true".to_owned(),
        "--ftz=false".to_owned(),
        "--std=c++17".to_owned(),
    ]
}

fn compile_error(def: &KernelDef, log: String) -> DeviceError {
    DeviceError::Compile {
        kernel: def.name.clone(),
        log,
    }
}

fn text(chars: Vec<c_char>) -> String {
    let bytes: Vec<u8> = chars
        .into_iter()
        .map(|c| c as u8)
        .take_while(|&b| b != 0)
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// Compiles `def` for `arch` (e.g. `sm_90`) and returns the CUBIN. A failure is
/// [`DeviceError::Compile`] carrying NVRTC's log and the kernel's CUDA C.
pub(crate) fn compile(def: &KernelDef, checked: bool, arch: &str) -> Result<Vec<u8>, DeviceError> {
    let source = crate::lower::program(def, checked);
    let c_source = CString::new(source.as_str())
        .map_err(|_| compile_error(def, "the lowered source contains a NUL byte".to_owned()))?;
    let program = result::create_program(&c_source, Some(c"lockstep.cu"))
        .map_err(|e| compile_error(def, format!("nvrtcCreateProgram failed: {e:?}")))?;
    // SAFETY: `program` was just created; the options contain no NUL byte.
    let compiled = unsafe { result::compile_program(program, &options(arch)) };
    let outcome = match compiled {
        Ok(()) => {
            // SAFETY: `program` was created above, compiled successfully and is destroyed only
            // below.
            unsafe { cubin(program) }
                .map_err(|e| compile_error(def, format!("nvrtcGetCUBIN failed: {e:?}")))
        }
        Err(e) => {
            // SAFETY: `program` is valid until destroyed below.
            let log = unsafe { result::get_program_log(program) }
                .map(text)
                .unwrap_or_default();
            let kernel = crate::lower::kernel_source(def, checked);
            Err(compile_error(
                def,
                format!(
                    "NVRTC: {e:?} ({arch})\n{log}\nkernel source (after the prelude):\n{kernel}"
                ),
            ))
        }
    };
    // SAFETY: destroyed once, after its last use.
    let _ = unsafe { result::destroy_program(program) };
    outcome
}

/// The CUBIN NVRTC compiled `program` to.
///
/// # Safety
/// `program` is a live NVRTC program (created, not yet destroyed) that compiled successfully.
unsafe fn cubin(program: sys::nvrtcProgram) -> Result<Vec<u8>, result::NvrtcError> {
    let mut size = 0usize;
    // SAFETY: a live, compiled program (this function's contract); writes the size through a
    // valid pointer.
    unsafe { sys::nvrtcGetCUBINSize(program, &mut size) }.result()?;
    let mut image = vec![0u8; size];
    // SAFETY: `image` has the `size` bytes NVRTC reported for this program, which it writes.
    unsafe { sys::nvrtcGetCUBIN(program, image.as_mut_ptr().cast()) }.result()?;
    Ok(image)
}

#[cfg(test)]
pub(crate) mod tests {
    use lockstep::kernel::{Access, ElemType, KernelBuilder};
    use lockstep_harness::requirement::{Need, cannot_run};

    use super::*;

    /// Whether NVRTC loads; where it does not, [`cannot_run`] says so for `test`.
    pub(crate) fn nvrtc_present(test: &str) -> bool {
        // SAFETY: probing dlopens NVRTC, as compiling would.
        let present = unsafe { sys::is_culib_present() };
        if !present {
            let reason = "libnvrtc could not be loaded; set LD_LIBRARY_PATH to its directory";
            cannot_run(Need::Nvrtc, test, reason);
        }
        present
    }

    /// Needs only NVRTC (no GPU): a visible skip where it is missing, a failure under
    /// `LOCKSTEP_REQUIRE_NVRTC=1` or `LOCKSTEP_REQUIRE_GPU=1`.
    #[test]
    fn compiler_failures_carry_the_log_and_the_kernel_source() {
        if !nvrtc_present("compiler_failures_carry_the_log_and_the_kernel_source") {
            return;
        }
        let mut k = KernelBuilder::new("tiny", [1, 1, 1]);
        let out = k.binding(ElemType::U32, Access::ReadWrite);
        k.store(out, 0u32, 1u32);
        let def = k.build().expect("valid").def().clone();
        let image = compile(&def, true, "sm_90").expect("compiles for sm_90");
        assert!(!image.is_empty());
        match compile(&def, true, "sm_1") {
            Err(DeviceError::Compile { kernel, log }) => {
                assert_eq!(kernel, "tiny");
                assert!(log.contains("sm_1"), "{log}");
                assert!(log.contains("lockstep_kernel"), "{log}");
            }
            other => panic!("expected a compile error, got {other:?}"),
        }
    }
}
