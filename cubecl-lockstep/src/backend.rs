//! Which Lockstep device a cubecl runtime runs on: the simulator always, wgpu and CUDA with
//! the crate features of those names.
//!
//! A [`Backend`] is a type, not a value, because cubecl keys its servers by type:
//! `LockstepRuntime<Simulator>`, `LockstepRuntime<Wgpu>` and `LockstepRuntime<Cuda>` are three
//! runtimes whose devices never meet. Everything else (translation, books, streams) is
//! written once over `lockstep::Device`.

use std::fmt::Debug;
use std::hash::Hash;

use lockstep::{Device, DeviceError};
use lockstep_sim::{SimConfig, SimDevice, SimProbe};

use crate::seed;

/// A Lockstep device kind the adapter can open.
pub trait Backend: Clone + Copy + Debug + Default + Eq + Hash + Send + Sync + 'static {
    /// The Lockstep device.
    type Device: Device + Debug;

    /// Opens device `index`; the error says why there is none (no adapter, no driver).
    fn open(index: u16) -> Result<Self::Device, DeviceError>;

    /// The sanitizer's findings of `device`, where it has a sanitizer (the simulator).
    fn probe(_device: &Self::Device) -> Option<SimProbe> {
        None
    }
}

/// Lockstep's deterministic simulator, seeded from `LOCKSTEP_SEED` (`seed`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Simulator;

impl Backend for Simulator {
    type Device = SimDevice;

    fn open(index: u16) -> Result<SimDevice, DeviceError> {
        Ok(SimDevice::new(SimConfig::new(seed::for_device(index))))
    }

    fn probe(device: &SimDevice) -> Option<SimProbe> {
        Some(device.probe())
    }
}

/// Lockstep's wgpu device (Vulkan, Metal, DX12 or GL; lavapipe without a GPU), chosen by
/// `LOCKSTEP_WGPU_BACKEND` and `LOCKSTEP_WGPU_ADAPTER`. Every index opens the first adapter
/// they select.
#[cfg(feature = "wgpu")]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Wgpu;

#[cfg(feature = "wgpu")]
impl Backend for Wgpu {
    type Device = lockstep_wgpu::WgpuDevice;

    fn open(_index: u16) -> Result<Self::Device, DeviceError> {
        lockstep_wgpu::WgpuDevice::new(lockstep_wgpu::WgpuOptions::from_env()?)
    }
}

/// Lockstep's CUDA device: GPU `index`, through cudarc and NVRTC loaded at run time.
#[cfg(feature = "cuda")]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Cuda;

#[cfg(feature = "cuda")]
impl Backend for Cuda {
    type Device = lockstep_cuda::CudaDevice;

    fn open(index: u16) -> Result<Self::Device, DeviceError> {
        lockstep_cuda::CudaDevice::new(u32::from(index))
    }
}
