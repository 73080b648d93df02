//! A CUDA GPU as a conformance device.

use lockstep::{ComputeClient, DeviceError, ServerOptions};
use lockstep_cuda::{CudaContext, CudaDevice};

use super::{DeviceFactory, Session};

/// GPU `ordinal`, opened once: every session gets a fresh [`CudaDevice`] (its own streams and
/// allocations) on one shared CUDA context, so compiled kernels and pinned staging memory are
/// reused and a case costs no context creation.
#[derive(Clone, Debug)]
pub struct CudaFactory {
    context: CudaContext,
    pub options: ServerOptions,
}

impl CudaFactory {
    /// Opens the GPU, or says why it cannot ([`DeviceError::Unavailable`] without a driver,
    /// NVRTC or GPU).
    pub fn new(ordinal: u32) -> Result<Self, DeviceError> {
        Ok(Self {
            context: CudaContext::new(ordinal)?,
            options: ServerOptions::default(),
        })
    }

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
        let device = CudaDevice::with_context(&self.context);
        Session {
            client: ComputeClient::with_options(device, self.options),
            observer: None,
        }
    }

    fn deterministic(&self) -> bool {
        false
    }
}
