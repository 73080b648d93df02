//! Collectives across the devices of one backend: what the client, the server and devices share.
//!
//! A communicator is named by the list of [`DeviceId`]s it joins, in rank order: rank `r` is
//! the device at position `r`. Every device of the list must create the communicator (the
//! client does it on first use) and issue the same collectives on it in the same order, as
//! with NCCL. Devices name themselves by [`DeviceId`] `{ type_id, index: ordinal }`, the ids
//! [`ComputeClient::enumerate_devices`](crate::ComputeClient::enumerate_devices) lists.

use thiserror::Error;

pub use crate::ids::CommunicatorId;
use crate::ids::{BufferId, BufferRange, DeviceId};
use crate::kernel::ElemType;

/// How an all-reduce combines the devices' inputs, element by element.
///
/// Integer sums and products wrap; `Mean` is the sum divided by the number of devices (integer
/// division, rounding toward zero, for `i32` and `u32`). The order in which a device combines
/// the inputs of floats is the device's promise: the simulator folds them in rank order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReduceOperation {
    /// The sum (wrapping for integers).
    Sum,
    /// The product (wrapping for integers).
    Prod,
    /// The smallest input (as [`BinOp::Min`](crate::kernel::BinOp::Min)).
    Min,
    /// The largest input (as [`BinOp::Max`](crate::kernel::BinOp::Max)).
    Max,
    /// The sum divided by the number of devices.
    Mean,
}

impl std::fmt::Display for ReduceOperation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let name = match self {
            ReduceOperation::Sum => "sum",
            ReduceOperation::Prod => "prod",
            ReduceOperation::Min => "min",
            ReduceOperation::Max => "max",
            ReduceOperation::Mean => "mean",
        };
        f.write_str(name)
    }
}

/// Why a collective or a peer copy failed.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum CollectiveError {
    /// The device (or its backend) has no collectives: check [`Features`](crate::Features) first.
    #[error("device {device} does not support collectives")]
    Unsupported {
        /// The device that refused.
        device: DeviceId,
    },
    /// The communicator's device list leaves out the device that called.
    #[error(
        "device {device} is not one of the communicator's devices {}",
        list(devices)
    )]
    NotInCommunicator {
        /// The device that called.
        device: DeviceId,
        /// The communicator's devices, in rank order.
        devices: Vec<DeviceId>,
    },
    /// A device list with a device of another backend, an index the backend does not have, or a
    /// device twice.
    #[error("invalid device list {}: {reason}", list(devices))]
    InvalidDevices {
        /// The list given.
        devices: Vec<DeviceId>,
        /// What is wrong with it, for a person to read.
        reason: String,
    },
    /// The devices issued different collectives at one position of the communicator's sequence
    /// (another kind, size, element type or operation, or a message of another length): every
    /// device must issue the same collectives in the same order.
    #[error("mismatched collective: {reason}")]
    Mismatch {
        /// What each device issued, for a person to read.
        reason: String,
    },
    /// A peer did not arrive at a collective within the timeout (it issued fewer collectives,
    /// stopped, or was lost). The collective's destination is unspecified.
    #[error(
        "collective #{sequence} on communicator {} timed out after {timeout_ns} ns: device {peer} never arrived",
        list(devices)
    )]
    PeerTimeout {
        /// The communicator's devices, in rank order.
        devices: Vec<DeviceId>,
        /// Position of the collective in the communicator's sequence, from 0.
        sequence: u64,
        /// The peer waited for (the one that issued the fewest collectives).
        peer: DeviceId,
        /// How long the device waited, in nanoseconds (virtual time on the simulator).
        timeout_ns: u64,
    },
    /// The backend's communicator failed (an NCCL error); it cannot be used again.
    #[error("communicator {} failed: {reason}", list(devices))]
    CommunicatorFailed {
        /// The communicator's devices, in rank order.
        devices: Vec<DeviceId>,
        /// What the backend reported.
        reason: String,
    },
}

