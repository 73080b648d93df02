//! [`Error`]: one error type for application code, so that `?` chains calls whose precise
//! errors differ (creates and reads return [`ServerError`], launches and writes [`IoError`],
//! `install_memory_pools` [`InstallMemoryPoolsError`], …).

use thiserror::Error;

use crate::distributed::{BootstrapError, EnvError};
use crate::error::{DeviceError, IoError, ServerError};
use crate::kernel::KernelError;
use crate::launch::CubeCountError;
use crate::memory::{InstallMemoryPoolsError, MemoryBudgetError};
use crate::profiling::ProfileError;

/// Any error a Lockstep call returns, for application code that propagates errors with `?`.
///
/// Each variant holds the precise error a method documents (its `# Errors` section), which
/// stays the method's return type: match on the variant to act on it. `Display` and
/// [`source`](std::error::Error::source) are the precise error's own (transparent), so an
/// error report prints each cause once, and the chain goes on through the precise error's
/// sources (a failed profile's [`ServerError`], for one).
///
/// ```
/// use lockstep::kernel::{Access, Axis, ElemType, KernelBuilder};
/// use lockstep::{Bytes, ComputeClient, CubeCount, KernelArguments};
/// use lockstep_sim::{SimConfig, SimDevice};
///
/// // Kernel building, create, launch and read each return their own error; `?` turns each
/// // into `lockstep::Error`.
/// fn double(data: &[f32]) -> Result<Vec<f32>, lockstep::Error> {
///     let client = ComputeClient::new(SimDevice::new(SimConfig::new(1)));
///     let mut k = KernelBuilder::new("double", [64, 1, 1]);
///     let values = k.binding(ElemType::F32, Access::ReadWrite);
///     let i = k.global_id(Axis::X);
///     k.if_(i.lt(values.len()), |k| k.store(values, i, values.load(i) * 2.0f32));
///     let kernel = k.build()?;
///     let handle = client.create(Bytes::from_elems(data))?;
///     let grid = CubeCount::covering(data.len() as u64, 64)?;
///     client.launch(&kernel, grid, KernelArguments::new().binding(&handle))?;
///     Ok(client.read_one(handle)?.to_elems())
/// }
/// assert_eq!(double(&[1.0, 2.5])?, vec![2.0, 5.0]);
/// # Ok::<(), lockstep::Error>(())
/// ```
#[derive(Clone, Debug, Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error {
    /// A failure of the runtime or the device, or bad input refused by a call that also waits.
    #[error(transparent)]
    Server(#[from] ServerError),
    /// Bad input refused by a call that only enqueues (`write`, `launch`).
    #[error(transparent)]
    Io(#[from] IoError),
    /// A kernel that does not validate.
    #[error(transparent)]
    Kernel(#[from] KernelError),
    /// A pool layout that cannot be installed now.
    #[error(transparent)]
    InstallMemoryPools(#[from] InstallMemoryPoolsError),
    /// A device budget below what the pools reserve.
    #[error(transparent)]
    MemoryBudget(#[from] MemoryBudgetError),
    /// A profile that could not be taken or resolved.
    #[error(transparent)]
    Profile(#[from] ProfileError),
    /// A grid that [`CubeCount::covering`](crate::CubeCount::covering) cannot size.
    #[error(transparent)]
    CubeCount(#[from] CubeCountError),
    /// A device that cannot be opened (a backend's constructor).
    #[error(transparent)]
    Device(#[from] DeviceError),
    /// A failed rendezvous of a world of processes.
    #[error(transparent)]
    Bootstrap(#[from] BootstrapError),
    /// A variable of the world's environment missing or malformed.
    #[error(transparent)]
    Env(#[from] EnvError),
}

#[cfg(test)]
mod tests {
    use std::error::Error as _;

    use super::*;
    use crate::stream::StreamId;

    #[test]
    fn the_message_and_the_sources_are_the_precise_errors() {
        let oom = ServerError::device(
            StreamId(2),
            DeviceError::OutOfMemory {
                requested_bytes: 64,
                available_bytes: 0,
            },
        );
        let err = Error::from(oom.clone());
        assert_eq!(err.to_string(), oom.to_string());
        assert!(err.source().is_none());
        assert_eq!(err, Error::Server(oom.clone()));

        // A profile that failed because its stream did: the chain reaches the stream's error.
        let failed = ProfileError::Server {
            name: "matmul".to_owned(),
            source: oom.clone(),
        };
        let err = Error::from(failed.clone());
        assert_eq!(err.to_string(), failed.to_string());
        let source = err.source().expect("the profile's cause");
        assert_eq!(source.downcast_ref::<ServerError>(), Some(&oom));
    }

    /// A rendezvous' errors did not convert, so a program that joins a world and then computes
    /// could not `?` both into one `Error`.
    #[test]
    fn the_rendezvous_errors_convert_too() {
        let missing = EnvError::Missing { name: "RANK" };
        let err = Error::from(missing.clone());
        assert_eq!(err.to_string(), missing.to_string());
        let aborted = BootstrapError::Aborted {
            reason: "rank 0 gave up".to_owned(),
        };
        assert_eq!(Error::from(aborted.clone()), Error::Bootstrap(aborted));
    }
}
