//! The compile pipeline: a cubecl kernel to a validated Lockstep kernel, cached by cubecl's
//! kernel id (refusals included, so a refused kernel is refused once).
//!
//! 1. cubecl's launch limits (`validate_cube_dim`, `validate_units`: typed
//!    `ResourceLimitError`s, as every cubecl backend reports them);
//! 2. the kernel's expansion (`define_kernel`; a panic is `ExpansionPanicked`);
//! 3. WGSL from cubecl-wgpu's public `WgslCompiler`, with every cubecl lowering pass, and its
//!    shared memory against the declared maximum (`ResourceLimitError::SharedMemory`);
//! 4. naga's WGSL front end and validator (a failure is `CompilationError::Validation`);
//! 5. the translator (a refusal is `CompilationError::UnsupportedInstruction` naming the
//!    construct: a refusal by cubecl's `is_refusal`);
//! 6. Lockstep's validation, whole and against the device (`CompilationError::Validation`);
//! 7. cubecl's execution mode as Lockstep's checks: `launch_unchecked` runs unguarded.

use std::collections::HashMap;
use std::sync::Arc;

use cubecl_core::{ExecutionMode, WgpuCompilationOptions, define_kernel};
use cubecl_environment::backtrace::BackTrace;
use cubecl_ir::DeviceProperties as CubeclProperties;
use cubecl_runtime::compiler::CompilationError;
use cubecl_runtime::id::KernelId;
use cubecl_runtime::kernel::{BufferIOAttr, CubeKernel};
use cubecl_runtime::server::{LaunchError, ResourceLimitError};
use cubecl_server::kernel::CompiledKernel;
use cubecl_server::validation::{validate_cube_dim, validate_units};
use cubecl_wgpu::WgslCompiler;
use lockstep::Kernel;
use lockstep::kernel::KernelChecks;
use naga::valid::{Capabilities, ModuleInfo, ValidationFlags, Validator};

use crate::translate::{LaunchPlan, translate};

/// A kernel ready to launch on Lockstep.
#[derive(Debug)]
pub struct Compiled {
    /// The validated Lockstep kernel.
    pub kernel: Kernel,
    /// Where each of its bindings comes from.
    pub plan: LaunchPlan,
    /// What the kernel does with each buffer, by resource position (cubecl's own analysis);
    /// `None` for a kernel that carried its own source.
    pub io: Option<Vec<BufferIOAttr>>,
}

/// What a kernel is compiled for: cubecl's declaration and Lockstep's device.
#[derive(Clone, Copy, Debug)]
pub struct Target<'a> {
    /// What the adapter declares to cubecl.
    pub cubecl: &'a CubeclProperties,
    /// The Lockstep device's properties.
    pub lockstep: &'a lockstep::DeviceProperties,
}

/// Compiled kernels and refusals, by cubecl kernel id.
#[derive(Debug, Default)]
pub struct KernelCache {
    compiled: HashMap<KernelId, Result<Arc<Compiled>, LaunchError>>,
}

impl KernelCache {
    /// `kernel` compiled for `target`, or why it cannot be.
    pub fn get(
        &mut self,
        kernel: &dyn CubeKernel,
        target: Target,
    ) -> Result<Arc<Compiled>, LaunchError> {
        let id = kernel.id();
        if let Some(result) = self.compiled.get(&id) {
            return result.clone();
        }
        let result = compile(kernel, target).map(Arc::new);
        self.compiled.insert(id, result.clone());
        result
    }
}

fn compile(kernel: &dyn CubeKernel, target: Target) -> Result<Compiled, LaunchError> {
    let id = kernel.id();
    validate_cube_dim(target.cubecl, &id)?;
    validate_units(target.cubecl, &id)?;
    let definition = define_kernel(kernel)?;
    let options = WgpuCompilationOptions::default();
    let wgsl = CompiledKernel::compile(kernel, definition, &mut WgslCompiler, &options)?;
    if let Some(shader) = &wgsl.repr {
        check_shared_memory(shader.shared_memory_size, target.cubecl)?;
    }
    let (module, info) = parse(&wgsl.source)?;
    let translated =
        translate(&module, &info).map_err(|refusal| CompilationError::UnsupportedInstruction {
            reason: refusal.to_string(),
            backtrace: BackTrace::capture(),
        })?;
    let lockstep = Kernel::new(translated.def).map_err(invalid)?;
    lockstep
        .validate_for_device(target.lockstep)
        .map_err(invalid)?;
    Ok(Compiled {
        kernel: lockstep.with_checks(checks(id.mode)),
        plan: translated.plan,
        io: wgsl.io,
    })
}

/// Lockstep's checks for cubecl's execution mode: checked for `Checked` and `Validate` (an
/// access out of range is skipped and reported as a kernel fault), none for `Unchecked`.
#[allow(
    unsafe_code,
    reason = "passes on the contract of cubecl's `launch_unchecked`, which the caller took"
)]
fn checks(mode: ExecutionMode) -> KernelChecks {
    match mode {
        ExecutionMode::Checked | ExecutionMode::Validate => KernelChecks::checked(),
        // SAFETY: cubecl launches in this mode only through its `unsafe` `launch_unchecked`
        // (`ComputeServer::launch`'s contract: "out-of-bound reads and writes can happen"),
        // whose caller promises every access in range, which is `KernelChecks::unchecked`'s
        // contract. The simulator traps an access out of range instead of running it.
        ExecutionMode::Unchecked => unsafe { KernelChecks::unchecked() },
    }
}

/// naga's module and analysis of `source`.
fn parse(source: &str) -> Result<(naga::Module, ModuleInfo), CompilationError> {
    let module =
        naga::front::wgsl::parse_str(source).map_err(|e| naga_error(e.emit_to_string(source)))?;
    let info = Validator::new(ValidationFlags::all(), Capabilities::all())
        .validate(&module)
        .map_err(|e| naga_error(e.emit_to_string(source)))?;
    Ok((module, info))
}

fn naga_error(message: String) -> CompilationError {
    CompilationError::Validation {
        reason: format!("naga refused the WGSL: {message}"),
        backtrace: BackTrace::capture(),
    }
}

fn invalid(error: lockstep::kernel::KernelError) -> CompilationError {
    CompilationError::Validation {
        reason: format!("Lockstep refused the translated kernel: {error}"),
        backtrace: BackTrace::capture(),
    }
}

fn check_shared_memory(requested: usize, declared: &CubeclProperties) -> Result<(), LaunchError> {
    let max = declared.hardware.max_shared_memory_size;
    if requested > max {
        return Err(ResourceLimitError::SharedMemory {
            requested,
            max,
            backtrace: BackTrace::capture(),
        }
        .into());
    }
    Ok(())
}
