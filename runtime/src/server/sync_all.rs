//! `sync_all`: one wait for every stream of the device, for callers who cannot tell which
//! stream their work went to.

use super::Server;
use crate::device::Device;
use crate::error::{CaptureError, ServerError};
use crate::stream::StreamId;

impl<D: Device> Server<D> {
    /// Waits for the work of every stream, then returns the oldest failure of the first stream
    /// (in [`StreamId`] order) that has one. Every other failure stays queued, so each is still
    /// returned exactly once: by its stream's next blocking call, or by a later `sync_all`.
    ///
    /// Refused at once, waiting for nothing, while a stream captures: its captured work runs
    /// only at replays, and a capturing stream may not be synchronized.
    pub fn sync_all(&mut self) -> Result<(), ServerError> {
        self.check_alive()?;
        let ids: Vec<StreamId> = self.streams.keys().copied().collect();
        if let Some(&stream) = ids.iter().find(|id| self.streams[id].capturing()) {
            return Err(CaptureError::Refused {
                operation: "sync_all",
                stream,
            }
            .into());
        }
        let fault_reads: Vec<_> = ids.iter().map(|&id| self.enqueue_fault_check(id)).collect();
        for &id in &ids {
            let raw = self.streams[&id].raw;
            if let Err(err) = self.device.synchronize(raw) {
                self.push_device_error(id, err);
            }
        }
        self.reclaim();
        for (&id, fault_read) in ids.iter().zip(fault_reads) {
            self.gather_errors(id, fault_read)?;
        }
        let first = ids
            .iter()
            .find_map(|id| self.streams.get_mut(id)?.errors.pop_front());
        first.map_or(Ok(()), Err)
    }
}
