//! The recorder: calling threads queue events (`queue.rs`), one writer thread per file
//! encodes and writes them (the module doc of `record` has why and the format).
//!
//! Invariants: the header and the [`Event::Process`] frame are on disk before `open` returns;
//! frames are written whole, in the queue's sequence order; a kernel's frame precedes the
//! first call that names it; the buffer is flushed whenever a sweep of the queue finds nothing
//! and before a [`Recorder::flush`] answers. After a write fails, nothing more is written and
//! every flush returns that failure.

use std::collections::HashSet;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, Sender, SyncSender, TryRecvError, channel, sync_channel};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use super::format::{
    Data, DeviceRecord, Event, HEADER_BYTES, MAGIC, Op, Outcome, ReadData, VERSION,
};
use super::hash;
use super::queue::{Queue, Queued};
use crate::bytes::{Bytes, HeldBytes};
use crate::kernel::Kernel;
use crate::stream::StreamId;

/// Data past this many bytes is always hashed, whatever `data_bytes_max` says, so that every
/// frame stays below the reader's [`FRAME_BYTES_MAX`](super::FRAME_BYTES_MAX).
pub const DATA_KEPT_BYTES_MAX: u64 = 256 << 20;

/// How to set up a [`Recorder`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecorderConfig {
    /// A create's or write's data up to this many bytes (at most [`DATA_KEPT_BYTES_MAX`]) is
    /// recorded; past it, its xxh3 hash (computed by the writer thread; by the calling thread
    /// only for pinned memory that cannot be held), and a replay cannot check what depends on it.
    pub data_bytes_max: u64,
}

impl Default for RecorderConfig {
    fn default() -> Self {
        Self {
            data_bytes_max: 1 << 20,
        }
    }
}

/// Which recorder a client's calls go to ([`ServerOptions::record`](crate::ServerOptions)).
#[derive(Clone, Copy, Debug, Default)]
pub enum RecordTo {
    /// The process's recorder if `LOCKSTEP_RECORD` is set (opened at the first client).
    #[default]
    Env,
    /// None.
    Off,
    /// This one.
    Recorder(&'static Recorder),
}

impl PartialEq for RecordTo {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (RecordTo::Env, RecordTo::Env) | (RecordTo::Off, RecordTo::Off) => true,
            (RecordTo::Recorder(a), RecordTo::Recorder(b)) => std::ptr::eq(*a, *b),
            _ => false,
        }
    }
}

impl Eq for RecordTo {}

impl RecordTo {
    /// The recorder this names, opening the process's one from the environment at first use.
    pub(crate) fn resolve(self) -> Option<&'static Recorder> {
        match self {
            RecordTo::Env => from_env(),
            RecordTo::Off => None,
            RecordTo::Recorder(recorder) => Some(recorder),
        }
    }
}

/// The process's recorder named by `LOCKSTEP_RECORD`, opened once. A path that cannot be
/// opened is reported on stderr, once, and nothing is recorded: a library cannot return it.
fn from_env() -> Option<&'static Recorder> {
    static FROM_ENV: OnceLock<Option<&'static Recorder>> = OnceLock::new();
    *FROM_ENV.get_or_init(|| {
        let path = std::env::var("LOCKSTEP_RECORD").ok()?;
        let world = std::env::var("WORLD_SIZE").ok();
        let path = process_path(&path, std::process::id(), world.as_deref());
        let mut config = RecorderConfig::default();
        if let Ok(max) = std::env::var("LOCKSTEP_RECORD_DATA_MAX") {
            match max.parse() {
                Ok(max) => config.data_bytes_max = max,
                Err(_) => eprintln!(
                    "lockstep: LOCKSTEP_RECORD_DATA_MAX={max} is not a byte count; using {}",
                    config.data_bytes_max
                ),
            }
        }
        match Recorder::open(&path, config) {
            Ok(recorder) => Some(recorder),
            Err(err) => {
                eprintln!(
                    "lockstep: LOCKSTEP_RECORD: cannot record to {}: {err}",
                    path.display()
                );
                None
            }
        }
    })
}

