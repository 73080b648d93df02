//! cubecl's `Runtime` and `Device` for Lockstep's simulator.

use cubecl_common::device::{Device, DeviceId};
use cubecl_core::zspace::{Shape, Strides};
use cubecl_ir::TargetProperties;
use cubecl_runtime::runtime::Runtime;
use lockstep::Device as _;
use lockstep_sim::SimDevice;

use crate::server::LockstepServer;

/// A simulated Lockstep device, by index. The default is device 0, what cubecl's tests use.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct LockstepDevice {
    /// The device's index among the simulated devices.
    pub index: u16,
}

/// The cubecl type id of Lockstep's simulated devices: the simulator's own.
pub const TYPE_ID: u16 = SimDevice::TYPE_ID;

impl Device for LockstepDevice {
    fn from_id(id: DeviceId) -> Self {
        Self { index: id.index_id }
    }

    fn to_id(&self) -> DeviceId {
        DeviceId {
            type_id: TYPE_ID,
            index_id: self.index,
        }
    }
}

/// cubecl's runtime over Lockstep's deterministic simulator: `TestRuntime` for cubecl's
/// suite. See the crate doc for what it runs and how it differs from cubecl's backends.
#[derive(Clone, Copy, Debug, Default)]
pub struct LockstepRuntime;

impl Runtime for LockstepRuntime {
    type Server = LockstepServer;
    type Device = LockstepDevice;

    /// Any strides: reads gather through Lockstep's `read_tensor`.
    fn can_read_tensor(_shape: &Shape, _strides: &Strides) -> bool {
        true
    }

    fn target_properties() -> TargetProperties {
        TargetProperties {
            mma: Default::default(),
        }
    }

    /// One simulated device.
    fn enumerate_devices(type_id: u16) -> Vec<DeviceId> {
        let device = LockstepDevice::default().to_id();
        if type_id == TYPE_ID {
            vec![device]
        } else {
            Vec::new()
        }
    }
}