/// `[0:0, 0:1]`: a device list as people read it.
fn list(devices: &[DeviceId]) -> String {
    let names: Vec<String> = devices.iter().map(DeviceId::to_string).collect();
    format!("[{}]", names.join(", "))
}

/// Checks a communicator's device list against the calling device: one backend, no device
/// twice, every index below `device_count`, and `own` among them.
#[cfg_attr(
    loom,
    allow(dead_code, reason = "the client calls it, which loom builds leave out")
)]
pub(crate) fn validate_devices(
    devices: &[DeviceId],
    own: DeviceId,
    device_count: u32,
) -> Result<(), CollectiveError> {
    let invalid = |reason: String| CollectiveError::InvalidDevices {
        devices: devices.to_vec(),
        reason,
    };
    if let Some(other) = devices.iter().find(|d| d.type_id != own.type_id) {
        return Err(invalid(format!(
            "{other} is not a device of backend {}",
            own.type_id
        )));
    }
    if let Some(absent) = devices.iter().find(|d| d.index >= device_count) {
        return Err(invalid(format!(
            "{absent} does not exist: the backend has {device_count} devices"
        )));
    }
    for (i, device) in devices.iter().enumerate() {
        if devices[..i].contains(device) {
            return Err(invalid(format!("{device} appears twice")));
        }
    }
    if !devices.contains(&own) {
        return Err(CollectiveError::NotInCommunicator {
            device: own,
            devices: devices.to_vec(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(index: u32) -> DeviceId {
        DeviceId { type_id: 0, index }
    }

    #[test]
    fn device_lists_are_validated() {
        assert_eq!(validate_devices(&[id(0), id(1)], id(1), 2), Ok(()));
        assert_eq!(
            validate_devices(&[id(0)], id(1), 2),
            Err(CollectiveError::NotInCommunicator {
                device: id(1),
                devices: vec![id(0)]
            })
        );
        let reason = |r: Result<(), CollectiveError>| match r {
            Err(CollectiveError::InvalidDevices { reason, .. }) => reason,
            other => panic!("expected InvalidDevices, got {other:?}"),
        };
        assert_eq!(
            reason(validate_devices(&[id(0), id(0)], id(0), 2)),
            "0:0 appears twice"
        );
        assert_eq!(
            reason(validate_devices(&[id(0), id(2)], id(0), 2)),
            "0:2 does not exist: the backend has 2 devices"
        );
        let foreign = DeviceId {
            type_id: 2,
            index: 0,
        };
        assert_eq!(
            reason(validate_devices(&[id(0), foreign], id(0), 2)),
            "2:0 is not a device of backend 0"
        );
    }
}

/// One collective operation of this device, as the client validated it.
#[cfg_attr(
    loom,
    allow(dead_code, reason = "loom builds leave out the client and server")
)]
#[derive(Clone, Debug)]
pub(crate) enum Collective {
    AllReduce {
        src: BufferRange,
        dst: BufferRange,
        elem: ElemType,
        op: ReduceOperation,
    },
    /// Sends `src`'s bytes to device `to` of the communicator.
    Send { src: BufferRange, to: DeviceId },
    /// Receives into `dst` what device `from` of the communicator sends.
    Recv { dst: BufferRange, from: DeviceId },
}

#[cfg_attr(
    loom,
    allow(dead_code, reason = "loom builds leave out the client and server")
)]
impl Collective {
    pub(crate) fn name(&self) -> &'static str {
        match self {
            Collective::AllReduce { .. } => "all_reduce",
            Collective::Send { .. } => "send",
            Collective::Recv { .. } => "recv",
        }
    }

    /// The buffers it touches, and whether it writes them.
    pub(crate) fn accesses(&self) -> Vec<(BufferId, bool)> {
        match self {
            Collective::AllReduce { src, dst, .. } => vec![(src.buffer, false), (dst.buffer, true)],
            Collective::Send { src, .. } => vec![(src.buffer, false)],
            Collective::Recv { dst, .. } => vec![(dst.buffer, true)],
        }
    }
}