/// This process's file for `pattern`: `%p` becomes `pid`; without it, `.pid` is appended when
/// `world_size` says more than one process runs, so that ranks never share a file.
pub(crate) fn process_path(pattern: &str, pid: u32, world_size: Option<&str>) -> PathBuf {
    if pattern.contains("%p") {
        return PathBuf::from(pattern.replace("%p", &pid.to_string()));
    }
    let several = world_size.and_then(|w| w.parse::<u32>().ok()).unwrap_or(1) > 1;
    if several {
        PathBuf::from(format!("{pattern}.{pid}"))
    } else {
        PathBuf::from(pattern)
    }
}

/// Bytes whose hash an event's [`Data::Hash`] still lacks: the writer thread hashes them, off
/// the caller's path.
pub(crate) enum Unhashed {
    /// Heap bytes shared with the write ([`Bytes::share`]).
    Heap(Arc<Vec<u8>>),
    /// Pinned bytes held past the write's drop of them ([`PinnedMemory::hold`]).
    ///
    /// [`PinnedMemory::hold`]: crate::PinnedMemory::hold
    Pinned(Arc<dyn HeldBytes>),
}

/// How long the writer waits for a write to let go of heap bytes before it hashes them anyway.
const RELEASE_WAIT: Duration = Duration::from_secs(1);

/// How often the writer looks whether a write let go of heap bytes.
const RELEASE_POLL: Duration = Duration::from_micros(50);

impl Unhashed {
    /// Their xxh3 hash, once the write let go of them (pinned bytes are then let go back to
    /// their pool): hashing while the device's staging copy reads the same bytes would slow
    /// that copy down, both competing for memory bandwidth.
    fn hash(self) -> u64 {
        match self {
            Unhashed::Heap(bytes) => {
                let deadline = Instant::now() + RELEASE_WAIT;
                while Arc::strong_count(&bytes) > 1 && Instant::now() < deadline {
                    std::thread::sleep(RELEASE_POLL);
                }
                hash::whole(&bytes)
            }
            Unhashed::Pinned(held) => {
                let mut xxh3 = 0;
                held.read_released(&mut |bytes| xxh3 = hash::whole(bytes));
                xxh3
            }
        }
    }
}

/// A flush's answer: once everything queued before is written and flushed, the first write
/// failure if there was one.
type FlushReply = SyncSender<Result<(), String>>;

/// Records client calls to one file. It lives as long as the process (its writer thread with
/// it), so clients and their options can name it freely.
pub struct Recorder {
    queue: Queue,
    flushes: Sender<FlushReply>,
    /// What calls' and outcomes' `at_ns` count from.
    opened: Instant,
    next_call: AtomicU64,
    next_device: AtomicU32,
    config: RecorderConfig,
    path: PathBuf,
}

impl std::fmt::Debug for Recorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recorder")
            .field("path", &self.path)
            .finish()
    }
}

