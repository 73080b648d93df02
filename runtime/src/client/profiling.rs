//! Profiling's part of the client: [`ComputeClient::profile`] and the per-launch levels. The
//! types they return are in `crate::profiling`.

use super::ComputeClient;
use crate::device::Device;
use crate::error::ServerError;
use crate::profiling::{ProfileDuration, ProfileError, ProfileLevel, ProfileSummary, TimingMethod};

impl<D: Device> ComputeClient<D> {
    /// How [`profile`](Self::profile) times work on this device.
    pub fn timing_method(&self) -> TimingMethod {
        if self.features().timestamps {
            TimingMethod::Device
        } else {
            TimingMethod::System
        }
    }

    /// Runs `func` on the calling thread and measures the work it submits to this client's
    /// stream: from everything submitted before the call to everything submitted by its end.
    /// The duration resolves later, so profiling does not wait for the work.
    ///
    /// Example: [Profiling](Self#profiling).
    ///
    /// # Errors
    /// [`ProfileError::Server`] at once, before `func` runs, if the stream is capturing a graph
    /// ([`CaptureError::Refused`](crate::CaptureError::Refused)) or the device is lost; after
    /// `func` if the stream started a capture inside it.
    pub fn profile<O>(
        &self,
        func: impl FnOnce() -> O,
        name: &str,
    ) -> Result<(O, ProfileDuration), ProfileError> {
        let _span = call_span!(self, "profile", name);
        let failed = |source| ProfileError::Server {
            name: name.to_owned(),
            source,
        };
        let method = self.timing_method();
        let start = self
            .call(move |server, stream| server.profile_mark(stream, method))
            .map_err(failed)?;
        let output = func();
        let end = self
            .call(move |server, stream| server.profile_mark(stream, method))
            .map_err(failed)?;
        let client = self.clone();
        let name = name.to_owned();
        let resolve = Box::pin(async move {
            client
                .call_async(move |server, stream| server.profile_elapsed(stream, start, end))
                .await
                .map_err(|source| ProfileError::Server { name, source })
        });
        Ok((output, ProfileDuration::new(method, resolve)))
    }

    /// Turns per-launch profiling on (`Some`) or off, starting a fresh summary. Launches of
    /// this client's devices register from the next submission on.
    pub fn set_profile_level(&self, level: Option<ProfileLevel>) {
        self.enqueue(move |server, _| server.set_profile_level(level));
    }

    /// The launches profiled so far. A launch is counted once its stream has been synced.
    ///
    /// # Errors
    /// [`ServerError::TaskPanicked`] if serving the call panicked; it answers on a lost device too.
    pub fn profile_summary(&self) -> Result<ProfileSummary, ServerError> {
        self.call(|server, _| Ok(server.profile_summary()))
    }
}
