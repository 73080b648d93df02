//! The recorder: calling threads send events down a channel, one writer thread per file
//! encodes and writes them (the module doc of `record` has why and the format).
//!
//! Invariants: the header and the [`Event::Process`] frame are on disk before `open` returns;
//! frames are written whole, in the order the channel delivered them; a kernel's frame
//! precedes the first call that names it; the buffer is flushed whenever the channel is empty
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

impl Unhashed {
    /// Their xxh3 hash, once the write let go of them (pinned bytes are then let go back to
    /// their pool): hashing while the device's staging copy reads the same bytes would slow
    /// that copy down, both competing for memory bandwidth.
    fn hash(self) -> u64 {
        match self {
            Unhashed::Heap(bytes) => {
                let deadline = Instant::now() + RELEASE_WAIT;
                while Arc::strong_count(&bytes) > 1 && Instant::now() < deadline {
                    std::thread::sleep(IDLE_SLEEP.0);
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

/// What calling threads send the writer.
#[allow(
    clippy::large_enum_variant,
    reason = "a boxed event would cost every recorded call an allocation; flushes are rare"
)]
enum Message {
    /// An event, the kernel it names if it names one (written first if new), and the bytes
    /// whose hash its [`Data::Hash`] still lacks.
    Event(Event, Option<Kernel>, Option<Unhashed>),
    /// Answer once everything sent before is written and flushed.
    Flush(SyncSender<Result<(), String>>),
}

/// Records client calls to one file. It lives as long as the process (its writer thread with
/// it), so clients and their options can name it freely.
pub struct Recorder {
    sender: Sender<Message>,
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
        let (sender, receiver) = channel();
        std::thread::Builder::new()
            .name("lockstep-recorder".into())
            .spawn(move || write_frames(&receiver, BufWriter::new(file)))?;
        Ok(Box::leak(Box::new(Self {
            sender,
            opened: Instant::now(),
            next_call: AtomicU64::new(0),
            next_device: AtomicU32::new(0),
            config,
            path,
        })))
    }

    /// Nanoseconds since it opened.
    fn now_ns(&self) -> u64 {
        u64::try_from(self.opened.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    /// The file it writes.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Waits until everything sent before is written and flushed to the file.
    ///
    /// # Errors
    /// The first write that failed (nothing was written after it).
    pub fn flush(&self) -> std::io::Result<()> {
        let (reply, answer) = sync_channel(1);
        let stopped = || std::io::Error::other("the recorder's writer thread stopped");
        self.sender
            .send(Message::Flush(reply))
            .map_err(|_| stopped())?;
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
        self.send(Event::Device(record), None, None);
        DeviceRecorder {
            recorder: self,
            device,
        }
    }

    fn send(&self, event: Event, kernel: Option<Kernel>, unhashed: Option<Unhashed>) {
        // The writer thread only stops with the process: a failed send loses nothing more.
        let _ = self.sender.send(Message::Event(event, kernel, unhashed));
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
        let kernel = kernel.filter(|k| self.first_on_this_thread(k.content_hash()));
        self.recorder.send(event, kernel.cloned(), unhashed);
        call
    }

    /// Whether this thread names kernel `hash` to this recorder for the first time. Only then
    /// does the call carry the kernel (the writer writes its IR once, before the first call
    /// naming it: this thread's earlier calls came first down the channel), so that later
    /// launches share nothing with the writer thread but the channel.
    fn first_on_this_thread(&self, hash: u64) -> bool {
        std::thread_local! {
            static SENT: std::cell::RefCell<HashSet<(usize, u64)>> = Default::default();
        }
        let recorder = std::ptr::from_ref(self.recorder) as usize;
        SENT.with(|sent| sent.borrow_mut().insert((recorder, hash)))
    }

    /// Records what call `call` returned.
    pub(crate) fn outcome(&self, call: u64, outcome: Outcome) {
        let at_ns = self.recorder.now_ns();
        let event = Event::Outcome {
            call,
            outcome,
            at_ns,
        };
        self.recorder.send(event, None, None);
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

/// How long the writer thread sleeps on an empty channel: the first time, and at most (each
/// sleep doubles the last). It polls rather than blocks, so that a send never has to wake it:
/// waking a blocked receiver is a futex call, which cost every recorded launch about a
/// microsecond on the H200's host. What a thread sends reaches the file within the longest
/// sleep, or at once through [`Recorder::flush`].
const IDLE_SLEEP: (Duration, Duration) = (Duration::from_micros(50), Duration::from_millis(5));

/// The writer thread: writes every message's frames until the process ends, flushing the
/// file whenever the channel is empty.
fn write_frames(receiver: &Receiver<Message>, mut out: BufWriter<File>) {
    let mut kernels_written = HashSet::new();
    let mut failure: Option<String> = None;
    let mut frames = Vec::new();
    let mut idle = IDLE_SLEEP.0;
    let mut unflushed = false;
    loop {
        let message = match receiver.try_recv() {
            Ok(message) => message,
            Err(TryRecvError::Empty) => {
                if std::mem::take(&mut unflushed) {
                    write_out(&mut out, &mut frames, &mut failure, true);
                }
                std::thread::sleep(idle);
                idle = (idle * 2).min(IDLE_SLEEP.1);
                continue;
            }
            Err(TryRecvError::Disconnected) => break,
        };
        idle = IDLE_SLEEP.0;
        unflushed = true;
        match message {
            Message::Event(mut event, kernel, unhashed) => {
                if let Some(unhashed) = unhashed {
                    fill_hash(&mut event, unhashed.hash());
                }
                if let Some(kernel) = kernel
                    && kernels_written.insert(kernel.content_hash())
                {
                    let def = kernel.def().clone();
                    let hash = kernel.content_hash();
                    encode_frame(&Event::Kernel { hash, def }, &mut frames);
                }
                encode_frame(&event, &mut frames);
            }
            Message::Flush(reply) => {
                write_out(&mut out, &mut frames, &mut failure, true);
                let _ = reply.send(failure.clone().map_or(Ok(()), Err));
            }
        }
        if frames.len() >= 1 << 16 {
            write_out(&mut out, &mut frames, &mut failure, false);
        }
    }
    write_out(&mut out, &mut frames, &mut failure, true);
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

/// Writes `frames` (and flushes, if `flush`) unless a write failed before; the first failure
/// is kept and reported on stderr.
fn write_out(
    out: &mut BufWriter<File>,
    frames: &mut Vec<u8>,
    failure: &mut Option<String>,
    flush: bool,
) {
    if failure.is_none() {
        let result = out
            .write_all(frames)
            .and_then(|()| if flush { out.flush() } else { Ok(()) });
        if let Err(err) = result {
            eprintln!("lockstep: recording stopped: {err}");
            *failure = Some(err.to_string());
        }
    }
    frames.clear();
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