impl Recorder {
    /// Creates (or truncates) `path`, writes the header, and starts the writer thread. Pass it
    /// to clients as [`RecordTo::Recorder`].
    ///
    /// # Errors
    /// The file cannot be created or written.
    pub fn open(path: impl AsRef<Path>, config: RecorderConfig) -> std::io::Result<&'static Self> {
        let path = path.as_ref().to_path_buf();
        let mut file = File::create(&path)?;
        let mut start = header().to_vec();
        let process = Event::Process {
            pid: std::process::id(),
            data_bytes_max: config.data_bytes_max,
        };
        encode_frame(&process, &mut start);
        file.write_all(&start)?;
        let (flushes, flush_requests) = channel();
        let recorder: &'static Self = Box::leak(Box::new(Self {
            queue: Queue::default(),
            flushes,
            opened: Instant::now(),
            next_call: AtomicU64::new(0),
            next_device: AtomicU32::new(0),
            config,
            path,
        }));
        std::thread::Builder::new()
            .name("lockstep-recorder".into())
            .spawn(move || recorder.write_frames(&flush_requests, BufWriter::new(file)))?;
        Ok(recorder)
    }

    /// Nanoseconds since it opened.
    fn now_ns(&self) -> u64 {
        u64::try_from(self.opened.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    /// The file it writes.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Waits until everything recorded before is written and flushed to the file.
    ///
    /// # Errors
    /// The first write that failed (nothing was written after it).
    pub fn flush(&self) -> std::io::Result<()> {
        let (reply, answer) = sync_channel(1);
        let stopped = || std::io::Error::other("the recorder's writer thread stopped");
        self.flushes.send(reply).map_err(|_| stopped())?;
        answer
            .recv()
            .map_err(|_| stopped())?
            .map_err(std::io::Error::other)
    }

    /// Records a new client of a device (`name`, of `backend`, registered at `index` if it is)
    /// and returns what its calls record through.
    pub(crate) fn device(
        &'static self,
        name: &str,
        backend: u16,
        index: Option<u32>,
    ) -> DeviceRecorder {
        let device = self.next_device.fetch_add(1, Ordering::Relaxed);
        let record = DeviceRecord {
            device,
            name: name.to_owned(),
            backend,
            index,
        };
        self.queue.push(Event::Device(record), None, None);
        DeviceRecorder {
            recorder: self,
            device,
        }
    }
}

/// What one client's calls record through: its recorder and its device's number. Copied into
/// every clone and handle owner of the client.
#[derive(Clone, Copy, Debug)]
pub(crate) struct DeviceRecorder {
    recorder: &'static Recorder,
    device: u32,
}

impl DeviceRecorder {
    /// Records a call issued now on `stream`, with the kernel it names if any; returns its
    /// number, for its outcome.
    pub(crate) fn call(&self, stream: StreamId, op: Op, kernel: Option<&Kernel>) -> u64 {
        self.call_with_data(stream, op, kernel, None)
    }

    /// [`call`](Self::call) of an op whose data the writer hashes from `unhashed`.
    pub(crate) fn call_with_data(
        &self,
        stream: StreamId,
        op: Op,
        kernel: Option<&Kernel>,
        unhashed: Option<Unhashed>,
    ) -> u64 {
        let call = self.recorder.next_call.fetch_add(1, Ordering::Relaxed);
        let event = Event::Call {
            call,
            device: self.device,
            thread: thread_number(),
            stream: stream.0,
            op,
            at_ns: self.recorder.now_ns(),
        };
        self.recorder.queue.push(event, kernel, unhashed);
        call
    }

    /// Records what call `call` returned.
    pub(crate) fn outcome(&self, call: u64, outcome: Outcome) {
        let at_ns = self.recorder.now_ns();
        let event = Event::Outcome {
            call,
            outcome,
            at_ns,
        };
        self.recorder.queue.push(event, None, None);
    }

    /// Records a call refused at the call with `error`.
    pub(crate) fn refused(&self, stream: StreamId, name: &str, error: &dyn std::fmt::Display) {
        let op = Op::Refused {
            name: name.to_owned(),
            error: error.to_string(),
        };
        self.call(stream, op, None);
    }

    /// Records a waiting call: the call now, then `run`'s result as its outcome.
    pub(crate) fn waited<R, E: std::fmt::Display>(
        &self,
        stream: StreamId,
        op: Op,
        kernel: Option<&Kernel>,
        run: impl FnOnce() -> Result<R, E>,
    ) -> Result<R, E> {
        let call = self.call(stream, op, kernel);
        let result = run();
        self.returned(call, &result);
        result
    }

    /// Records what call `call` returned, when it returns no data.
    pub(crate) fn returned<R, E: std::fmt::Display>(&self, call: u64, result: &Result<R, E>) {
        let outcome = match result {
            Ok(_) => Outcome::Ok,
            Err(err) => Outcome::Err(err.to_string()),
        };
        self.outcome(call, outcome);
    }

    /// `bytes` as the recorder keeps them: a copy, or past its limit a hash. Heap bytes past
    /// the limit are shared (no copy), pinned ones held past their drop, and hashed by the
    /// writer thread: the hash is left to fill from what is returned. Other bytes (pinned
    /// memory that cannot be held) are hashed here.
    pub(crate) fn data(&self, bytes: &mut Bytes) -> (Data, Option<Unhashed>) {
        let kept_max = self.recorder.config.data_bytes_max.min(DATA_KEPT_BYTES_MAX);
        let len = bytes.len() as u64;
        if len <= kept_max {
            return (Data::Bytes(bytes.to_vec()), None);
        }
        let unhashed = match bytes.share() {
            Some(shared) => Some(Unhashed::Heap(shared)),
            None => (bytes.pinned_mut().and_then(|p| p.hold())).map(Unhashed::Pinned),
        };
        match unhashed {
            Some(unhashed) => (Data::Hash { len, xxh3: 0 }, Some(unhashed)),
            None => {
                let xxh3 = hash::whole(bytes);
                (Data::Hash { len, xxh3 }, None)
            }
        }
    }

    /// What a read of `bytes` returned, as recorded: their chunk hashes, and the bytes
    /// themselves up to `data_bytes_max` (a copy, on the thread the read returns to).
    pub(crate) fn read_data(&self, bytes: &[u8]) -> ReadData {
        let kept_max = self.recorder.config.data_bytes_max.min(DATA_KEPT_BYTES_MAX);
        ReadData {
            hashes: hash::chunk_hashes(bytes),
            bytes: (bytes.len() as u64 <= kept_max).then(|| bytes.to_vec()),
        }
    }

    /// Waits until the file holds everything recorded so far (a client's last clone does at
    /// its drop). A failure was reported on stderr when it happened, so it is not repeated.
    pub(crate) fn flush(&self) {
        let _ = self.recorder.flush();
    }
}

/// The calling thread's number in recordings: from 0, in order of first recorded call.
fn thread_number() -> u32 {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    std::thread_local! {
        static NUMBER: u32 = NEXT.fetch_add(1, Ordering::Relaxed);
    }
    NUMBER.with(|n| *n)
}

/// The file's header: magic, version, reserved zeros.
pub fn header() -> [u8; HEADER_BYTES] {
    let mut header = [0u8; HEADER_BYTES];
    header[..MAGIC.len()].copy_from_slice(&MAGIC);
    header[MAGIC.len()..MAGIC.len() + 2].copy_from_slice(&VERSION.to_le_bytes());
    header
}

/// Appends `event`'s frame (length, CRC-32, postcard payload) to `out`: with [`header`], how
/// tools and tests write a recording of their own.
pub fn encode_frame(event: &Event, out: &mut Vec<u8>) {
    let payload = postcard::to_allocvec(event)
        .unwrap_or_else(|err| panic!("postcard encodes every Event into a Vec: {err}"));
    let len = u32::try_from(payload.len())
        .unwrap_or_else(|_| panic!("an event of {} bytes exceeds a frame", payload.len()));
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(&crc32fast::hash(&payload).to_le_bytes());
    out.extend_from_slice(&payload);
}

/// How long the writer thread sleeps when a sweep of the queue finds nothing: the first time,
/// and at most (each sleep doubles the last). It polls rather than blocks, so that no call has
/// to wake it: waking a blocked thread is a futex call, which cost every recorded launch about
/// a microsecond on the H200's host. It sleeps a millisecond at least, so that a sweep of a
/// launching thread's buffer takes a few hundred events at once rather than a handful (each
/// sweep costs that thread a contended lock and the cache lines the writer read). What a
/// thread records reaches the file within the longest sleep, or at once through
/// [`Recorder::flush`].
const IDLE_SLEEP: (Duration, Duration) = (Duration::from_millis(1), Duration::from_millis(5));

impl Recorder {
    /// The writer thread: writes every queued event's frames, in sequence order, until the
    /// process ends, flushing the file whenever a sweep finds nothing and answering flushes.
    fn write_frames(
        &'static self,
        flush_requests: &Receiver<FlushReply>,
        mut out: BufWriter<File>,
    ) {
        let mut encoder = Encoder::default();
        let (mut held, mut ready) = (Vec::new(), Vec::new());
        let mut idle = IDLE_SLEEP.0;
        let mut unflushed = false;
        loop {
            // Requests first: a sweep that begins after one takes all that was queued before it.
            let replies = match drain(flush_requests) {
                Some(replies) => replies,
                None => break,
            };
            self.queue.take(&mut held, &mut ready);
            if ready.is_empty() && replies.is_empty() {
                if std::mem::take(&mut unflushed) {
                    encoder.write_out(&mut out, true);
                }
                std::thread::sleep(idle);
                idle = (idle * 2).min(IDLE_SLEEP.1);
                continue;
            }
            idle = IDLE_SLEEP.0;
            unflushed = true;
            for queued in ready.drain(..) {
                encoder.encode(queued);
                if encoder.frames.len() >= 1 << 16 {
                    encoder.write_out(&mut out, false);
                }
            }
            if !replies.is_empty() {
                encoder.write_out(&mut out, true);
                for reply in replies {
                    let _ = reply.send(encoder.failure.clone().map_or(Ok(()), Err));
                }
            }
        }
        encoder.write_out(&mut out, true);
    }
}

/// Every flush request waiting, or `None` once the recorder is gone.
fn drain(requests: &Receiver<FlushReply>) -> Option<Vec<FlushReply>> {
    let mut replies = Vec::new();
    loop {
        match requests.try_recv() {
            Ok(reply) => replies.push(reply),
            Err(TryRecvError::Empty) => return Some(replies),
            Err(TryRecvError::Disconnected) => return None,
        }
    }
}

/// The writer's frames not yet written, the kernels already written, and the first failure.
#[derive(Default)]
struct Encoder {
    frames: Vec<u8>,
    kernels_written: HashSet<u64>,
    failure: Option<String>,
}

impl Encoder {
    /// Encodes `queued`'s frames: its kernel's first, if new, and its event, with the hash of
    /// its data filled in.
    fn encode(&mut self, queued: Queued) {
        let Queued {
            mut event,
            kernel,
            unhashed,
        } = queued;
        if let Some(unhashed) = unhashed {
            fill_hash(&mut event, unhashed.hash());
        }
        if let Some(kernel) = kernel
            && self.kernels_written.insert(kernel.content_hash())
        {
            let def = kernel.def().clone();
            let hash = kernel.content_hash();
            encode_frame(&Event::Kernel { hash, def }, &mut self.frames);
        }
        encode_frame(&event, &mut self.frames);
    }

    /// Writes the frames (and flushes, if `flush`) unless a write failed before; the first
    /// failure is kept and reported on stderr.
    fn write_out(&mut self, out: &mut BufWriter<File>, flush: bool) {
        if self.failure.is_none() {
            let result = out
                .write_all(&self.frames)
                .and_then(|()| if flush { out.flush() } else { Ok(()) });
            if let Err(err) = result {
                eprintln!("lockstep: recording stopped: {err}");
                self.failure = Some(err.to_string());
            }
        }
        self.frames.clear();
    }
}

/// Sets the hash of the data `event` carries to `hash`.
fn fill_hash(event: &mut Event, hash: u64) {
    if let Event::Call {
        op:
            Op::Create {
                data: Some(Data::Hash { xxh3, .. }),
                ..
            }
            | Op::Write {
                data: Data::Hash { xxh3, .. },
                ..
            },
        ..
    } = event
    {
        *xxh3 = hash;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn several_processes_get_one_file_each() {
        assert_eq!(process_path("run.rec", 42, None), PathBuf::from("run.rec"));
        assert_eq!(
            process_path("run.rec", 42, Some("1")),
            PathBuf::from("run.rec")
        );
        assert_eq!(
            process_path("run.rec", 42, Some("4")),
            PathBuf::from("run.rec.42")
        );
        assert_eq!(
            process_path("run-%p.rec", 42, Some("4")),
            PathBuf::from("run-42.rec")
        );
    }
}
