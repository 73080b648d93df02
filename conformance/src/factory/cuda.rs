//! A CUDA GPU as a conformance device.

use std::sync::OnceLock;

use lockstep::{ComputeClient, Device, DeviceError, ServerOptions};
use lockstep_cuda::{CudaContext, CudaDevice};

use super::{DeviceFactory, Session};

/// GPU `ordinal`, opened once: every session gets a fresh [`CudaDevice`] (its own streams and
/// allocations) on one shared CUDA context, so compiled kernels and pinned staging memory are
/// reused and a case costs no context creation.
#[derive(Clone, Debug)]
pub struct CudaFactory {
    context: CudaContext,
    /// Server options every session runs with.
    pub options: ServerOptions,
    /// The context of every GPU, opened on the first world of several devices.
    world: OnceLock<Result<Vec<CudaContext>, DeviceError>>,
}

impl CudaFactory {
    /// Opens the GPU, or says why it cannot ([`DeviceError::Unavailable`] without a driver,
    /// NVRTC or GPU).
    pub fn new(ordinal: u32) -> Result<Self, DeviceError> {
        Ok(Self {
            context: CudaContext::new(ordinal)?,
            options: ServerOptions::default(),
            world: OnceLock::new(),
        })
    }

    /// The shared CUDA context.
    pub fn context(&self) -> &CudaContext {
        &self.context
    }
}

impl DeviceFactory for CudaFactory {
    type Device = CudaDevice;

    fn name(&self) -> &'static str {
        "cuda"
    }

    fn open(&self, _seed: u64) -> Session<CudaDevice> {
        self.session(&self.context)
    }

    fn deterministic(&self) -> bool {
        false
    }

    /// Every GPU of the machine.
    fn world_size_max(&self) -> usize {
        CudaDevice::with_context(&self.context).device_count() as usize
    }

    /// GPUs `0..count`; `None` if there are fewer or one cannot be opened.
    fn open_world(&self, _seed: u64, count: usize) -> Option<Vec<Session<CudaDevice>>> {
        let contexts = self.world.get_or_init(|| {
            (0..self.world_size_max() as u32)
                .map(CudaContext::new)
                .collect()
        });
        let contexts = contexts.as_ref().ok()?;
        (count >= 1 && count <= contexts.len())
            .then(|| contexts[..count].iter().map(|c| self.session(c)).collect())
    }
}

impl CudaFactory {
    fn session(&self, context: &CudaContext) -> Session<CudaDevice> {
        Session {
            client: ComputeClient::with_options(CudaDevice::with_context(context), self.options),
            observer: None,
        }
    }
}
