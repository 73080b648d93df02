//! `Server<D>`: the single-threaded state machine that owns a device. It lives on the device's
//! actor thread; every method runs there.
//!
//! It keeps the runtime's promises on top of the narrow [`Device`] trait:
//! - **Ordering.** Each buffer remembers its last write and the reads since; an access from
//!   another stream first waits on an event recorded on the conflicting stream
//!   (read-after-write, write-after-read, write-after-write). Same-stream order is the device's.
//! - **Errors.** Each stream has an error queue. Asynchronous failures land in the queue of the
//!   stream they happened on and are returned one per blocking call (`flush`, `sync`, `read`),
//!   oldest first, exactly once. A fatal device error makes every later call on every stream
//!   fail with `DeviceLost`.
//! - **Liveness.** A released slice returns to its pool at once when only its own stream used
//!   it (stream order protects it), otherwise only after events recorded on every stream that
//!   used it have completed. Pages go back to the device only when empty.
//! - **Memory.** Buffers are slices of pages carved by per-stream pools (`crate::memory`),
//!   whose books the calling threads share (`memory/books.rs`): an allocation a pool can serve is
//!   taken at the call and registered here later; one that needs a page comes here, where out
//!   of memory first reclaims (waits for pending frees, returns empty pages) and retries once.
//!   Released slices return to their pools only while a caller waits (`publish`).

// The server's state, each a leaf that names nothing of `Server`.
mod buffers;
mod graphs;
mod kernels;
mod profile_log;
mod streams;
// The server's operations beyond the core ones below: each an `impl Server` block.
mod capture;
mod collective;
mod invariants;
mod launch;
mod profiling;
mod resources;
mod sync_all;

use std::collections::BTreeMap;

use buffers::{Access, BufferState, PendingFree};
use graphs::{GraphState, PendingGraphDestroy};
use kernels::KernelCache;
use profile_log::ProfileLog;
use streams::{CaptureState, StreamState};

use crate::actor::ActorState;
use crate::bytes::Bytes;
use crate::device::{BufferSlice, Device};
use crate::error::{CaptureError, DeviceError, OutOfMemoryError, OutOfMemoryReason, ServerError};
use crate::ids::{BufferId, BufferRange, GraphId};
use crate::kernel::{FaultRecord, KernelChecks};
use crate::memory::{
    Books, DeviceMemory, InstallMemoryPoolsError, MemoryBudgetError, MemoryConfiguration,
    MemoryReport, MemoryUsage, PageId, PoolRef, SliceLocation,
};
use crate::record::RecordTo;
use crate::stream::StreamId;
use crate::sync::{Arc, Mutex, MutexGuard, lock};

/// Server behaviour chosen at client creation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ServerOptions {
    /// How kernels are compiled: checked (the default), an out-of-range access becomes
    /// [`ServerError::KernelFault`]; unchecked, it is undefined behaviour on a GPU, so asking
    /// for it takes the `unsafe` [`KernelChecks::unchecked`], whose safety contract then holds
    /// for every kernel the client launches.
    pub kernel_checks: KernelChecks,
    /// Insert event waits between streams that touch the same buffer. Only the conformance
    /// suite's self-test turns this off, to prove the suite notices.
    pub cross_stream_ordering: bool,
    /// Return a released slice that other streams used only after their work completed. Only
    /// the conformance suite's self-test turns this off, to prove the sanitizer notices.
    pub deferred_frees: bool,
    /// Refuse, as out of memory, a request whose rounding to whole alignment units overflows.
    /// Off, the rounded size wraps to zero and the request is served. Only the explorer's
    /// self-test turns this off, to prove the explorer notices.
    pub checked_slot_sizes: bool,
    /// A refused `stop_capture` (the stream is not capturing) leaves the stream as it was.
    /// Off, it resets the stream to idle and leaves its persistent window open. Only the
    /// explorer's self-test turns this off, to prove the explorer notices.
    pub refused_stop_capture_keeps_state: bool,
    /// Never record an event into a capturing stream: use the event recorded when its capture
    /// started, or record once the capture ends. Off, cross-stream waits and deferred frees
    /// record into the capture, which the device refuses. Only the explorer's self-test turns
    /// this off, to prove the explorer notices.
    pub capture_aware_events: bool,
    /// Bind a view (a tensor of a packed group) at its offset in its allocation. Off, launches
    /// bind every view at offset 0. Only the explorer's self-test turns this off, to prove the
    /// explorer notices.
    pub launch_view_offsets: bool,
    /// Send a view (a tensor of a packed group) from its offset in its allocation when
    /// `to_client` copies it to a peer. Off, the send starts at the allocation's start, as the
    /// copy of a view once did. Only the explorer's self-test turns this off, to prove the
    /// explorer notices.
    pub peer_copy_view_offsets: bool,
    /// Check the server's invariants after every task where the check is cheap next to the
    /// work: on a simulator ([`Device::SIMULATED`]) or in a build with debug assertions.
    /// Off, they are checked only after a task panicked. Only the runtime's self-test turns
    /// this off, to prove that the check after a panic works on its own.
    pub invariant_checks_every_task: bool,
    /// Refuse two bindings of a launch that share a byte when one is writable. Off, it refuses
    /// two bindings of one allocation, which shared no byte (views of one packing). Only the
    /// fuzzer's self-test turns this off, to prove the fuzzer refinds that bug.
    pub launch_aliasing_by_range: bool,
    /// Copy between clients through a send and a receive only when their devices are of one
    /// peer group (`Device::peer_group`). Off, devices of different groups (two simulator
    /// clusters) are taken for peers and the copy hangs. Only the fuzzer's self-test turns
    /// this off, to prove the fuzzer refinds that bug.
    pub peer_copies_within_group: bool,
    /// Return a failed lazy read's error from a create or write of its bytes. Off, the call
    /// panics with it. Only the fuzzer's self-test turns this off, to prove the fuzzer refinds
    /// that bug.
    pub lazy_read_errors_returned: bool,
    /// Where the client records its calls ([`record`](crate::record)): by default, to the
    /// file `LOCKSTEP_RECORD` names, if set.
    pub record: RecordTo,
}

