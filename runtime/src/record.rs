//! Recording: every [`ComputeClient`](crate::ComputeClient) call of a process, written to a
//! file that `lockstep replay --recording` runs on the simulator and `lockstep recording`
//! summarises.
//!
//! # What is recorded
//!
//! Each call, when it is issued, as an [`Event::Call`]: its number (unique, increasing along
//! each thread; outcomes name calls by it), device, thread, stream and [`Op`] with its
//! arguments (sizes, ranges, grids, dry-run mode, each kernel's IR once, as an
//! [`Event::Kernel`] before its first use). The data a `create` or `write` carries is kept as
//! bytes up to the recorder's `data_bytes_max` and as an xxh3 hash past it ([`Data`]). A call
//! that waits for an answer later gets an [`Event::Outcome`]: a read's result as xxh3 hashes of
//! each [`CHUNK_BYTES`] chunk (so a replay names the first chunk that differs) and, up to
//! `data_bytes_max`, its bytes ([`ReadData`]: a replay then names the first differing value and
//! compares floats that kernels computed within a tolerance), or the error it returned. A call
//! refused at the call (an [`IoError`](crate::IoError)) is one [`Op::Refused`] with its error.
//! Releases of buffers and graphs, graph captures and replays are recorded as ops; collectives,
//! peer copies and memory settings by name only ([`Op::Other`], with the ranges they may write). Queries (properties, memory usage and
//! reports, profiles) and writes of no bytes are not recorded: they change nothing.
//!
//! What recording costs a call, on the calling thread: one branch when off; when on, building
//! the event (ranges and parameters copied, inline for a launch of up to four of each; data up
//! to `data_bytes_max` copied) and appending it to the thread's own queue. Larger data is
//! hashed by the writer thread: heap bytes shared with it without
//! a copy, pinned ones (`staging`, a read's bytes) held past the write's drop of them
//! ([`PinnedMemory::hold`](crate::PinnedMemory::hold)) and returned to their pool once hashed.
//! A kernel's IR goes to the writer with a thread's first call naming it only.
//! A read's chunk hashes (and its copy, when kept) are made by the thread the read returns to.
//!
//! **Architecture Invariant:** the file order of calls is consistent with every thread's
//! program order and with what threads learn of each other: a call's event takes its place in
//! the sequence before the call returns, so a handle another thread uses was created earlier in
//! the file. Calls of different threads that race keep the order they took their places in,
//! which need not be the order the device's actor took them in; a replay of a program whose
//! threads race may differ.
//!
//! # How it records without a global lock
//!
//! One [`Recorder`] per file, one file per process (`writer.rs`). The calling thread builds the
//! event (a copy of small data; large data is shared, not copied) and appends it to a buffer of
//! its own, numbered from one atomic sequence while it holds that buffer's lock (`queue.rs`);
//! call numbers come from another atomic counter. A writer thread sweeps every thread's buffer,
//! takes the events in sequence order, encodes them, dedups kernels by content hash, and
//! flushes its file whenever a sweep finds nothing; it polls (sleeping 1 to 5 ms when idle)
//! instead of blocking, so that no call pays for waking it, and a thread's buffer lock is
//! contended only while the writer sweeps it. What was recorded before a crash is on disk but
//! for the last few milliseconds. Dropping a client's last clone waits until the writer has
//! written everything recorded before.
//!
//! `LOCKSTEP_RECORD=PATH` records every client a process starts with default options
//! ([`RecordTo::Env`]); `%p` in PATH stands for the process id, which is also appended when
//! `WORLD_SIZE` says several processes run. `LOCKSTEP_RECORD_DATA_MAX=BYTES` sets
//! `data_bytes_max` (default 1 MiB). [`Recorder::open`] records to a file chosen in code.
//!
//! # Format (version 3)
//!
//! ```text
//! file   := header frame*
//! header := "LKSTPREC" (8 bytes) · version u16 LE · 0u16
//! frame  := length u32 LE · crc32 u32 LE of the payload · payload (`length` bytes)
//! payload:= one Event, encoded by postcard
//! ```
//!
//! Serialization is serde with postcard: a well-kept, compact (varint) and non-self-describing
//! encoding whose wire format is stable within its 1.x releases; each frame carries a CRC-32
//! (crc32fast, SIMD-accelerated) so a corrupted frame is told from a truncated one, and a reader
//! stops at the first bad frame with its byte offset (`reader.rs`). Hashes are xxh3-64
//! (twox-hash, which picks AVX2 or SSE2 at run time): tens of GB/s on one core.
//!
//! **Compatibility promise:** a reader reads exactly its own [`VERSION`]; the version goes up
//! with any change to the encoding of an [`Event`] (postcard carries no field names, so any
//! change is breaking), and a file of another version is refused as
//! [`RecordingError::WrongVersion`]. Version 3 added when each call was issued and returned
//! (`at_ns`, for `lockstep recording --perfetto`); version 2 the bytes of reads ([`ReadData`]),
//! of which version 1 kept hashes only.

mod format;
mod hash;
mod queue;
mod reader;
mod summary;
mod writer;

pub use format::{
    Bindings, Count, Data, DeviceRecord, Event, HEADER_BYTES, MAGIC, Op, Outcome, Params, Range,
    ReadData, ReadHashes, VERSION,
};
pub use hash::{CHUNK_BYTES, chunk_hashes, first_differing_chunk, whole as data_hash};
pub use reader::{FRAME_BYTES_MAX, Reader, RecordingError};
pub use summary::{Summary, brief, time_of};
pub(crate) use writer::DeviceRecorder;
pub use writer::{DATA_KEPT_BYTES_MAX, RecordTo, Recorder, RecorderConfig, encode_frame, header};
