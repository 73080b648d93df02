//! Collectives across the devices of one backend: what the client, the server and devices share.
//!
//! A communicator is named by the list of [`DeviceId`]s it joins, in rank order: rank `r` is
//! the device at position `r`. Every device of the list must create the communicator (the
//! client does it on first use) and issue the same collectives on it in the same order, as
//! with NCCL. Devices name themselves by [`DeviceId`] `{ type_id, index: ordinal }`, the ids
//! [`ComputeClient::enumerate_devices`](crate::ComputeClient::enumerate_devices) lists.

use thiserror::Error;

use crate::device::DeviceId;

/// How an all-reduce combines the devices' inputs, element by element.
///
/// Integer sums and products wrap; `Mean` is the sum divided by the number of devices (integer
/// division, rounding toward zero, for `i32` and `u32`). The order in which a device combines
/// the inputs of floats is the device's promise: the simulator folds them in rank order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReduceOperation {
    Sum,
    Prod,
    Min,
    Max,
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

/// A communicator a device created at the runtime's request. The runtime picks the id, unique
/// per device; devices key their communicators by it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CommunicatorId(pub u64);

/// Why a collective or a peer copy failed.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum CollectiveError {
    #[error("device {device} does not support collectives")]
    Unsupported { device: DeviceId },
    #[error(
        "device {device} is not one of the communicator's devices {}",
        list(devices)
    )]
    NotInCommunicator {
        device: DeviceId,
        devices: Vec<DeviceId>,
    },
    #[error("invalid device list {}: {reason}", list(devices))]
    InvalidDevices {
        devices: Vec<DeviceId>,
        reason: String,
    },
    #[error("mismatched collective: {reason}")]
    Mismatch { reason: String },
    #[error(
        "collective #{sequence} on communicator {} timed out after {timeout_ns} ns: device {peer} never arrived",
        list(devices)
    )]
    PeerTimeout {
        devices: Vec<DeviceId>,
        sequence: u64,
        peer: DeviceId,
        timeout_ns: u64,
    },
    #[error("communicator {} failed: {reason}", list(devices))]
    CommunicatorFailed {
        devices: Vec<DeviceId>,
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
