//! The client's recording hooks (`record`'s module doc): each turns a call's checked arguments
//! into an [`Op`] on the calling thread, before the call returns, and costs one branch when
//! the client does not record. A call that would wait for an actor its own thread holds or
//! paused (inside `exclusive`) panics before it is recorded, as it panics unrecorded: a
//! recording holds only calls that were made.

use super::ComputeClient;
use crate::bytes::Bytes;
use crate::device::Device;
use crate::dry_run::LaunchMode;
use crate::error::ServerError;
use crate::handle::Handle;
use crate::ids::{BufferId, BufferRange};
use crate::kernel::{Kernel, Scalar};
use crate::launch::CubeCount;
use crate::record::{self as rec, DeviceRecorder, Op, Outcome};
use crate::stream::StreamId;

/// A recorded read waiting for its bytes: its recorder and call number.
pub(super) type PendingRead = Option<(DeviceRecorder, u64)>;

impl From<BufferRange> for rec::Range {
    fn from(range: BufferRange) -> Self {
        rec::Range {
            buffer: range.buffer.0,
            offset: range.offset,
            len: range.len,
        }
    }
}

impl<D: Device> ComputeClient<D> {
    /// `result`, recording its error as a refusal of `name` if this client records.
    pub(super) fn refusing<T, E: std::fmt::Display>(
        &self,
        name: &str,
        result: Result<T, E>,
    ) -> Result<T, E> {
        if let (Err(err), Some(recorder)) = (&result, &self.shared.recorder) {
            recorder.refused(self.stream_id(), name, err);
        }
        result
    }

    /// Runs a waiting call, recorded as `op` (naming `kernel`) with its outcome.
    pub(super) fn recorded<R, E: std::fmt::Display>(
        &self,
        op: impl FnOnce() -> Op,
        kernel: Option<&Kernel>,
        run: impl FnOnce() -> Result<R, E>,
    ) -> Result<R, E> {
        match &self.shared.recorder {
            Some(recorder) => {
                self.shared.actor.assert_callable(true);
                recorder.waited(self.stream_id(), op(), kernel, run)
            }
            None => run(),
        }
    }

    /// Records a call by name only, one a replay does not run, with the handles of this
    /// device it may write.
    pub(super) fn record_other(&self, name: &str, writes: &[&Handle]) {
        if let Some(recorder) = &self.shared.recorder {
            let writes = writes.iter().filter_map(|h| self.range(h).ok());
            let op = Op::Other {
                name: name.to_owned(),
                writes: writes.map(rec::Range::from).collect(),
            };
            recorder.call(self.stream_id(), op, None);
        }
    }

    /// Records a write of `data` into `range`.
    pub(super) fn record_write(&self, range: BufferRange, data: &mut Bytes) {
        if let Some(recorder) = &self.shared.recorder {
            self.shared.actor.assert_callable(false);
            let (data, unhashed) = recorder.data(data);
            let op = Op::Write {
                range: range.into(),
                data,
            };
            recorder.call_with_data(self.stream_id(), op, None, unhashed);
        }
    }

    /// Records a checked launch.
    pub(super) fn record_launch(
        &self,
        kernel: &Kernel,
        count: &CubeCount,
        ranges: &[BufferRange],
        params: &[Scalar],
        mode: LaunchMode,
    ) {
        let Some(recorder) = &self.shared.recorder else {
            return;
        };
        self.shared.actor.assert_callable(false);
        let count = match count {
            CubeCount::Static(x, y, z) => rec::Count::Static([*x, *y, *z]),
            // Checked already: the handle is this device's.
            CubeCount::Dynamic(handle) => match self.range(handle) {
                Ok(range) => rec::Count::Dynamic(range.into()),
                Err(_) => return,
            },
        };
        let op = Op::Launch {
            kernel: kernel.content_hash(),
            count,
            bindings: ranges.iter().map(|&r| r.into()).collect(),
            params: params.iter().copied().collect(),
            dry_run: mode == LaunchMode::DryRun,
        };
        recorder.call(self.stream_id(), op, Some(kernel));
    }

    /// Records a read of `ranges`, issued now; [`read_returned`] records its result.
    pub(super) fn record_read(&self, ranges: &[BufferRange]) -> PendingRead {
        let recorder = self.shared.recorder?;
        self.shared.actor.assert_callable(true);
        let op = Op::Read {
            ranges: ranges.iter().map(|&r| r.into()).collect(),
        };
        Some((recorder, recorder.call(self.stream_id(), op, None)))
    }
}

/// Records what a read returned: each range's chunk hashes (and bytes, up to the recorder's
/// limit), or its error. Hashing runs on the thread that returns the read.
pub(super) fn read_returned(read: PendingRead, result: &Result<Vec<Bytes>, ServerError>) {
    if let Some((recorder, call)) = read {
        let outcome = match result {
            Ok(bytes) => Outcome::Read(bytes.iter().map(|b| recorder.read_data(b)).collect()),
            Err(err) => Outcome::Err(err.to_string()),
        };
        recorder.outcome(call, outcome);
    }
}

/// Records the release of `buffer` (its last handle dropped) on `stream`.
pub(super) fn release(recorder: Option<&DeviceRecorder>, stream: StreamId, buffer: BufferId) {
    if let Some(recorder) = recorder {
        let op = Op::Release { buffer: buffer.0 };
        recorder.call(stream, op, None);
    }
}
