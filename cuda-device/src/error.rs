//! How CUDA driver errors become [`DeviceError`]s.
//!
//! CUDA's asynchronous execution errors are *sticky*: after an illegal address (or an assert, a
//! hardware exception, a launch timeout) every later call on the context fails with the same
//! error, and neither a context reset nor a new primary context recovers the process. Such an
//! error is mapped to [`DeviceError::Lost`] and remembered by the [`Context`](crate::context)
//! so that every later call of every device sharing it fails the same way.

use cudarc::driver::DriverError;
use cudarc::driver::sys::CUresult;
use lockstep::DeviceError;

/// Whether `code` leaves the context unusable for the rest of the process.
pub(crate) fn is_sticky(code: CUresult) -> bool {
    matches!(
        code,
        CUresult::CUDA_ERROR_ILLEGAL_ADDRESS
            | CUresult::CUDA_ERROR_LAUNCH_TIMEOUT
            | CUresult::CUDA_ERROR_ASSERT
            | CUresult::CUDA_ERROR_HARDWARE_STACK_ERROR
            | CUresult::CUDA_ERROR_ILLEGAL_INSTRUCTION
            | CUresult::CUDA_ERROR_MISALIGNED_ADDRESS
            | CUresult::CUDA_ERROR_INVALID_ADDRESS_SPACE
            | CUresult::CUDA_ERROR_INVALID_PC
            | CUresult::CUDA_ERROR_LAUNCH_FAILED
            | CUresult::CUDA_ERROR_ECC_UNCORRECTABLE
            | CUresult::CUDA_ERROR_NVLINK_UNCORRECTABLE
            | CUresult::CUDA_ERROR_CONTEXT_IS_DESTROYED
            | CUresult::CUDA_ERROR_DEINITIALIZED
            | CUresult::CUDA_ERROR_DEVICE_UNAVAILABLE
            | CUresult::CUDA_ERROR_EXTERNAL_DEVICE
            | CUresult::CUDA_ERROR_UNKNOWN
    )
}

/// `CUDA_ERROR_NAME (description)`, from the driver's own tables.
pub(crate) fn describe(err: DriverError) -> String {
    let name = err
        .error_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|_| format!("{:?}", err.0));
    match err.error_string() {
        Ok(text) => format!("{name} ({})", text.to_string_lossy()),
        Err(_) => name,
    }
}

/// The message of a [`DeviceError::Lost`] caused by `err` in `call`.
pub(crate) fn lost_reason(call: &str, err: DriverError) -> String {
    format!(
        "CUDA context unusable after {} in `{call}`; CUDA errors of this kind are sticky, so every later call in this process fails: restart the process",
        describe(err)
    )
}

/// A non-sticky failure of `call`: the operation failed, the context is still usable.
pub(crate) fn execution_fault(call: &str, err: DriverError) -> DeviceError {
    DeviceError::ExecutionFault {
        operation: call.to_owned(),
        reason: describe(err),
    }
}
