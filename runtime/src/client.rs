//! `ComputeClient`: the user-facing API. Thread-safe, cheap to clone; every call becomes a task
//! for the device's actor.
//!
//! **Architecture Invariant:** tasks never carry [`Handle`]s. A handle's release is submitted
//! by the thread that drops its last clone, and the actor's queue is FIFO, so it runs after every
//! task queued while a clone was held, which the server then orders before the memory's reuse. A
//! clone dropped on the actor would instead submit the release at a point that depends on thread
//! timing, and two runs of one simulated seed would differ. A handle never used gives its slice
//! back to the books at that same drop instead (`handle.rs`), so that is as fixed.
//!
//! **API Boundary:** calls that only enqueue work (`write`, `launch`) validate their input and
//! return at once; failures of the work itself are returned by the next `flush`, `sync` or read
//! on the same stream. Calls that need an answer (`create`, `read`, `sync`, …) block until it.

/// Enters a `debug` span for a client call, naming the stream the call goes to. Free when no
/// subscriber listens: tracing evaluates the fields only for an enabled span.
macro_rules! call_span {
    ($client:expr, $name:literal $(, $($fields:tt)+)?) => {
        tracing::debug_span!($name, stream = %$client.stream_id() $(, $($fields)+)?).entered()
    };
}
pub(crate) use call_span;

mod collective;
mod lazy;
mod peer;
mod planted;
mod profiling;
mod record;
mod staging;
mod tensor_write;
mod throughput;

use std::future::Future;

use crate::actor::{ACTOR_DROPPED_TASK, ActorHandle, TaskPanicked};
use crate::block_on::block_on;
use crate::bytes::Bytes;
use crate::device::Device;
use crate::error::{IoError, ServerError};
use crate::graph::Graph;
use crate::handle::{Handle, Owner, Placement};
use crate::ids::{BufferId, BufferRange, CountArg, DeviceId};
use crate::kernel::Kernel;
use crate::launch::{CubeCount, KernelArguments};
use crate::layout::{
    CopyDescriptor, MemoryLayout, MemoryLayoutDescriptor, MemoryLayoutStrategy, dense_bytes,
    extent_bytes, gather_bytes, num_elems, plan, scatter,
};
use crate::memory::{
    AllocationPaths, AtCall, Books, InstallMemoryPoolsError, MemoryAllocationMode,
    MemoryBudgetError, MemoryConfiguration, MemoryPoolsConfig, MemoryReport, MemoryUsage,
    take_at_call,
};
use crate::properties::{DeviceProperties, Features};
use crate::record::{DeviceRecorder, Op};
use crate::registry;
use crate::server::{Server, ServerOptions};
use crate::stream::StreamId;
use crate::sync::{Arc, CALLER_SPIN, Mutex, Spin, lock};
#[cfg(doc)]
use crate::{OutOfMemoryReason, PoolLayout};

/// What every clone of a client shares.
struct Shared<D: Device> {
    actor: ActorHandle<Server<D>>,
    id: DeviceId,
    properties: DeviceProperties,
    /// What the device reported about its backend's devices and its collectives.
    peers: collective::Peers,
    /// The pools' books, shared with the server: allocations the pools can serve are taken
    /// here at the call (memory/books.rs).
    books: Arc<Mutex<Books>>,
    /// What every handle of this client holds.
    owner: Arc<dyn Owner>,
    /// The knobs the server was started with, for the checks made at the call.
    options: ServerOptions,
    /// Where its calls are recorded, if anywhere (`record`).
    recorder: Option<DeviceRecorder>,
}

impl<D: Device> Drop for Shared<D> {
    /// The last clone's drop waits until the recording holds every call made through it.
    fn drop(&mut self) {
        if let Some(recorder) = &self.recorder {
            recorder.flush();
        }
    }
}

/// What a client's handles hold of it (handle.rs): the actor and the books, not the client's
/// shared state, which [`ComputeClient::properties_mut`] needs unshared.
struct HandleOwner<D: Device> {
    actor: ActorHandle<Server<D>>,
    books: Arc<Mutex<Books>>,
    recorder: Option<DeviceRecorder>,
}

impl<D: Device> Owner for HandleOwner<D> {
    fn register(&self, stream: StreamId, buffer: BufferId, size: u64) {
        self.actor.submit(stream, move |server| {
            server.register_at_first_use(stream, buffer, size)
        });
    }

    fn release(&self, stream: StreamId, buffer: BufferId) {
        record::release(self.recorder.as_ref(), stream, buffer);
        self.actor
            .submit(stream, move |server| server.release(buffer));
    }

    fn give_back_unused(&self, buffer: BufferId) {
        record::release(self.recorder.as_ref(), StreamId::current(), buffer);
        lock(&self.books).give_back_unused(buffer);
    }
}

/// The entry point to a device: allocate, transfer, launch, synchronise.
///
/// # Streams: what a `sync` waits for
///
/// Every call goes to one stream: the client's pinned stream
/// ([`set_stream`](Self::set_stream)), or else **the calling thread's own default stream**
/// ([`StreamId::current`]), as in cubecl. Work on one stream runs in order, and the runtime
/// orders different streams' accesses to the same memory; but a stream's failures are returned
/// only by that stream's next `flush`, `sync` or read. So a `sync` on one thread neither waits
/// for another thread's work nor returns its failures, and a failure of work a thread enqueued
/// surfaces at that thread's next blocking call, whatever it reads.
///
/// To see the streams: [`sync_all`](Self::sync_all) waits for every stream of the device and
/// returns the first failure it finds; every failure names the stream it happened on
/// ([`ServerError::stream`]); with a `tracing` subscriber at `debug` (the CLI:
/// `RUST_LOG=lockstep=debug`), every call's span names its stream and a thread's first call
/// logs the default stream it opens. To keep work together across threads, pin the clients to
/// one stream.
///
/// ```
/// use lockstep::{Bytes, ComputeClient};
/// use lockstep_sim::{FaultKind, FaultPlan, ScriptedFault, SimConfig, SimDevice};
///
/// // A simulated device whose first transfer fails when it executes.
/// let faults = FaultPlan::scripted([ScriptedFault::at(FaultKind::TransferFailure, 1)]);
/// let client = ComputeClient::new(SimDevice::new(SimConfig::new(7).with_faults(faults)));
/// let handle = client.empty(16)?;
///
/// // A worker thread writes: the write goes to the worker's own stream.
/// let worker = client.clone();
/// let worker_stream = std::thread::spawn(move || {
///     worker.write(&handle, Bytes::from_elems(&[1u32; 4])).unwrap();
///     worker.stream_id()
/// })
/// .join()
/// .unwrap();
/// assert_ne!(worker_stream, client.stream_id());
///
/// // This thread's stream did nothing that failed: its sync returns Ok.
/// client.sync()?;
/// // sync_all waits for every stream and returns the write's failure, naming its stream.
/// let failure = client.sync_all().unwrap_err();
/// assert_eq!(failure.stream(), Some(worker_stream));
/// // Returned once: every stream is healthy again.
/// client.sync_all()?;
/// # Ok::<(), lockstep::Error>(())
/// ```
///
/// # Errors of every call that waits
///
/// A call that waits for the device (it returns `Result<_, ServerError>`) may also return
/// [`ServerError::DeviceLost`] once the device is lost (every later call fails alike, and
/// nothing hangs), [`ServerError::Device`] if the device cannot open the stream at the
/// stream's first use, and [`ServerError::TaskPanicked`] if serving the call panicked (a bug
/// of the runtime or the device; the device goes on serving). Calls that only enqueue
/// (`write`, `launch`) check their input and return [`IoError`]; what goes wrong after is
/// returned by the stream's next `flush`, `sync` or read. Each method's `# Errors` lists the
/// rest; [`lockstep::Error`](crate::Error) takes them all, for `?`.
///
#[doc = include_str!("client/groups.md")]
///
#[doc = include_str!("client/differences.md")]
pub struct ComputeClient<D: Device> {
    shared: Arc<Shared<D>>,
    /// Pinned stream; `None` means the calling thread's stream.
    stream: Option<StreamId>,
}

