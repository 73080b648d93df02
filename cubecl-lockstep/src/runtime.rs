//! cubecl's `Runtime` and `Device` for a Lockstep backend (the simulator by default).

use std::marker::PhantomData;

use cubecl_common::device::{Device, DeviceId};
use cubecl_core::zspace::{Shape, Strides};
use cubecl_ir::TargetProperties;
use cubecl_runtime::runtime::Runtime;
use lockstep::Device as _;

use crate::backend::{Backend, Simulator};
use crate::server::LockstepServer;

/// A Lockstep device of backend `B`, by index. The default is device 0, what cubecl's tests
/// use. Its cubecl type id is Lockstep's (`lockstep::Device::TYPE_ID`: simulator 0, wgpu 1,
/// CUDA 2).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct LockstepDevice<B: Backend = Simulator> {
    /// The device's index among the backend's devices.
    pub index: u16,
    backend: PhantomData<B>,
}

impl<B: Backend> LockstepDevice<B> {
    /// Device `index` of backend `B`.
    pub fn new(index: u16) -> Self {
        Self {
            index,
            backend: PhantomData,
        }
    }

    /// The cubecl type id of `B`'s devices.
    pub const TYPE_ID: u16 = B::Device::TYPE_ID;
}

impl<B: Backend> Device for LockstepDevice<B> {
    fn from_id(id: DeviceId) -> Self {
        Self::new(id.index_id)
    }

    fn to_id(&self) -> DeviceId {
        DeviceId {
            type_id: Self::TYPE_ID,
            index_id: self.index,
        }
    }
}

/// cubecl's runtime over a Lockstep backend: `LockstepRuntime` (the deterministic simulator)
/// is `TestRuntime` for cubecl's suite; `LockstepRuntime<Wgpu>` and `LockstepRuntime<Cuda>`
/// run the same kernels on real devices. See the crate doc for what it runs and how it
/// differs from cubecl's backends.
#[derive(Clone, Copy, Debug, Default)]
pub struct LockstepRuntime<B: Backend = Simulator>(PhantomData<B>);

impl<B: Backend> Runtime for LockstepRuntime<B> {
    type Server = LockstepServer<B>;
    type Device = LockstepDevice<B>;

    /// Any strides: reads gather through Lockstep's `read_tensor`.
    fn can_read_tensor(_shape: &Shape, _strides: &Strides) -> bool {
        true
    }

    fn target_properties() -> TargetProperties {
        TargetProperties {
            mma: Default::default(),
        }
    }

    /// One device per backend, under its own type id and under 0 (cubecl's "all").
    fn enumerate_devices(type_id: u16) -> Vec<DeviceId> {
        let device = LockstepDevice::<B>::default().to_id();
        if type_id == 0 || type_id == LockstepDevice::<B>::TYPE_ID {
            vec![device]
        } else {
            Vec::new()
        }
    }
}
