//! The wgpu device as a conformance device: one adapter opened for the whole run, a fresh
//! `WgpuDevice` (its own streams, batches and bind groups) per case.

use std::sync::Arc;

use lockstep::{ComputeClient, DeviceError, ServerOptions};
use lockstep_wgpu::{GpuContext, WgpuDevice, WgpuOptions};

use super::{DeviceFactory, Session};

/// Opens sessions on one wgpu adapter. Opening the adapter and device once and viewing it
/// freshly per case keeps a 128-case run in seconds (compiled pipelines are shared too); each
/// session still starts with no streams, no buffers and no queued work.
#[derive(Clone, Debug)]
pub struct WgpuFactory {
    /// Server options every session runs with.
    pub options: ServerOptions,
    context: Arc<GpuContext>,
}

impl WgpuFactory {
    /// Opens the adapter `LOCKSTEP_WGPU_BACKEND` / `LOCKSTEP_WGPU_ADAPTER` select;
    /// [`DeviceError::Unavailable`] says why there is none.
    pub fn from_env() -> Result<Self, DeviceError> {
        let context = GpuContext::open(&WgpuOptions::from_env()?)?;
        Ok(Self {
            options: ServerOptions::default(),
            context,
        })
    }

    /// The shared wgpu context.
    pub fn context(&self) -> &Arc<GpuContext> {
        &self.context
    }
}

impl DeviceFactory for WgpuFactory {
    type Device = WgpuDevice;

    fn name(&self) -> &'static str {
        "wgpu"
    }

    /// # Panics
    /// If the adapter cannot give a new view its upload arena (out of device memory), which
    /// the suite cannot work around.
    fn open(&self, _seed: u64) -> Session<WgpuDevice> {
        let device = WgpuDevice::with_context(self.context.clone())
            .unwrap_or_else(|err| panic!("opening a wgpu device view failed: {err}"));
        Session {
            client: ComputeClient::with_options(device, self.options),
            observer: None,
        }
    }

    fn deterministic(&self) -> bool {
        false
    }
}
