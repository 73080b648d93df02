//! Tests and benchmarks that need what a machine may lack (a CUDA GPU, NCCL, NVRTC, a wgpu
//! adapter): the one place that decides whether a missing need is a visible skip or a failure.
//!
//! By default a test that cannot run prints `SKIPPED: ...` past the test harness's capture and
//! returns, so `cargo test` stays useful on a machine without a GPU. Where a run is meant to
//! check the hardware, a skip would read as a pass, so environment variables turn it into a
//! failure that names what could not run and why:
//!
//! - [`REQUIRE_GPU`]`=1` (the GPU scripts set it): every need; a GPU host has them all.
//! - [`REQUIRE_NVRTC`]`=1` (CI, which installs NVRTC but has no GPU): NVRTC.
//! - [`REQUIRE_WGPU`]`=1` (CI, where it installed lavapipe): a wgpu adapter.

use std::fmt;
use std::io::Write as _;

/// Makes every missing need a failure.
pub const REQUIRE_GPU: &str = "LOCKSTEP_REQUIRE_GPU";
/// Makes missing NVRTC a failure.
pub const REQUIRE_NVRTC: &str = "LOCKSTEP_REQUIRE_NVRTC";
/// Makes a missing wgpu adapter a failure.
pub const REQUIRE_WGPU: &str = "LOCKSTEP_REQUIRE_WGPU";

/// What a test or benchmark needs and the machine may not have.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Need {
    /// The CUDA driver, NVRTC and GPUs (as many as the test opens).
    CudaGpu,
    /// `libnccl`, for collectives on CUDA.
    Nccl,
    /// `libnvrtc` alone: compiling needs no GPU.
    Nvrtc,
    /// A wgpu adapter (a Vulkan or Metal driver, or Mesa's lavapipe).
    WgpuAdapter,
}

impl Need {
    /// The variables that make this need missing a failure, each set to `1`.
    pub fn required_by(self) -> &'static [&'static str] {
        match self {
            Need::CudaGpu | Need::Nccl => &[REQUIRE_GPU],
            Need::Nvrtc => &[REQUIRE_GPU, REQUIRE_NVRTC],
            Need::WgpuAdapter => &[REQUIRE_GPU, REQUIRE_WGPU],
        }
    }
}

impl fmt::Display for Need {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Need::CudaGpu => "CUDA GPU",
            Need::Nccl => "NCCL",
            Need::Nvrtc => "NVRTC",
            Need::WgpuAdapter => "wgpu adapter",
        })
    }
}

/// Says that `what` (a test or benchmark) cannot run here for lack of `need`, `reason` saying
/// why: a `SKIPPED` line written straight to the process's stderr (libtest captures `eprintln!`
/// of passing tests, and a skip must be seen), after which the caller returns.
///
/// # Panics
/// When one of `need`'s variables ([`Need::required_by`]) is `1`, with a message naming `what`,
/// the need, the reason and the variable: the run asked for every such test to run.
pub fn cannot_run(need: Need, what: &str, reason: &str) {
    match verdict(need, what, reason, |name| std::env::var(name).ok()) {
        Ok(line) => {
            let _ = std::io::stderr().write_all(line.as_bytes());
        }
        Err(message) => panic!("{message}"),
    }
}

/// The skip line (`Ok`), or the failure message (`Err`) when `var` reads one of `need`'s
/// variables as `1`.
fn verdict(
    need: Need,
    what: &str,
    reason: &str,
    var: impl Fn(&str) -> Option<String>,
) -> Result<String, String> {
    match need
        .required_by()
        .iter()
        .find(|name| var(name).as_deref() == Some("1"))
    {
        Some(name) => Err(format!(
            "{what} could not run: no {need} ({reason}); {name}=1 requires it"
        )),
        None => Ok(format!("SKIPPED: {what}: no {need} ({reason})\n")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(set: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |name| {
            set.iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| (*v).to_owned())
        }
    }

    #[test]
    fn without_a_requirement_a_missing_need_is_a_visible_skip() {
        let line = verdict(Need::CudaGpu, "a_test", "no libcuda", env(&[]));
        assert_eq!(
            line.as_deref(),
            Ok("SKIPPED: a_test: no CUDA GPU (no libcuda)\n")
        );
        // Only `1` requires: an empty or `0` value leaves the skip.
        let zero = env(&[(REQUIRE_GPU, "0"), (REQUIRE_NVRTC, "")]);
        assert!(verdict(Need::Nvrtc, "a_test", "missing", zero).is_ok());
    }

    #[test]
    fn require_gpu_makes_every_missing_need_a_failure_naming_it() {
        let gpu = env(&[(REQUIRE_GPU, "1")]);
        assert_eq!(
            verdict(
                Need::Nccl,
                "all_reduce_on_two_gpus",
                "libnccl.so.2 not found",
                &gpu
            ),
            Err(
                "all_reduce_on_two_gpus could not run: no NCCL (libnccl.so.2 not found); \
                 LOCKSTEP_REQUIRE_GPU=1 requires it"
                    .to_owned()
            )
        );
        for need in [Need::CudaGpu, Need::Nvrtc, Need::WgpuAdapter] {
            assert!(verdict(need, "t", "r", &gpu).is_err(), "{need}");
        }
    }

    #[test]
    fn narrower_variables_require_only_their_need() {
        let nvrtc = env(&[(REQUIRE_NVRTC, "1")]);
        assert_eq!(
            verdict(Need::Nvrtc, "compile", "r", &nvrtc),
            Err("compile could not run: no NVRTC (r); LOCKSTEP_REQUIRE_NVRTC=1 requires it".into())
        );
        assert!(verdict(Need::CudaGpu, "t", "r", &nvrtc).is_ok());
        assert!(verdict(Need::WgpuAdapter, "t", "r", &nvrtc).is_ok());
        let wgpu = env(&[(REQUIRE_WGPU, "1")]);
        assert!(verdict(Need::WgpuAdapter, "t", "r", &wgpu).is_err());
        assert!(verdict(Need::Nvrtc, "t", "r", &wgpu).is_ok());
    }
}
