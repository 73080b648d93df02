//! Dry runs: launches that compile and validate but do not execute, for autotuning and for
//! planning memory without touching data.
//!
//! Whether a launch is a dry run is decided on the issuing thread, when it is submitted: by the
//! time a task reaches the device's actor, the context that made it a measurement is gone.

use std::cell::Cell;

thread_local! {
    /// Open [`dry_run`] scopes of this thread.
    static DRY_RUN_DEPTH: Cell<u32> = const { Cell::new(0) };
}

/// How the device treats a launch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LaunchMode {
    /// Compile if needed, then execute.
    Execute,
    /// Compile if needed (a compile failure surfaces as usual, at the next `flush`/`sync`),
    /// validate the arguments, and execute nothing: memory keeps its contents.
    DryRun,
}

/// The mode of launches the calling thread submits now.
pub fn launch_mode() -> LaunchMode {
    if DRY_RUN_DEPTH.with(Cell::get) > 0 {
        LaunchMode::DryRun
    } else {
        LaunchMode::Execute
    }
}

/// Runs `task` with every launch this thread submits in it made a dry run. Scopes nest; the
/// previous mode returns when `task` returns or panics. Launches submitted by other threads are
/// not affected.
pub fn dry_run<R>(task: impl FnOnce() -> R) -> R {
    struct Scope;
    impl Drop for Scope {
        fn drop(&mut self) {
            DRY_RUN_DEPTH.with(|depth| depth.set(depth.get() - 1));
        }
    }
    DRY_RUN_DEPTH.with(|depth| depth.set(depth.get() + 1));
    let _scope = Scope;
    task()
}

/// Runs `task` with this thread's launches executed, even inside a [`dry_run`] scope (a
/// measurement must run what it times). The scopes resume afterwards, even if `task` panics.
pub(crate) fn executing<R>(task: impl FnOnce() -> R) -> R {
    struct Resume(u32);
    impl Drop for Resume {
        fn drop(&mut self) {
            DRY_RUN_DEPTH.with(|depth| depth.set(self.0));
        }
    }
    let _resume = Resume(DRY_RUN_DEPTH.with(|depth| depth.replace(0)));
    task()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scopes_nest_and_end_on_panic() {
        assert_eq!(launch_mode(), LaunchMode::Execute);
        dry_run(|| {
            dry_run(|| assert_eq!(launch_mode(), LaunchMode::DryRun));
            assert_eq!(launch_mode(), LaunchMode::DryRun);
        });
        assert_eq!(launch_mode(), LaunchMode::Execute);
        let panicked = std::panic::catch_unwind(|| dry_run(|| panic!("inside")));
        assert!(panicked.is_err());
        assert_eq!(launch_mode(), LaunchMode::Execute);
        dry_run(|| executing(|| assert_eq!(launch_mode(), LaunchMode::Execute)));
        let other = std::thread::spawn(|| dry_run(|| std::thread::spawn(launch_mode).join()));
        assert_eq!(
            other.join().ok().and_then(Result::ok),
            Some(LaunchMode::Execute)
        );
    }
}
