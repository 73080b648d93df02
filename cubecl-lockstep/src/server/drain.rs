//! Where Lockstep's stream failures become the books' claims: drains, the sweep of freed
//! memory, allocation and the claim check.

use cubecl_environment::stream::StreamId;
use cubecl_runtime::memory_management::ManagedMemoryHandle;
use cubecl_runtime::server::{BufferBinding, ServerError};

use super::LockstepServer;
use super::errors;
use crate::backend::Backend;
use crate::books::StreamKey;
use crate::findings::Mode;
use crate::launch_log;
use crate::memory::region;

/// Syncs of one stream a drain makes at most: each returns one failure (oldest first), and a
/// stream holds one per failed operation of its window.
const SYNCS_PER_DRAIN: usize = 64;

impl<B: Backend> LockstepServer<B> {
    /// Drops the memory no cubecl handle holds any more, with its claims.
    pub(super) fn sweep(&mut self) {
        for freed in self.memory.sweep() {
            self.books.freed(freed);
        }
    }

    /// Waits for every stream with unproven work and moves each failure Lockstep returns
    /// onto the books, so that no Lockstep call meets a pending failure afterwards. `Err`
    /// only when the device is lost.
    pub(super) fn drain_all(&mut self) -> Result<(), ServerError> {
        self.ensure_alive()?;
        let drained = self.books.open_windows();
        for &key in &drained {
            self.drain(key);
        }
        self.report_findings(&drained);
        self.ensure_alive()
    }

    /// Logs what the kernel sanitizer found since the last drain; in `fail` mode, the
    /// launch's outputs carry it (`findings`).
    fn report_findings(&mut self, drained: &[StreamKey]) {
        for found in self.findings.collect(drained) {
            launch_log::finding(&found);
            if self.findings.mode() == Mode::Fail {
                self.books.refused(&found.written, errors::finding(&found));
            }
        }
    }

    fn drain(&mut self, key: StreamKey) {
        for _ in 0..SYNCS_PER_DRAIN {
            match self.streams.client(key).sync() {
                Ok(()) => break,
                Err(error) => {
                    let error = self.observe(&error);
                    self.books.drained_error(key, error);
                    if self.lost.is_some() {
                        break;
                    }
                }
            }
        }
        self.books.drained(key);
    }

    /// The claim check of `handles`: `Ok`, or every failure claiming their bytes.
    pub(super) fn check_now(&self, handles: &[BufferBinding]) -> Result<(), ServerError> {
        self.books
            .report(&handles.iter().map(region).collect::<Vec<_>>())
    }

    /// Backs `memory` with `size` bytes of Lockstep memory on `stream`'s Lockstep stream. A
    /// failure is also left on the memory, so its next read reports it.
    pub(super) fn allocate(
        &mut self,
        memory: ManagedMemoryHandle,
        size: u64,
        stream: StreamId,
    ) -> Result<(), ServerError> {
        self.sweep();
        let key = self.streams.key(stream);
        let allocated = match (self.ensure_alive(), size) {
            (Err(error), _) => Err(error),
            (Ok(()), 0) => Ok(None),
            (Ok(()), size) => self
                .streams
                .client(key)
                .empty(size as usize)
                .map(Some)
                .map_err(|e| self.observe(&e)),
        };
        match allocated {
            Ok(buffer) => {
                self.memory.insert(memory, buffer);
                Ok(())
            }
            Err(error) => {
                self.books.unallocated(&memory, error.clone());
                Err(error)
            }
        }
    }
}