impl<D: Device> Clone for ComputeClient<D> {
    fn clone(&self) -> Self {
        Self {
            shared: self.shared.clone(),
            stream: self.stream,
        }
    }
}

impl<D: Device> std::fmt::Debug for ComputeClient<D> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ComputeClient")
            .field("device", &self.shared.id)
            .field("name", &self.shared.properties.name)
            .field("stream", &self.stream)
            .finish()
    }
}

impl<D: Device> ComputeClient<D> {
    /// Starts an actor for `device` with default options. The client is not registered: use
    /// [`init`](Self::init) to make it reachable through [`load`](Self::load).
    pub fn new(device: D) -> Self {
        Self::with_options(device, ServerOptions::default())
    }

    /// Like [`new`](Self::new), with the server's knobs set by `options`.
    pub fn with_options(device: D, options: ServerOptions) -> Self {
        Self::start(registry::anonymous_id::<D>(), device, options)
    }

    /// Starts an actor for `device` and registers it as device `index` of its backend.
    ///
    /// # Panics
    /// If a live client is already registered for that device; [`load`](Self::load) it instead.
    pub fn init(index: u32, device: D) -> Self {
        let id = DeviceId {
            type_id: D::TYPE_ID,
            index,
        };
        let client = Self::start(id, device, ServerOptions::default());
        registry::register(id, &client.shared);
        client
    }

    /// The registered client of device `index` of backend `D`, if one is alive.
    pub fn load(index: u32) -> Option<Self> {
        let id = DeviceId {
            type_id: D::TYPE_ID,
            index,
        };
        registry::lookup::<Shared<D>>(id).map(|shared| Self {
            shared,
            stream: None,
        })
    }

    /// A client whose device work runs on the calling thread, under a lock, instead of on an
    /// actor thread: every call has run its task when it returns, and a read's future is ready
    /// at once. Work and errors are ordered exactly as with [`new`](Self::new): tasks of one
    /// thread always ran in submission order.
    ///
    /// For single-threaded simulation (the explorer and the fuzzer run their simulated clients
    /// this way), where two thread hand-offs per call cost more than the simulated work. On a
    /// real device, a call that enqueues would wait for the driver; and a device wait that
    /// depends on another thread's later call (a collective whose peer has not enqueued its
    /// part) blocks the caller, as it would block an actor.
    pub fn inline(device: D, options: ServerOptions) -> Self {
        let id = registry::anonymous_id::<D>();
        Self::served(id, device, options, ActorHandle::inline)
    }

    fn start(id: DeviceId, device: D, options: ServerOptions) -> Self {
        let name = format!("lockstep-device-{id}");
        Self::served(id, device, options, |server| {
            ActorHandle::spawn(name, server)
        })
    }

    /// A client of `device` whose server runs on the actor that `actor` makes of it.
    fn served(
        id: DeviceId,
        device: D,
        options: ServerOptions,
        actor: impl FnOnce(Server<D>) -> ActorHandle<Server<D>>,
    ) -> Self {
        let properties = device.properties().clone();
        let peers = collective::Peers::of(&device);
        let index = (!registry::is_anonymous(id)).then_some(id.index);
        let recorder =
            (options.record.resolve()).map(|r| r.device(&properties.name, id.type_id, index));
        let server = Server::new(device, options);
        let books = server.books();
        let actor = actor(server);
        Self {
            shared: Arc::new(Shared {
                owner: Arc::new(HandleOwner {
                    actor: actor.clone(),
                    books: books.clone(),
                    recorder,
                }),
                actor,
                id,
                properties,
                peers,
                books,
                options,
                recorder,
            }),
            stream: None,
        }
    }

    /// Which device this client drives: handles it creates carry this id, and every call refuses a
    /// handle of another device ([`IoError::WrongDevice`]).
    pub fn device_id(&self) -> DeviceId {
        self.shared.id
    }

    /// The stream this client's work goes to: the pinned one, or the calling thread's.
    pub fn stream_id(&self) -> StreamId {
        self.stream.unwrap_or_else(StreamId::current)
    }

    /// Pins this client (not its clones made earlier) to `stream`: all its work goes there,
    /// whichever thread calls. Work on one stream executes in order; the runtime orders work of
    /// different streams that touch the same memory.
    pub fn set_stream(&mut self, stream: StreamId) {
        self.stream = Some(stream);
    }

    /// What the device is and can do: its name, memory, limits and features.
    pub fn properties(&self) -> &DeviceProperties {
        &self.shared.properties
    }

    /// The device's optional capabilities (graphs, timestamps, concurrent streams).
    pub fn features(&self) -> &Features {
        &self.shared.properties.features
    }

    /// The device's description (the seed's runtime info): name, backend and driver, limits.
    /// The same as [`properties`](Self::properties).
    pub fn info(&self) -> &DeviceProperties {
        self.properties()
    }

    /// Mutable properties, for adjusting what this client assumes of the device (e.g. a
    /// narrower load width for tensor pitches) — only while this is the device's one client:
    /// `None` once it has clones or handles, which share the properties.
    pub fn properties_mut(&mut self) -> Option<&mut DeviceProperties> {
        Arc::get_mut(&mut self.shared).map(|shared| &mut shared.properties)
    }

