//! Lockstep's errors in cubecl's terms, and the lost device.

use cubecl_environment::backtrace::BackTrace;
use cubecl_runtime::poison::DevicePoison;
use cubecl_runtime::server::{LaunchError, ServerError};

use super::LockstepServer;
use crate::backend::Backend;
use crate::findings::{FINDINGS_ENV, Found};

/// cubecl's error for a Lockstep failure: out of memory as cubecl's launch error (its message
/// names the bytes asked for), a lost device as a poisoned one, the rest by its message.
pub fn from_lockstep(error: &lockstep::ServerError) -> ServerError {
    match error {
        lockstep::ServerError::OutOfMemory(oom) => ServerError::Launch(LaunchError::OutOfMemory {
            reason: oom.to_string(),
            backtrace: BackTrace::capture(),
        }),
        lockstep::ServerError::DeviceLost { .. } => {
            ServerError::DevicePoisoned(DevicePoison::new(error.to_string()))
        }
        other => generic(other.to_string()),
    }
}

/// cubecl's error for a call Lockstep refused (bad arguments, a binding it cannot serve).
pub fn refused(error: impl std::fmt::Display) -> ServerError {
    generic(format!("Lockstep refused the call: {error}"))
}

/// cubecl's error for a kernel sanitizer finding, in `LOCKSTEP_CUBECL_FINDINGS=fail` mode.
pub fn finding(found: &Found) -> ServerError {
    ServerError::Launch(LaunchError::Unknown {
        reason: format!(
            "Lockstep's kernel sanitizer found a {} in `{}` ({FINDINGS_ENV}=fail): {}",
            found.kind, found.kernel, found.detail
        ),
        backtrace: BackTrace::capture(),
    })
}

fn generic(reason: String) -> ServerError {
    ServerError::Generic {
        reason,
        backtrace: BackTrace::capture(),
    }
}

impl<B: Backend> LockstepServer<B> {
    /// `Err` once the device is lost.
    pub(super) fn ensure_alive(&self) -> Result<(), ServerError> {
        match &self.lost {
            Some(reason) => Err(ServerError::DevicePoisoned(DevicePoison::new(
                reason.clone(),
            ))),
            None => Ok(()),
        }
    }

    /// `error` in cubecl's terms, remembering a lost device.
    pub(super) fn observe(&mut self, error: &lockstep::ServerError) -> ServerError {
        if matches!(error, lockstep::ServerError::DeviceLost { .. }) {
            self.lost.get_or_insert_with(|| error.to_string());
        }
        from_lockstep(error)
    }
}