impl Default for ServerOptions {
    fn default() -> Self {
        Self {
            kernel_checks: KernelChecks::checked(),
            cross_stream_ordering: true,
            deferred_frees: true,
            checked_slot_sizes: true,
            refused_stop_capture_keeps_state: true,
            capture_aware_events: true,
            launch_view_offsets: true,
            peer_copy_view_offsets: true,
            invariant_checks_every_task: true,
            launch_aliasing_by_range: true,
            peer_copies_within_group: true,
            lazy_read_errors_returned: true,
            record: RecordTo::Env,
        }
    }
}

/// The device buffer and byte offset of `range`. A free function so that callers can borrow
/// the device mutably at the same time.
fn raw<'a, B>(
    buffers: &BTreeMap<BufferId, BufferState>,
    pages: &'a BTreeMap<PageId, B>,
    range: &BufferRange,
) -> (&'a B, u64) {
    let slice = &buffers[&range.buffer].slice;
    (&pages[&slice.page], slice.offset + range.offset)
}

/// The device's view of `range`, as kernels and collectives bind it.
fn raw_slice<'a, B>(
    buffers: &BTreeMap<BufferId, BufferState>,
    pages: &'a BTreeMap<PageId, B>,
    range: &BufferRange,
) -> BufferSlice<'a, B> {
    let (buffer, offset) = raw(buffers, pages, range);
    BufferSlice {
        buffer,
        offset,
        len: range.len,
    }
}

pub(crate) struct Server<D: Device> {
    device: D,
    options: ServerOptions,
    streams: BTreeMap<StreamId, StreamState<D>>,
    buffers: BTreeMap<BufferId, BufferState>,
    /// Device allocations, carved by the books' pools.
    pages: BTreeMap<PageId, D::Buffer>,
    next_page: u64,
    /// The pools and what the calling threads share with the actor (`memory/books.rs`).
    books: Arc<Mutex<Books>>,
    /// The task running is a blocking call's, and its caller waits: the server may change what
    /// callers read in the books (`memory/books.rs`).
    caller_waits: bool,
    pending_frees: Vec<PendingFree<D>>,
    graphs: BTreeMap<GraphId, GraphState<D>>,
    next_graph: u64,
    pending_graph_destroys: Vec<PendingGraphDestroy<D>>,
    kernels: KernelCache<D>,
    /// Communicators the device created, by their device list (in rank order).
    communicators: BTreeMap<Vec<crate::device::DeviceId>, crate::collective::CommunicatorId>,
    /// Set by the first fatal device error; from then on every call fails with it.
    lost: Option<String>,
    profiling: ProfileLog<D>,
}

impl<D: Device> ActorState for Server<D> {
    fn task_panicked(&mut self, stream: StreamId, message: String) {
        tracing::error!(%stream, %message, "device task panicked");
        self.push_error(stream, ServerError::TaskPanicked { stream, message });
    }

    fn task_finished(&mut self, panicked: bool) {
        self.after_task(panicked);
    }