    pub(crate) fn panicked(stream: StreamId, panic: TaskPanicked) -> ServerError {
        ServerError::TaskPanicked {
            stream,
            message: panic.0,
        }
    }

    /// Runs `task` on the actor and waits for it.
    pub(crate) fn call<R: Send + 'static>(
        &self,
        task: impl FnOnce(&mut Server<D>, StreamId) -> Result<R, ServerError> + Send + 'static,
    ) -> Result<R, ServerError> {
        self.call_spinning(CALLER_SPIN, task)
    }

    /// [`call`](Self::call), the caller spinning as `spin` says before it parks.
    fn call_spinning<R: Send + 'static>(
        &self,
        spin: Spin,
        task: impl FnOnce(&mut Server<D>, StreamId) -> Result<R, ServerError> + Send + 'static,
    ) -> Result<R, ServerError> {
        let stream = self.stream_id();
        self.shared
            .actor
            .submit_blocking_spinning(spin, move |server| task(server, stream))
            .unwrap_or_else(|panic| Err(Self::panicked(stream, panic)))
    }

    /// Runs `task` on the actor after everything this stream submitted before; the future
    /// resolves with its result.
    pub(crate) fn call_async<R, F>(
        &self,
        task: F,
    ) -> impl Future<Output = Result<R, ServerError>> + Send + use<D, R, F>
    where
        R: Send + 'static,
        F: FnOnce(&mut Server<D>, StreamId) -> Result<R, ServerError> + Send + 'static,
    {
        let stream = self.stream_id();
        let receiver = self
            .shared
            .actor
            .submit_async(move |server| task(server, stream));
        async move {
            receiver
                .await
                .unwrap_or_else(|_| Err(TaskPanicked(ACTOR_DROPPED_TASK.to_owned())))
                .unwrap_or_else(|panic| Err(Self::panicked(stream, panic)))
        }
    }

    /// Queues `task` on the actor without waiting.
    pub(crate) fn enqueue(&self, task: impl FnOnce(&mut Server<D>, StreamId) + Send + 'static) {
        let stream = self.stream_id();
        self.shared
            .actor
            .submit(stream, move |server| task(server, stream));
    }

    pub(crate) fn range(&self, handle: &Handle) -> Result<BufferRange, IoError> {
        handle.range_on(self.shared.id)
    }

    // ---- allocation ----------------------------------------------------------------------

    fn allocate(&self, size_bytes: u64, data: Option<Bytes>) -> Result<Handle, ServerError> {
        let _span = call_span!(self, "create", bytes = size_bytes);
        // A lazy read must run here: on the actor it would wait for the actor.
        let mut data = self.refusing("create", data.map(|data| self.resident(data)).transpose())?;
        let Some(recorder) = self.shared.recorder else {
            return self.allocate_resident(size_bytes, data);
        };
        let (recorded, unhashed) = data.as_mut().map(|d| recorder.data(d)).unzip();
        let handle = self.refusing("create", self.allocate_resident(size_bytes, data))?;
        let op = Op::Create {
            buffer: self.range(&handle)?.buffer.0,
            bytes: size_bytes,
            data: recorded,
        };
        recorder.call_with_data(self.stream_id(), op, None, unhashed.flatten());
        Ok(handle)
    }

    /// [`allocate`](Self::allocate) of resident data, unrecorded.
    fn allocate_resident(
        &self,
        size_bytes: u64,
        data: Option<Bytes>,
    ) -> Result<Handle, ServerError> {
        let stream = self.stream_id();
        // Served at the call when a page the pools hold has room, if need be once the actor
        // has run what was queued before; else by the actor, which can grow the pools and
        // report out of memory (memory/books.rs).
        let at_call = take_at_call(&self.shared.books, &self.shared.actor, stream, size_bytes)?;
        let (buffer, registered) = match at_call {
            // Nothing to write: registered at the handle's first use, if any (handle.rs).
            AtCall::Taken { buffer, lazy: true } if data.is_none() => (buffer, false),
            AtCall::Taken { buffer, .. } => {
                self.shared.actor.submit(stream, move |server| {
                    server.register(stream, buffer, size_bytes, data)
                });
                (buffer, true)
            }
            AtCall::Missed | AtCall::ActorOnly => {
                let buffer =
                    self.call(move |server, stream| server.allocate(stream, size_bytes, data))?;
                (buffer, true)
            }
        };
        let placement = Placement {
            device: self.shared.id,
            buffer,
            stream,
            owner: self.shared.owner.clone(),
            registered,
        };
        Ok(Handle::new(placement, size_bytes))
    }

    /// Allocates device memory holding `data`. The write is enqueued on this client's stream.
    /// Out of memory is returned here, at the call.
    ///
    /// Example: [Creating and allocating](Self#creating-and-allocating).
    ///
    /// # Errors
    /// [`ServerError::OutOfMemory`] if the device cannot serve `data.len()` bytes even after the
    /// runtime reclaimed released memory and retried, and what any
    /// [waiting call](Self#errors-of-every-call-that-waits) returns. A failure of the write that
    /// fills the memory surfaces at the stream's next `flush`/`sync`/read.
    pub fn create(&self, data: Bytes) -> Result<Handle, ServerError> {
        self.allocate(data.len() as u64, Some(data))
    }

    /// Like [`create`](Self::create), copying from a slice.
    ///
    /// # Errors
    /// As [`create`](Self::create).
    pub fn create_from_slice(&self, data: &[u8]) -> Result<Handle, ServerError> {
        self.create(Bytes::from(data))
    }

    /// Allocates `size` bytes of uninitialised device memory. Reading it before writing it is a
    /// bug that the simulator reports.
    ///
    /// # Errors
    /// [`ServerError::OutOfMemory`] as for [`create`](Self::create), and what any
    /// [waiting call](Self#errors-of-every-call-that-waits) returns.
    pub fn empty(&self, size: usize) -> Result<Handle, ServerError> {
        self.allocate(size as u64, None)
    }

    /// Stores a tensor of `shape` (dense row-major `data`, `elem_size`-byte elements) and
    /// returns its layout. The runtime may pitch rows (pad the last dimension so every row
    /// starts aligned to the device's widest load); index and read with the returned strides.
    ///
    /// # Errors
    /// As [`create_tensors`](Self::create_tensors).
    pub fn create_tensor(
        &self,
        data: Bytes,
        shape: &[usize],
        elem_size: usize,
    ) -> Result<MemoryLayout, ServerError> {
        let desc =
            MemoryLayoutDescriptor::new(MemoryLayoutStrategy::Optimized, shape.to_vec(), elem_size);
        Ok(self.create_tensors(vec![(desc, data)])?.remove(0))
    }

    /// Like [`create_tensor`](Self::create_tensor), copying from a slice.
    ///
    /// # Errors
    /// As [`create_tensors`](Self::create_tensors).
    pub fn create_tensor_from_slice(
        &self,
        data: &[u8],
        shape: &[usize],
        elem_size: usize,
    ) -> Result<MemoryLayout, ServerError> {
        self.create_tensor(Bytes::from(data), shape, elem_size)
    }

    /// Reserves an uninitialised tensor of `shape`; see [`create_tensor`](Self::create_tensor).
    ///
    /// # Errors
    /// As [`empty_tensors`](Self::empty_tensors).
    pub fn empty_tensor(
        &self,
        shape: &[usize],
        elem_size: usize,
    ) -> Result<MemoryLayout, ServerError> {
        let desc =
            MemoryLayoutDescriptor::new(MemoryLayoutStrategy::Optimized, shape.to_vec(), elem_size);
        Ok(self.empty_tensors(vec![desc])?.remove(0))
    }

    /// Stores several tensors in one allocation (each starting aligned, so each can be bound
    /// on its own) and returns their layouts. Writing one never changes another.
    ///
    /// # Errors
    /// Refused before anything is allocated: [`IoError::InvalidLayout`] (as [`ServerError::Io`])
    /// for a shape whose size overflows, [`IoError::SizeMismatch`] for data that is not the shape's
    /// elements × `elem_size` bytes. Then [`ServerError::OutOfMemory`] as for
    /// [`create`](Self::create) (a pitched layout too large to address is refused so too), and what
    /// any [waiting call](Self#errors-of-every-call-that-waits) returns.
    pub fn create_tensors(
        &self,
        tensors: Vec<(MemoryLayoutDescriptor, Bytes)>,
    ) -> Result<Vec<MemoryLayout>, ServerError> {
        let (descriptors, data): (Vec<_>, Vec<_>) = tensors.into_iter().unzip();
        self.allocate_tensors(&descriptors, Some(data))
    }

    /// Like [`create_tensors`](Self::create_tensors), copying from slices.
    ///
    /// # Errors
    /// As [`create_tensors`](Self::create_tensors).
    pub fn create_tensors_from_slices(
        &self,
        tensors: Vec<(MemoryLayoutDescriptor, &[u8])>,
    ) -> Result<Vec<MemoryLayout>, ServerError> {
        self.create_tensors(
            tensors
                .into_iter()
                .map(|(desc, data)| (desc, Bytes::from(data)))
                .collect(),
        )
    }

    /// Reserves several uninitialised tensors in one allocation; see
    /// [`create_tensors`](Self::create_tensors).
    ///
    /// # Errors
    /// As [`create_tensors`](Self::create_tensors), without the data's size check.
    pub fn empty_tensors(
        &self,
        descriptors: Vec<MemoryLayoutDescriptor>,
    ) -> Result<Vec<MemoryLayout>, ServerError> {
        self.allocate_tensors(&descriptors, None)
    }

    /// Plans every tensor, packs them into one allocation and fills it with `data` laid out
    /// with the planned strides (padding zeroed).
    fn allocate_tensors(
        &self,
        descriptors: &[MemoryLayoutDescriptor],
        data: Option<Vec<Bytes>>,
    ) -> Result<Vec<MemoryLayout>, ServerError> {
        let _span = call_span!(self, "create_tensors", tensors = descriptors.len());
        let properties = &self.shared.properties;
        let row_alignment = properties.max_load_width_bytes as usize;
        let mut placed = Vec::with_capacity(descriptors.len());
        // A sum that overflows saturates: no device serves `u64::MAX` bytes, so the server
        // refuses it as out of memory, like any request too large for the device.
        let mut total = 0u64;
        for desc in descriptors {
            let plan = plan(desc, row_alignment)?;
            let offset = total
                .checked_next_multiple_of(properties.alignment_bytes)
                .unwrap_or(u64::MAX);
            total = offset.saturating_add(plan.bytes);
            placed.push((offset, plan));
        }
        if let Some(data) = &data {
            for (desc, bytes) in descriptors.iter().zip(data) {
                let expected = (num_elems(&desc.shape)? * desc.elem_size) as u64;
                if bytes.len() as u64 != expected {
                    return Err(IoError::SizeMismatch {
                        what: "tensor data",
                        expected,
                        actual: bytes.len() as u64,
                    }
                    .into());
                }
            }
        }
        // Lazy reads run here, before the data is scattered: a failed one is this call's error.
        let data = data
            .map(|data| data.into_iter().map(|d| self.resident(d)).collect())
            .transpose()?;
        let contents = data.map(|data: Vec<Bytes>| match (&placed[..], data) {
            // One dense tensor: its bytes are the allocation's contents as they are.
            ([(0, plan)], mut data) if plan.bytes == data[0].len() as u64 => data.remove(0),
            (_, data) => {
                let mut host = vec![0u8; total as usize];
                for ((desc, bytes), (offset, plan)) in descriptors.iter().zip(&data).zip(&placed) {
                    let region = &mut host[*offset as usize..(*offset + plan.bytes) as usize];
                    scatter(bytes, region, &desc.shape, &plan.strides, desc.elem_size);
                }
                Bytes::from_bytes_vec(host)
            }
        });
        let memory = self.allocate(total, contents)?;
        Ok(placed
            .into_iter()
            .map(|(offset, plan)| MemoryLayout {
                memory: memory.view(offset, plan.bytes),
                strides: plan.strides,
            })
            .collect())
    }

    // ---- transfers -----------------------------------------------------------------------

    /// Writes `data` at the start of `handle`, in place, on this client's stream. Non-blocking.
    ///
    /// The bytes land as they are, one after another: `write` knows nothing of tensors. On a
    /// tensor whose rows [`create_tensor`](Self::create_tensor) pitched (strides not dense),
    /// dense data of the tensor's size is accepted but fills the row padding too, so every
    /// row after the first reads back shifted; write tensors with
    /// [`write_tensor`](Self::write_tensor), which follows the strides.
    ///
    /// Example: [Writing](Self#writing).
    ///
    /// # Errors
    /// As [`write_at`](Self::write_at).
    pub fn write(&self, handle: &Handle, data: Bytes) -> Result<(), IoError> {
        self.write_at(handle, 0, data)
    }

    /// Writes `data` at byte `offset` of `handle`, in place. Non-blocking.
    ///
    /// # Errors
    /// Refused at the call, with nothing enqueued: [`IoError::OutOfRange`] if the bytes do not fit
    /// the handle from `offset`, [`IoError::WrongDevice`] for another device's handle. A failure of
    /// the copy itself surfaces at the stream's next `flush`/`sync`/read; a write inside a capture
    /// window fails the capture's [`stop_capture`](Self::stop_capture).
    pub fn write_at(&self, handle: &Handle, offset: u64, data: Bytes) -> Result<(), IoError> {
        let _span = call_span!(self, "write", offset, bytes = data.len());
        let range = self.refusing(
            "write",
            handle.sub_range_on(self.shared.id, offset, data.len() as u64),
        )?;
        if data.is_empty() {
            return Ok(());
        }
        // A lazy read must run here: on the actor it would wait for the actor.
        let mut data =
            self.refusing("write", self.resident(data).map_err(lazy::lazy_read_failed))?;
        self.record_write(range, &mut data);
        self.enqueue(move |server, stream| server.write(stream, range, data));
        Ok(())
    }

    /// Reads whole handles. The future resolves after every earlier submission of this
    /// client's stream; if that stream has a pending failure, the failure is returned instead
    /// of the bytes.
    ///
    /// Example: [Reading](Self#reading).
    ///
    /// # Errors
    /// [`IoError::WrongDevice`] (as [`ServerError::Io`]) for another device's handle;
    /// [`CaptureError::Refused`](crate::CaptureError::Refused) while the stream captures a graph;
    /// the stream's oldest pending failure, instead of the bytes (then the next read reads); and
    /// what any [waiting call](Self#errors-of-every-call-that-waits) returns.
    pub fn read_async(
        &self,
        handles: Vec<Handle>,
    ) -> impl Future<Output = Result<Vec<Bytes>, ServerError>> + Send + use<D> {
        let _span = call_span!(self, "read", handles = handles.len());
        let ranges = handles.iter().map(|h| self.range(h)).collect();
        self.read_ranges(ranges, Ok)
    }

    /// [`read_async`](Self::read_async), blocking: a blocking call (spinning before it parks,
    /// for as long as the transfer takes: `Spin::for_read`, through the calling thread's reply
    /// slot), where released memory returns to the pools (`memory/books.rs`).
    fn read_blocking(&self, handles: Vec<Handle>) -> Result<Vec<Bytes>, ServerError> {
        let _span = call_span!(self, "read", handles = handles.len());
        let ranges = handles
            .iter()
            .map(|h| self.range(h))
            .collect::<Result<Vec<_>, IoError>>();
        let ranges = self.refusing("read", ranges)?;
        let bytes = ranges.iter().map(|r| r.len).sum();
        let read = self.record_read(&ranges);
        let result = self.call_spinning(Spin::for_read(bytes), move |server, stream| {
            server.read(stream, &ranges)
        });
        record::read_returned(read, &result);
        result
    }

    /// The shared read path: reads `ranges` on the actor, after everything this stream submitted
    /// before, then turns the bytes as they landed into the result with `finish`, on the thread
    /// that awaits the read (after the recorder, if any, hashed them).
    fn read_ranges<F>(
        &self,
        ranges: Result<Vec<BufferRange>, IoError>,
        finish: F,
    ) -> impl Future<Output = Result<Vec<Bytes>, ServerError>> + Send + use<D, F>
    where
        F: FnOnce(Vec<Bytes>) -> Result<Vec<Bytes>, ServerError> + Send + 'static,
    {
        let call = self.refusing("read", ranges).map(|ranges| {
            let read = self.record_read(&ranges);
            let call = self.call_async(move |server, stream| server.read(stream, &ranges));
            (read, call)
        });
        // The bytes as they landed are hashed, if recorded, and finished on the awaiting thread.
        async move {
            let (read, call) = call?;
            let result = call.await;
            record::read_returned(read, &result);
            result.and_then(finish)
        }
    }

    /// Reads whole handles, blocking.
    ///
    /// # Panics
    /// If the read fails; use [`read_one`](Self::read_one) or [`read_async`](Self::read_async)
    /// to handle the error.
    ///
    /// # Errors
    /// None: it panics where [`read_async`](Self::read_async) returns an error.
    pub fn read(&self, handles: Vec<Handle>) -> Vec<Bytes> {
        self.read_blocking(handles).unwrap_or_else(|err| {
            panic!("read failed: {err}; use read_one or read_async to handle read errors")
        })
    }

    /// Reads one handle, blocking.
    ///
    /// # Errors
    /// As [`read_async`](Self::read_async).
    pub fn read_one(&self, handle: Handle) -> Result<Bytes, ServerError> {
        Ok(self.read_blocking(vec![handle])?.remove(0))
    }

    /// Reads one handle, blocking.
    ///
    /// # Panics
    /// If the read fails (useful in tests).
    ///
    /// # Errors
    /// None: it panics where [`read_one`](Self::read_one) returns an error.
    pub fn read_one_unchecked(&self, handle: Handle) -> Bytes {
        self.read_one(handle)
            .unwrap_or_else(|err| panic!("read_one_unchecked failed: {err}"))
    }

    /// Reads tensors, each gathered into dense row-major bytes according to its strides.
    ///
    /// # Errors
    /// As [`read_async`](Self::read_async), and, refused before anything is read,
    /// [`IoError::InvalidLayout`] for a descriptor whose shape and strides differ in rank, whose
    /// element size is zero, or whose extent or dense size overflows (a dense size past
    /// `isize::MAX` included: a broadcast view spans few bytes of its handle, but is read
    /// dense), [`IoError::OutOfRange`] for an extent past its handle;
    /// [`ServerError::HostOutOfMemory`] where the host cannot allocate the dense bytes.
    pub fn read_tensor_async(
        &self,
        descriptors: Vec<CopyDescriptor>,
    ) -> impl Future<Output = Result<Vec<Bytes>, ServerError>> + Send + use<D> {
        let _span = call_span!(self, "read_tensor", tensors = descriptors.len());
        let (id, stream) = (self.shared.id, self.stream_id());
        let ranges = descriptors
            .iter()
            .map(|d| {
                let extent = extent_bytes(&d.shape, &d.strides, d.elem_size)?;
                dense_bytes(&d.shape, d.elem_size)?;
                d.handle.sub_range_on(id, 0, extent)
            })
            .collect();
        let mut layouts = Vec::with_capacity(descriptors.len());
        let mut handles = Vec::with_capacity(descriptors.len());
        for d in descriptors {
            layouts.push((d.shape, d.strides, d.elem_size));
            handles.push(d.handle);
        }
        let read = self.read_ranges(ranges, move |bytes| {
            let layouts = layouts.iter();
            (bytes.into_iter().zip(layouts))
                .map(|(b, (shape, strides, elem_size))| {
                    gather_bytes(b, shape, strides, *elem_size).map_err(|_| {
                        let bytes = (shape.iter().product::<usize>() * elem_size) as u64;
                        ServerError::HostOutOfMemory { bytes, stream }
                    })
                })
                .collect()
        });
        // Dropped after the read is queued: if these are the last handles, their release runs
        // after the read (the actor's queue is FIFO).
        drop(handles);
        read
    }

    /// Reads tensors, blocking.
    ///
    /// # Panics
    /// If the read fails; use [`read_tensor_async`](Self::read_tensor_async) to handle errors.
    ///
    /// # Errors
    /// None: it panics where [`read_tensor_async`](Self::read_tensor_async) returns an error.
    pub fn read_tensor(&self, descriptors: Vec<CopyDescriptor>) -> Vec<Bytes> {
        block_on(self.read_tensor_async(descriptors)).unwrap_or_else(|err| {
            panic!("read_tensor failed: {err}; use read_tensor_async to handle read errors")
        })
    }

    /// Reads one tensor; see [`read_tensor_async`](Self::read_tensor_async).
    ///
    /// # Errors
    /// As [`read_tensor_async`](Self::read_tensor_async).
    pub fn read_one_tensor_async(
        &self,
        descriptor: CopyDescriptor,
    ) -> impl Future<Output = Result<Bytes, ServerError>> + Send + use<D> {
        let read = self.read_tensor_async(vec![descriptor]);
        async move { Ok(read.await?.remove(0)) }
    }

    /// Reads one tensor, blocking.
    ///
    /// # Panics
    /// If the read fails (useful in tests); use
    /// [`read_one_tensor_async`](Self::read_one_tensor_async) to handle errors.
    ///
    /// # Errors
    /// None: it panics where [`read_one_tensor_async`](Self::read_one_tensor_async) returns an
    /// error.
    pub fn read_one_unchecked_tensor(&self, descriptor: CopyDescriptor) -> Bytes {
        block_on(self.read_one_tensor_async(descriptor)).unwrap_or_else(|err| {
            panic!("read_one_unchecked_tensor failed: {err}; use read_one_tensor_async to handle read errors")
        })
    }

    // ---- kernels -------------------------------------------------------------------------

    /// Compiles `kernel` for this device now (launches compile on first use otherwise), so a
    /// compiler failure is returned here with the compiler's message.
    ///
    /// # Errors
    /// [`ServerError::Device`] holding [`DeviceError::Compile`](crate::DeviceError::Compile) with
    /// the compiler's log if the device cannot compile the kernel, and what any
    /// [waiting call](Self#errors-of-every-call-that-waits) returns.
    pub fn compile(&self, kernel: &Kernel) -> Result<(), ServerError> {
        let _span = call_span!(self, "compile", kernel = kernel.name());
        let op = || Op::Compile {
            kernel: kernel.content_hash(),
        };
        let owned = kernel.clone();
        self.recorded(op, Some(kernel), || {
            self.call(move |server, stream| server.compile(stream, &owned))
        })
    }

    /// Enqueues `kernel` on this client's stream. Arguments are checked here; failures of the
    /// launch itself surface at the stream's next `flush`/`sync`/read.
    ///
    /// Example: [Launching](Self#launching).
    ///
    /// # Errors
    /// Refused at the call, with nothing enqueued: [`IoError::InvalidLaunch`] for bindings or
    /// parameters that differ from the kernel's declarations in number or type, a binding that is
    /// not a whole number of its elements, a writable binding sharing memory with another binding,
    /// or a static count above the device's `max_workgroups`; [`IoError::WrongDevice`] for another
    /// device's handle; [`IoError::OutOfRange`] for a dynamic count's handle shorter than 12 bytes.
    /// Failures of the launch itself (a compile failure, [`ServerError::KernelFault`] in checked
    /// mode, a device fault) surface at the stream's next `flush`/`sync`/read.
    pub fn launch(
        &self,
        kernel: &Kernel,
        count: CubeCount,
        args: KernelArguments,
    ) -> Result<(), IoError> {
        let _span = call_span!(self, "launch", kernel = kernel.name());
        let (ranges, checked) =
            self.refusing("launch", self.launch_checked(kernel, &count, &args))?;
        // Decided here: only the issuing thread knows whether it is inside a dry run.
        let mode = crate::dry_run::launch_mode();
        self.record_launch(kernel, &count, &ranges, &args.params, mode);
        let Some(count) = checked else {
            return Ok(());
        };
        let kernel = kernel.clone();
        let params = args.params;
        self.enqueue(move |server, stream| {
            server.launch_as(stream, mode, &kernel, count, &ranges, &params);
        });
        Ok(())
    }

    /// A launch's ranges and count as the server takes them, once checked against the kernel and
    /// the device (see [`launch`](Self::launch)'s errors).
    fn launch_checked(
        &self,
        kernel: &Kernel,
        count: &CubeCount,
        args: &KernelArguments,
    ) -> Result<(Vec<BufferRange>, Option<CountArg<BufferRange>>), IoError> {
        kernel.validate_for_device(self.properties())?;
        let by_range = self.shared.options.launch_aliasing_by_range;
        let ranges = args.checked_ranges(kernel.def(), self.shared.id, by_range)?;
        let max_workgroups = self.shared.properties.max_workgroups;
        let count = count.checked(kernel.def(), self.shared.id, max_workgroups)?;
        Ok((ranges, count))
    }

    // ---- graphs ----------------------------------------------------------------------------

    /// Prepares this client's stream for a capture: allocations become persistent until
    /// `stop_capture`. Call it before the warm-up run, then [`start_capture`](Self::start_capture).
    ///
    /// Example: [Graphs](Self#graphs).
    ///
    /// # Errors
    /// [`CaptureError::AlreadyCapturing`](crate::CaptureError::AlreadyCapturing) if the stream
    /// captures, and what any [waiting call](Self#errors-of-every-call-that-waits) returns.
    pub fn graph_prepare(&self) -> Result<(), ServerError> {
        let _span = call_span!(self, "graph_prepare");
        self.recorded(
            || Op::GraphPrepare,
            None,
            || self.call(|server, stream| server.graph_prepare(stream)),
        )
    }

    /// Starts recording this stream's launches into a graph instead of running them. Inside the
    /// window, reads, syncs and flushes of the stream are refused at once; a write is refused
    /// late, by `stop_capture` failing (feed inputs by writing between replays); an allocation
    /// fails `stop_capture` on a hardware-graph device and is merely wasteful on a software one.
    ///
    /// # Errors
    /// [`CaptureError::NotPrepared`](crate::CaptureError::NotPrepared) without
    /// [`graph_prepare`](Self::graph_prepare),
    /// [`CaptureError::AlreadyCapturing`](crate::CaptureError::AlreadyCapturing) if the stream
    /// captures; [`ServerError::Device`] if the device cannot begin capturing; the stream's oldest
    /// failure if its fault record cannot be created; and what any
    /// [waiting call](Self#errors-of-every-call-that-waits) returns.
    pub fn start_capture(&self) -> Result<(), ServerError> {
        let _span = call_span!(self, "start_capture");
        self.recorded(
            || Op::StartCapture,
            None,
            || self.call(|server, stream| server.start_capture(stream)),
        )
    }

    /// Ends the capture and returns the graph, ready to [`replay`](Graph::replay).
    ///
    /// # Errors
    /// [`CaptureError::NotCapturing`](crate::CaptureError::NotCapturing) (nothing changes);
    /// [`CaptureError::WriteInCapture`](crate::CaptureError::WriteInCapture) if the window held a
    /// write, [`CaptureError::AllocationInCapture`](crate::CaptureError::AllocationInCapture) if it
    /// allocated on a device with hardware graphs (the graph is discarded; the stream is idle);
    /// [`ServerError::Device`] if the device cannot end the capture; and what any
    /// [waiting call](Self#errors-of-every-call-that-waits) returns.
    pub fn stop_capture(&self) -> Result<Graph<D>, ServerError> {
        let _span = call_span!(self, "stop_capture");
        let stream = self.stream_id();
        // The graph is named in the recording by this call's number.
        let recorded = (self.shared.recorder).map(|r| {
            self.shared.actor.assert_callable(true);
            (r, r.call(stream, Op::StopCapture, None))
        });
        let result = self.call(|server, stream| server.stop_capture(stream));
        if let Some((recorder, call)) = recorded {
            recorder.returned(call, &result);
        }
        Ok(Graph::new(
            result?,
            stream,
            self.shared.actor.clone(),
            recorded,
        ))
    }

    // ---- synchronisation -----------------------------------------------------------------

    /// Submits this stream's queued work and returns its oldest failure observed so far.
    ///
    /// # Errors
    /// [`CaptureError::Refused`](crate::CaptureError::Refused) while the stream captures; the
    /// stream's oldest failure observed so far (work not yet executed may fail later); and what any
    /// [waiting call](Self#errors-of-every-call-that-waits) returns.
    pub fn flush(&self) -> Result<(), ServerError> {
        let _span = call_span!(self, "flush");
        self.recorded(
            || Op::Flush,
            None,
            || self.call(|server, stream| server.flush(stream)),
        )
    }

    /// Waits until every earlier submission of this stream has completed; returns its oldest
    /// failure, exactly once. Afterwards the stream is healthy again.
    ///
    /// Example: [Streams and synchronisation](Self#streams-and-synchronisation).
    ///
    /// # Errors
    /// [`CaptureError::Refused`](crate::CaptureError::Refused) while the stream captures; the
    /// stream's oldest failure ([`ServerError::KernelFault`], [`ServerError::Device`],
    /// [`ServerError::Collective`]), which names the stream; and what any
    /// [waiting call](Self#errors-of-every-call-that-waits) returns.
    pub fn sync(&self) -> Result<(), ServerError> {
        let _span = call_span!(self, "sync");
        self.recorded(
            || Op::Sync,
            None,
            || {
                self.call(|server, stream| {
                    let result = server.sync(stream);
                    server.log_profile(stream);
                    result
                })
            },
        )
    }

    /// Waits until every earlier submission of every stream of this device has completed (from
    /// any thread, any client of the device); returns the oldest failure of the first stream,
    /// in [`StreamId`] order, that has one. Which stream it is, the error says
    /// ([`ServerError::stream`]). Every other failure stays queued for its own stream's next
    /// blocking call, so each is returned exactly once: call `sync_all` until it returns `Ok`
    /// to drain them all.
    ///
    /// For when it is not clear which stream work went to (see
    /// [Streams](Self#streams-what-a-sync-waits-for)): unlike [`sync`](Self::sync), it does
    /// not depend on the calling thread.
    ///
    /// # Errors
    /// The first failure found, as above;
    /// [`CaptureError::Refused`](crate::CaptureError::Refused) at once, waiting for nothing,
    /// while any stream of the device captures a graph; and what any
    /// [waiting call](Self#errors-of-every-call-that-waits) returns.
    pub fn sync_all(&self) -> Result<(), ServerError> {
        let _span = call_span!(self, "sync_all");
        self.recorded(
            || Op::SyncAll,
            None,
            || self.call(|server, _| server.sync_all()),
        )
    }

    /// Runs `task` on the calling thread while the device's actor is paused, after every
    /// earlier submission of this thread has been processed.
    ///
    /// Inside `task`, a call of this device's clients that waits for the device (`sync`, a
    /// read, a `create` that needs a page; on an [inline](Self::inline) client, any call)
    /// would wait for the actor `task` paused, forever: it panics instead, naming the mistake,
    /// and `exclusive` returns that panic as [`ServerError::TaskPanicked`]. Calls that only
    /// enqueue work (`write`, `launch`) run once `task` returns.
    ///
    /// # Errors
    /// [`ServerError::TaskPanicked`] if `task` panicked (the actor resumes), or if the actor
    /// could not be paused. Nothing else: the stream's pending failures, and a lost device's,
    /// stay for its next [waiting call](Self#errors-of-every-call-that-waits).
    pub fn exclusive<R>(&self, task: impl FnOnce() -> R) -> Result<R, ServerError> {
        let _span = call_span!(self, "exclusive");
        self.record_other("exclusive", &[]);
        let stream = self.stream_id();
        self.shared
            .actor
            .exclusive(stream, task)
            .map_err(|panic| Self::panicked(stream, panic))
    }

    /// Device memory in use, summed over all streams. Answers even when a stream has failed.
    ///
    /// Example: [Memory](Self#memory).
    ///
    /// # Errors
    /// Only what any [waiting call](Self#errors-of-every-call-that-waits) returns other than
    /// `DeviceLost`: it answers on a lost device too.
    pub fn memory_usage(&self) -> Result<MemoryUsage, ServerError> {
        let _span = call_span!(self, "memory_usage");
        self.call(|server, _| Ok(server.memory_usage()))
    }

    /// The calling stream's pools (shape, usage, high-water marks) in routing order, then the
    /// device-wide persistent pool.
    ///
    /// # Errors
    /// As [`memory_usage`](Self::memory_usage).
    pub fn memory_report(&self) -> Result<MemoryReport, ServerError> {
        let _span = call_span!(self, "memory_report");
        self.call(|server, stream| Ok(server.memory_report(stream)))
    }

    /// Gives back to the device every page the pools hold without live slices, after waiting
    /// for the work that still used released memory. Blocks until done (pages leave the pools
    /// only while a caller waits: see `allocate`'s note on allocations served at the call).
    pub fn memory_cleanup(&self) {
        let _span = call_span!(self, "memory_cleanup");
        self.record_other("memory_cleanup", &[]);
        // Blocking: only a call whose caller waits may take pages from the pools, which
        // calling threads allocate from (memory/books.rs). A failed call has nothing to clean.
        let _ = self.call(|server, _| {
            server.memory_cleanup();
            Ok(())
        });
    }

    /// Caps the bytes the device's pools reserve together (every page of every stream's pools
    /// and of the persistent pool), or lifts the cap (`None`); the default is no cap. The
    /// budget is the device's: it holds for every client of the device and every stream, and
    /// bounds what the process takes from the device for buffers. Pool caps
    /// ([`PoolLayout::cap_bytes`]) still bound their own size class within it.
    ///
    /// An allocation that needs a page over the budget first gives every free page back and
    /// waits for released memory, as [`memory_cleanup`](Self::memory_cleanup) does, and
    /// fails only if the page still does not fit: with [`ServerError::OutOfMemory`] whose
    /// reason is [`OutOfMemoryReason::Budget`]. [`memory_report`](Self::memory_report) shows
    /// the budget and the bytes it bounds.
    ///
    /// ```
    /// use lockstep::{ComputeClient, OutOfMemoryReason, ServerError};
    /// use lockstep_sim::{SimConfig, SimDevice};
    ///
    /// let client = ComputeClient::new(SimDevice::new(SimConfig::new(1)));
    /// client.set_memory_budget(Some(50 << 20))?;
    /// let weights = client.empty(40 << 20)?;
    /// let Err(ServerError::OutOfMemory(oom)) = client.empty(16 << 20) else {
    ///     panic!("40 MiB and 16 MiB exceed a 50 MiB budget");
    /// };
    /// assert!(matches!(oom.reason, OutOfMemoryReason::Budget { budget_bytes, .. } if budget_bytes == 50 << 20));
    /// drop(weights);
    /// // The weights' page, cached for reuse, goes back to the device: 16 MiB fits now.
    /// let activations = client.empty(16 << 20)?;
    /// # Ok::<(), lockstep::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`MemoryBudgetError::BelowReserved`] if the pools still reserve more than
    /// `budget_bytes` after every free page went back (the budget is unchanged);
    /// [`MemoryBudgetError::Server`] with what any
    /// [waiting call](Self#errors-of-every-call-that-waits) returns other than `DeviceLost`.
    pub fn set_memory_budget(&self, budget_bytes: Option<u64>) -> Result<(), MemoryBudgetError> {
        let _span = call_span!(self, "set_memory_budget", ?budget_bytes);
        self.record_other("set_memory_budget", &[]);
        self.call(move |server, _| Ok(server.set_memory_budget(budget_bytes)))?
    }

    /// Installs a pool layout: the calling stream's pools are rebuilt with it if nothing is
    /// live in them (high-water marks start over), and streams first used afterwards get it.
    ///
    /// # Errors
    /// [`InstallMemoryPoolsError::PoolsInUse`] if a slice is live in the calling stream's pools
    /// (nothing disturbed; the layout still applies to new streams);
    /// [`InstallMemoryPoolsError::StreamUnavailable`] if the stream has a pending failure;
    /// [`InstallMemoryPoolsError::InvalidLayout`] if the layout is invalid (empty list, too
    /// many pools, zero page size, slice larger than page, cap smaller than page, pages larger
    /// than the device allows, unavailable preset), refused before anything changes.
    pub fn install_memory_pools(
        &self,
        pools: &MemoryPoolsConfig,
    ) -> Result<(), InstallMemoryPoolsError> {
        let _span = call_span!(self, "install_memory_pools");
        self.record_other("install_memory_pools", &[]);
        let config = MemoryConfiguration::resolve(pools, self.properties())?;
        let stream = self.stream_id();
        self.shared
            .actor
            .submit_blocking(move |server| server.install_memory_pools(stream, config))
            .unwrap_or(Err(InstallMemoryPoolsError::StreamUnavailable))
    }

    /// Routes this client's stream's allocations: by size through its pools (`Auto`), or to
    /// the device-wide persistent pool. Closes any open persistent window.
    pub fn allocation_mode(&self, mode: MemoryAllocationMode) {
        let _span = call_span!(self, "allocation_mode", ?mode);
        self.record_other("allocation_mode", &[]);
        // In the books, at the call: allocations served at the call read it (memory/books.rs).
        lock(&self.shared.books)
            .memory
            .set_mode(self.stream_id(), mode);
    }

    /// Runs `task` with this client's stream allocating from the persistent pool (for weights,
    /// and for buffers a captured graph keeps), then restores the previous mode, even if `task`
    /// panics. Windows nest.
    pub fn memory_persistent_allocation<I, R>(&self, input: I, task: impl FnOnce(I) -> R) -> R {
        let _span = call_span!(self, "memory_persistent_allocation");
        self.record_other("memory_persistent_allocation", &[]);
        struct Window<'a, D: Device>(&'a ComputeClient<D>);
        impl<D: Device> Drop for Window<'_, D> {
            fn drop(&mut self) {
                self.0.persistent_window(false);
            }
        }
        self.persistent_window(true);
        let _window = Window(self);
        task(input)
    }
}

impl<D: Device> ComputeClient<D> {
    /// Opens or closes a persistent window on this client's stream, in the books at the call:
    /// allocations served at the call read it (memory/books.rs).
    fn persistent_window(&self, open: bool) {
        lock(&self.shared.books)
            .memory
            .persistent_window(self.stream_id(), open);
    }

    /// How the device's allocations were served so far, at the call or by the actor (all
    /// clients of the device together). Test hook: the explorer checks that both paths run.
    #[doc(hidden)]
    pub fn allocation_paths(&self) -> AllocationPaths {
        lock(&self.shared.books).paths()
    }
}