    fn caller_waits(&mut self, waits: bool) {
        // Before the task and after it: what the task released is published before the reply.
        self.caller_waits = true;
        self.publish();
        self.caller_waits = waits;
    }
}

impl<D: Device> Server<D> {
    pub fn new(device: D, options: ServerOptions) -> Self {
        let properties = device.properties();
        let memory = DeviceMemory::new(
            MemoryConfiguration::for_device(properties),
            properties.alignment_bytes,
        );
        Self {
            device,
            options,
            streams: BTreeMap::new(),
            buffers: BTreeMap::new(),
            pages: BTreeMap::new(),
            next_page: 0,
            books: Arc::new(Mutex::new(Books::new(memory))),
            caller_waits: false,
            pending_frees: Vec::new(),
            graphs: BTreeMap::new(),
            next_graph: 0,
            pending_graph_destroys: Vec::new(),
            kernels: KernelCache::new(),
            communicators: BTreeMap::new(),
            lost: None,
            profiling: ProfileLog::new(crate::profiling::ProfileLevel::from_env()),
        }
    }

    /// The books, for the clients to allocate at the call.
    pub fn books(&self) -> Arc<Mutex<Books>> {
        self.books.clone()
    }

    fn memory(&self) -> MutexGuard<'_, Books> {
        lock(&self.books)
    }

    // ---- error routing -------------------------------------------------------------------

    fn check_alive(&self) -> Result<(), ServerError> {
        match &self.lost {
            Some(reason) => Err(ServerError::DeviceLost {
                reason: reason.clone(),
            }),
            None => Ok(()),
        }
    }

    /// Routes a device error: fatal ones mark the device lost, others join `stream`'s queue.
    fn push_device_error(&mut self, stream: StreamId, err: DeviceError) {
        if err.is_fatal() {
            self.mark_lost(&err);
        } else {
            self.push_error(stream, ServerError::device(stream, err));
        }
    }

    /// Records the first fatal error: from now on every call fails with it.
    fn mark_lost(&mut self, err: &DeviceError) {
        if let DeviceError::Lost { reason } = err {
            self.mark_lost_because(reason.clone());
        }
    }

    /// Marks the device lost for `reason`, unless it already is: from now on every call on
    /// every stream fails with `DeviceLost` and the first reason.
    fn mark_lost_because(&mut self, reason: String) {
        if self.lost.is_none() {
            tracing::error!(%reason, "device lost");
            self.memory().lose(&reason);
            self.device.abandon(&reason);
            self.lost = Some(reason);
        }
    }

    /// Passes a device call's result through, first marking the device lost if the error is
    /// fatal: a loss is the whole device's, whichever call first sees it.
    fn noted<T>(&mut self, result: Result<T, DeviceError>) -> Result<T, DeviceError> {
        if let Err(err) = &result
            && err.is_fatal()
        {
            self.mark_lost(err);
        }
        result
    }

    /// [`noted`](Self::noted), as the error of a call made for `stream`.
    fn noted_on<T>(
        &mut self,
        stream: StreamId,
        result: Result<T, DeviceError>,
    ) -> Result<T, ServerError> {
        self.noted(result)
            .map_err(|err| ServerError::device(stream, err))
    }

    /// Waits for the work of every stream, ignoring failures: its callers are past reporting
    /// them (the server is dropped, or the device is being marked lost).
    fn drain_all(&mut self) {
        let raws: Vec<D::Stream> = self.streams.values().map(|s| s.raw).collect();
        for raw in raws {
            let _ = self.device.synchronize(raw);
        }
    }

    fn push_error(&mut self, stream: StreamId, err: ServerError) {
        // On a lost device there is no stream to queue on: `DeviceLost` supersedes the error.
        if let Ok(state) = self.stream(stream) {
            state.errors.push_back(err);
        }
    }

    /// Runs a device call whose failure is asynchronous to the user: it is queued on `stream`.
    fn enqueue_or_queue_error<T>(
        &mut self,
        stream: StreamId,
        call: impl FnOnce(&mut Self) -> Result<T, DeviceError>,
    ) -> Option<T> {
        match call(self) {
            Ok(v) => Some(v),
            Err(err) => {
                self.push_device_error(stream, err);
                None
            }
        }
    }

    /// Moves the device's observed failures and the fault record into the stream's queue, then
    /// returns the oldest queued error, if any. `fault_read` is a pending read of the fault
    /// record enqueued after the work being checked.
    fn surface_errors(
        &mut self,
        stream: StreamId,
        fault_read: Option<D::PendingRead>,
    ) -> Result<(), ServerError> {
        self.gather_errors(stream, fault_read)?;
        match self.stream(stream)?.errors.pop_front() {
            Some(err) => Err(err),
            None => Ok(()),
        }
    }

    /// Moves the device's observed failures and the fault record (`fault_read`, as for
    /// [`surface_errors`](Self::surface_errors)) into the stream's queue. The record is waited
    /// for first: that wait runs the stream's earlier work, whose failures are then taken too
    /// (taken before it, a failure of that work stayed with the device, and a read of no
    /// ranges returned `Ok` although the stream's earlier write had failed).
    fn gather_errors(
        &mut self,
        stream: StreamId,
        fault_read: Option<D::PendingRead>,
    ) -> Result<(), ServerError> {
        self.check_alive()?;
        let record = fault_read.map(|pending| self.device.wait_read(pending));
        self.take_device_errors(stream)?;
        match record {
            Some(Ok(bytes)) => self.inspect_fault_record(stream, &bytes),
            Some(Err(err)) => self.push_device_error(stream, err),
            None => {}
        }
        self.check_alive()
    }

    /// Moves the failures the device observed on `stream` into its queue.
    fn take_device_errors(&mut self, stream: StreamId) -> Result<(), ServerError> {
        let raw = self.stream(stream)?.raw;
        for err in self.device.take_errors(raw) {
            self.push_device_error(stream, err);
        }
        Ok(())
    }

    fn inspect_fault_record(&mut self, stream: StreamId, bytes: &[u8]) {
        let mut words = [0u32; FaultRecord::WORDS];
        for (word, chunk) in words.iter_mut().zip(bytes.chunks_exact(4)) {
            *word = u32::from_le_bytes(chunk.try_into().expect("chunks of four bytes"));
        }
        match FaultRecord::decode(&words) {
            Some(record) => {
                let kernel = self.kernels.name_of(&record);
                self.push_error(
                    stream,
                    ServerError::KernelFault {
                        kernel,
                        binding: record.binding,
                        index: record.index,
                        stream,
                    },
                );
            }
            // Zero it again, so that kernels can record into it.
            None if FaultRecord::is_corrupt(&words) => {}
            None => return,
        }
        // Clear the record so the next fault of this stream is reported on its own.
        let raw = self.streams[&stream].raw;
        let result = {
            let record_buf = self.streams[&stream]
                .fault_record
                .as_ref()
                .expect("a record was just read from this buffer");
            self.device
                .write(raw, record_buf, 0, &[0u8; FaultRecord::BYTES])
        };
        if let Err(err) = result {
            self.push_device_error(stream, err);
        }
    }

    /// Enqueues a read of the stream's fault record if a checked kernel ran since the last one.
    fn enqueue_fault_check(&mut self, stream: StreamId) -> Option<D::PendingRead> {
        let state = self.streams.get_mut(&stream)?;
        if !state.fault_record_dirty {
            return None;
        }
        state.fault_record_dirty = false;
        let raw = state.raw;
        let record = state.fault_record.as_ref()?;
        let result = self.device.read(raw, record, 0, FaultRecord::BYTES as u64);
        self.enqueue_or_queue_error(stream, |_| result)
    }

    // ---- streams and ordering ------------------------------------------------------------

    fn stream(&mut self, id: StreamId) -> Result<&mut StreamState<D>, ServerError> {
        if !self.streams.contains_key(&id) {
            self.check_alive()?;
            let raw = self.device.create_stream();
            let raw = self.noted_on(id, raw)?;
            self.device.label_stream(raw, id);
            tracing::debug!(stream = %id, "device stream opened");
            self.streams.insert(id, StreamState::new(raw));
        }
        Ok(self.streams.get_mut(&id).expect("inserted above"))
    }

    /// Orders the next operation of `stream` after every conflicting access to `buffer` from
    /// other streams, by waiting on events recorded on those streams.
    fn order_before_access(
        &mut self,
        stream: StreamId,
        buffer: BufferId,
        write: bool,
    ) -> Result<(), DeviceError> {
        if !self.options.cross_stream_ordering {
            return Ok(());
        }
        let conflicts = self.buffers[&buffer].conflicts(write);
        let raw = self.streams[&stream].raw;
        for dep in conflicts {
            if dep.stream == stream || self.streams[&stream].ordered_after(dep.stream, dep.seq) {
                continue;
            }
            let other = &self.streams[&dep.stream];
            let other_seq = other.seq;
            match &other.capture_start {
                Some(start) if self.options.capture_aware_events => {
                    self.device.wait_event(raw, start)?;
                }
                _ => {
                    let event = self.device.record_event(other.raw)?;
                    self.device.wait_event(raw, &event)?;
                }
            }
            self.streams
                .get_mut(&stream)
                .expect("stream exists")
                .waited
                .insert(dep.stream, other_seq);
        }
        Ok(())
    }

    /// Notes that the operation just enqueued on `stream` accessed `buffer`.
    fn after_access(&mut self, stream: StreamId, buffers: &[(BufferId, bool)]) {
        let state = self.streams.get_mut(&stream).expect("stream exists");
        debug_assert!(
            !state.capturing(),
            "captured work is ordered at replay, never in the access history"
        );
        state.seq += 1;
        let access = Access {
            stream,
            seq: state.seq,
        };
        for &(buffer, write) in buffers {
            if let Some(buf) = self.buffers.get_mut(&buffer) {
                buf.record(access, write);
            }
        }
    }

    // ---- memory --------------------------------------------------------------------------

    /// Allocates a slice of at least `size_bytes` on `stream`'s pools, in a blocking call: the
    /// pools could not serve it at the call (`memory/books.rs`). Fills it with `data`, if any.
    pub fn allocate(
        &mut self,
        stream: StreamId,
        size_bytes: u64,
        data: Option<Bytes>,
    ) -> Result<BufferId, ServerError> {
        let slice = self.allocate_slice(stream, size_bytes);
        let mut books = self.memory();
        let slice = match slice {
            Ok(slice) => slice,
            Err(err) => {
                books.refused_by_actor();
                return Err(err);
            }
        };
        books.served_by_actor(stream);
        let id = books.next_buffer();
        drop(books);
        self.adopt(stream, id, slice, size_bytes, data, true);
        Ok(id)
    }

    /// Takes over `buffer`, whose slice a calling thread took from `stream`'s pools at the call
    /// (`memory/books.rs`), and fills it with `data`, if any. Runs where the allocation would have
    /// run, in the stream's order, so it counts as a write there as the actor's own allocation
    /// does; on a lost device the buffer is kept for its release to return.
    pub fn register(
        &mut self,
        stream: StreamId,
        buffer: BufferId,
        size_bytes: u64,
        data: Option<Bytes>,
    ) {
        let slice = self.registered(buffer);
        self.adopt(stream, buffer, slice, size_bytes, data, true);
    }

    /// Takes over `buffer`, taken at a call outside any capture window of `stream` and
    /// registered at its handle's first use (`handle.rs`), just before that use. The allocation
    /// counts as a write on `stream` here, later than the call: that orders other streams after
    /// more of `stream`'s work, never less. A capture open now did not see the allocation, so
    /// it does not count as one made in the capture.
    pub fn register_at_first_use(&mut self, stream: StreamId, buffer: BufferId, size_bytes: u64) {
        let slice = self.registered(buffer);
        self.adopt(stream, buffer, slice, size_bytes, None, false);
    }

    fn registered(&mut self, buffer: BufferId) -> SliceLocation {
        self.memory()
            .registered(buffer)
            .expect("a slice taken at a call is registered once")
    }

    /// Makes `slice` the live buffer `id`, allocated on `stream` (open), written with `data`.
    /// `in_capture`: the allocation call came now, so a capture open on `stream` made it.
    fn adopt(
        &mut self,
        stream: StreamId,
        id: BufferId,
        slice: SliceLocation,
        size_bytes: u64,
        data: Option<Bytes>,
        in_capture: bool,
    ) {
        let state = self
            .streams
            .get_mut(&stream)
            .expect("an allocating stream is open");
        if let CaptureState::Capturing { allocated, .. } = &mut state.capture {
            *allocated |= in_capture;
        }
        let allocated = Access {
            stream,
            seq: state.seq,
        };
        self.buffers.insert(id, BufferState::new(slice, allocated));
        if let Some(data) = data.filter(|d| !d.is_empty()) {
            let range = BufferRange {
                buffer: id,
                offset: 0,
                len: size_bytes,
            };
            self.write(stream, range, data);
        }
    }

    /// Serves a slice from the pools, growing them by a page if needed; when a limit (a pool's
    /// cap, the device budget) or the device refuses the page, reclaims everything it can
    /// (as `memory_cleanup` does) and tries once more.
    fn allocate_slice(
        &mut self,
        stream: StreamId,
        size_bytes: u64,
    ) -> Result<SliceLocation, ServerError> {
        self.check_alive()?;
        self.stream(stream)?;
        self.reclaim();
        self.publish();
        let slot_bytes = self.memory().memory.slot_bytes(size_bytes);
        let size = match slot_bytes {
            Some(size) => size,
            // The knob reproduces the unchecked rounding, which wrapped to zero.
            None if !self.options.checked_slot_sizes => 0,
            None => {
                let reason = OutOfMemoryReason::SizeOverflow;
                return Err(self.out_of_memory(stream, size_bytes, reason));
            }
        };
        if let Ok(slice) = self.serve(stream, size)? {
            return Ok(slice);
        }
        self.reclaim_all();
        self.serve(stream, size)?
            .map_err(|refusal| self.out_of_memory(stream, size_bytes, refusal))
    }

    /// Serves `size` (a slot size) from `stream`'s pools, growing one by a page if its cap, the
    /// budget and the device allow; else says which refused. A fatal device error fails.
    fn serve(
        &mut self,
        stream: StreamId,
        size: u64,
    ) -> Result<Result<SliceLocation, OutOfMemoryReason>, ServerError> {
        let served = self.memory().memory.try_alloc(stream, size);
        let need = match served {
            Ok(slice) => return Ok(Ok(slice)),
            Err(need) => need,
        };
        let admitted = self.memory().memory.can_grow(stream, need);
        if let Err(limit) = admitted {
            return Ok(Err(limit));
        }
        match self.device.allocate(need.bytes) {
            Ok(raw) => {
                let page = PageId(self.next_page);
                self.next_page += 1;
                self.pages.insert(page, raw);
                Ok(Ok(self.memory().memory.grow(stream, need, page, size)))
            }
            Err(err) if err.is_fatal() => {
                self.push_device_error(stream, err.clone());
                Err(ServerError::device(stream, err))
            }
            Err(err) => Ok(Err(OutOfMemoryReason::Device(Box::new(err)))),
        }
    }

    /// The refusal of a request of `requested_bytes` on `stream`, with the pools' usage.
    fn out_of_memory(
        &self,
        stream: StreamId,
        requested_bytes: u64,
        reason: OutOfMemoryReason,
    ) -> ServerError {
        let usage = self.memory().memory.usage();
        ServerError::OutOfMemory(OutOfMemoryError {
            requested_bytes,
            stream,
            reason,
            bytes_reserved: usage.bytes_reserved,
            bytes_in_use: usage.bytes_in_use,
        })
    }

    /// The last handle to `buffer` is gone: return its slice once no work can still use it.
    pub fn release(&mut self, buffer: BufferId) {
        match self.buffers.get_mut(&buffer) {
            // A graph still replays it: released when the last such graph is destroyed.
            Some(state) if state.graph_refs > 0 => {
                state.released = true;
                return;
            }
            Some(_) => {}
            None => return,
        }
        let state = self.buffers.remove(&buffer).expect("checked above");
        let users = state.users();
        // Pools are per stream, so only the owning stream reuses a slice of its pools; its own
        // earlier work is ordered before any reuse. The persistent pool is shared by all.
        let owner_only = state.slice.pool != PoolRef::Persistent
            && users.iter().all(|&user| user == state.slice.stream);
        if owner_only || self.lost.is_some() || !self.options.deferred_frees {
            self.memory().release(state.slice);
            return;
        }
        let after = self.events_after(users);
        self.pending_frees.push(PendingFree {
            slice: state.slice,
            after,
        });
        self.reclaim();
    }

    /// Returns to their pools the released slices whose events have completed. On a lost
    /// device nothing will complete, and nothing can be corrupted any more: return them all.
    fn reclaim(&mut self) {
        let lost = self.lost.is_some();
        let mut index = 0;
        while index < self.pending_frees.len() {
            let done = lost || self.pending_frees[index].after.complete(&mut self.device);
            if done {
                let free = self.pending_frees.swap_remove(index);
                self.memory().release(free.slice);
            } else {
                index += 1;
            }
        }
        let mut index = 0;
        while index < self.pending_graph_destroys.len() {
            let done = lost
                || self.pending_graph_destroys[index]
                    .after
                    .complete(&mut self.device);
            if !done {
                index += 1;
                continue;
            }
            let destroy = self.pending_graph_destroys.swap_remove(index);
            self.device.destroy_graph(destroy.raw);
            self.unref_graph_buffers(destroy.buffers);
        }
    }

    /// Returns the released slices to their pools, where calling threads can take them: only
    /// while a blocking call's caller waits (`memory/books.rs`), so that which slice a call takes never
    /// depends on how far the actor got. Elsewhere they wait for the next publication.
    fn publish(&mut self) {
        if self.caller_waits {
            self.memory().publish();
        }
    }

    /// Waits for every pending free and graph destruction, returns the slices, and gives every
    /// empty page back to the device. In a blocking call only (`memory/books.rs`).
    fn reclaim_all(&mut self) {
        // Destroying a graph releases the buffers only it kept alive, which queues new pending
        // frees: wait again until nothing is pending. Two rounds suffice (frees release
        // nothing); the bound keeps a device whose events never complete from hanging here.
        for _ in 0..4 {
            if self.lost.is_some()
                || (self.pending_frees.is_empty() && self.pending_graph_destroys.is_empty())
            {
                break;
            }
            let mut waiting: Vec<StreamId> = self
                .pending_frees
                .iter()
                .map(|f| &f.after)
                .chain(self.pending_graph_destroys.iter().map(|g| &g.after))
                .flat_map(|after| after.streams.iter().copied())
                .collect();
            waiting.sort();
            waiting.dedup();
            for stream in waiting {
                let raw = self.streams[&stream].raw;
                if let Err(err) = self.device.synchronize(raw) {
                    self.push_device_error(stream, err);
                }
            }
            self.reclaim();
        }
        self.reclaim();
        self.publish();
        let empty = self.memory().memory.take_empty_pages();
        self.free_pages(empty);
    }

    /// Gives pages back to the device. A slice used only by its own stream returns to its pool
    /// while that stream's work on it may still be queued (stream order protects its reuse),
    /// so every stream is drained first: the device is never handed memory queued work uses.
    fn free_pages(&mut self, pages: Vec<PageId>) {
        if pages.is_empty() {
            return;
        }
        if self.lost.is_none() {
            let streams: Vec<(StreamId, D::Stream)> =
                self.streams.iter().map(|(&id, s)| (id, s.raw)).collect();
            for (id, raw) in streams {
                if let Err(err) = self.device.synchronize(raw) {
                    self.push_device_error(id, err);
                }
            }
        }
        for page in pages {
            let raw = self
                .pages
                .remove(&page)
                .expect("pools give back pages they hold");
            self.device.free(raw);
        }
    }

    /// Releases all memory the pools can give back.
    pub fn memory_cleanup(&mut self) {
        self.reclaim_all();
    }

    /// Sets the device budget; if the pools reserve more than it, gives every free page back
    /// first, and refuses (changing nothing) if they still do.
    pub fn set_memory_budget(
        &mut self,
        budget_bytes: Option<u64>,
    ) -> Result<(), MemoryBudgetError> {
        let reserved = self.memory().memory.usage().bytes_reserved;
        if budget_bytes.is_some_and(|budget| reserved > budget) {
            self.reclaim_all();
        }
        self.memory().memory.set_budget(budget_bytes)
    }

    /// Totals over every pool, after returning what completed: in a blocking call.
    pub fn memory_usage(&mut self) -> MemoryUsage {
        self.reclaim();
        self.publish();
        self.memory().memory.usage()
    }

    /// The report of `stream`'s pools, after returning what completed: in a blocking call.
    pub fn memory_report(&mut self, stream: StreamId) -> MemoryReport {
        self.reclaim();
        self.publish();
        MemoryReport {
            host_pool: self.device.host_pool_stats(),
            ..self.memory().memory.report(stream)
        }
    }

    /// Installs `config` for new streams and, if `stream`'s pools are idle, for `stream`.
    pub fn install_memory_pools(
        &mut self,
        stream: StreamId,
        config: MemoryConfiguration,
    ) -> Result<(), InstallMemoryPoolsError> {
        let healthy = self.lost.is_none()
            && self
                .stream(stream)
                .is_ok_and(|state| state.errors.is_empty());
        self.reclaim();
        self.publish();
        let installed = self.memory().memory.install(stream, config);
        if !healthy {
            return Err(InstallMemoryPoolsError::StreamUnavailable);
        }
        self.free_pages(installed?);
        Ok(())
    }

    // ---- transfers -----------------------------------------------------------------------

    /// Enqueues a write of `data` (freed once the device is done with it); failures surface
    /// at the stream's next blocking call.
    pub fn write(&mut self, stream: StreamId, dst: BufferRange, data: Bytes) {
        if self.lost.is_some() || self.stream(stream).is_err() {
            crate::bytes::free_in_background(data);
            return;
        }
        if let CaptureState::Capturing { refused_write, .. } = &mut self
            .streams
            .get_mut(&stream)
            .expect("stream exists")
            .capture
        {
            // A graph cannot carry a host copy: refused late, by stop_capture failing.
            *refused_write = true;
            crate::bytes::free_in_background(data);
            return;
        }
        let _ = self.enqueue_or_queue_error(stream, |server| {
            server.order_before_access(stream, dst.buffer, true)?;
            let raw_stream = server.streams[&stream].raw;
            let (raw, offset) = raw(&server.buffers, &server.pages, &dst);
            server.device.write_bytes(raw_stream, raw, offset, data)
        });
        self.after_access(stream, &[(dst.buffer, true)]);
    }

    /// Reads every range after all earlier work of `stream`, then surfaces the stream's oldest
    /// pending error instead of the bytes if there is one. A read of no ranges waits for the
    /// stream, so it surfaces the failures of its earlier work as any read does.
    pub fn read(
        &mut self,
        stream: StreamId,
        ranges: &[BufferRange],
    ) -> Result<Vec<Bytes>, ServerError> {
        self.check_alive()?;
        self.refuse_in_capture(stream, "read")?;
        let mut pending = Vec::with_capacity(ranges.len());
        for range in ranges {
            let read = self.enqueue_or_queue_error(stream, |server| {
                server.order_before_access(stream, range.buffer, false)?;
                let raw_stream = server.streams[&stream].raw;
                let (raw, offset) = raw(&server.buffers, &server.pages, range);
                server.device.read(raw_stream, raw, offset, range.len)
            });
            self.after_access(stream, &[(range.buffer, false)]);
            pending.push(read);
        }
        if ranges.is_empty() {
            // Nothing to wait for but the stream itself: a read of no ranges is still a
            // blocking call that returns the failures of the stream's earlier work.
            let raw_stream = self.streams[&stream].raw;
            if let Err(err) = self.device.synchronize(raw_stream) {
                self.push_device_error(stream, err);
            }
        }
        let fault_read = self.enqueue_fault_check(stream);
        let mut results = Vec::with_capacity(pending.len());
        let mut failed = Vec::new();
        for read in pending {
            let bytes = read.and_then(|read| match self.device.wait_read(read) {
                Ok(bytes) => Some(bytes),
                Err(err) => {
                    failed.push(err);
                    None
                }
            });
            results.push(bytes);
        }
        // Earlier work of the stream ran before these reads: its failures are older.
        self.take_device_errors(stream)?;
        for err in failed {
            self.push_device_error(stream, err);
        }
        self.surface_errors(stream, fault_read)?;
        self.reclaim();
        // Without a queued error every read succeeded.
        results
            .into_iter()
            .map(|bytes| {
                bytes.ok_or_else(|| ServerError::Device {
                    stream,
                    error: DeviceError::TransferFailed {
                        reason: "a read failed without reporting why".to_owned(),
                    },
                })
            })
            .collect()
    }

    // ---- graphs ----------------------------------------------------------------------------

    /// Refuses `operation` at once if `stream` is capturing.
    pub(crate) fn refuse_in_capture(
        &mut self,
        stream: StreamId,
        operation: &'static str,
    ) -> Result<(), ServerError> {
        if matches!(self.stream(stream)?.capture, CaptureState::Capturing { .. }) {
            return Err(CaptureError::Refused { operation, stream }.into());
        }
        Ok(())
    }

    /// Submits the stream's work and returns its oldest failure observed so far.
    pub fn flush(&mut self, stream: StreamId) -> Result<(), ServerError> {
        self.check_alive()?;
        self.refuse_in_capture(stream, "flush")?;
        let raw = self.streams[&stream].raw;
        if let Err(err) = self.device.flush(raw) {
            self.push_device_error(stream, err);
        }
        self.reclaim();
        self.surface_errors(stream, None)
    }

    /// Waits for all work of the stream and returns its oldest failure, if any.
    pub fn sync(&mut self, stream: StreamId) -> Result<(), ServerError> {
        self.check_alive()?;
        self.refuse_in_capture(stream, "sync")?;
        let fault_read = self.enqueue_fault_check(stream);
        let raw = self.streams[&stream].raw;
        if let Err(err) = self.device.synchronize(raw) {
            self.push_device_error(stream, err);
        }
        self.reclaim();
        self.surface_errors(stream, fault_read)
    }
}

impl<D: Device> Drop for Server<D> {
    fn drop(&mut self) {
        // Every handle is gone (each holds the actor alive), so only pending frees, pages and
        // fault records remain. Wait for all streams, then give everything back.
        if self.lost.is_none() {
            self.drain_all();
        }
        self.pending_frees.clear();
        for destroy in std::mem::take(&mut self.pending_graph_destroys) {
            self.device.destroy_graph(destroy.raw);
        }
        for (_, graph) in std::mem::take(&mut self.graphs) {
            self.device.destroy_graph(graph.raw);
        }
        for (_, raw) in std::mem::take(&mut self.pages) {
            self.device.free(raw);
        }
        for (_, state) in std::mem::take(&mut self.streams) {
            if let Some(record) = state.fault_record {
                self.device.free(record);
            }
        }
    }
}
