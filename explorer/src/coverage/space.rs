//! The coverage space: which cells (method, stream state, argument class, relation) exist, and
//! which of them the explorer cannot reach, each with its reason.
//!
//! A cell's dimensions list only what applies to its method (`spec`); a lost device is one
//! cell per method, since every call after a loss fails with `DeviceLost`. [`NOT_CALLED`] names
//! every public method the explorer never calls and why; [`EXCLUDED`] declares the cells of
//! called methods that it cannot reach.

use std::sync::OnceLock;

/// A public call of the client API that the explorer makes (and records).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Method {
    /// [`ComputeClient::create`](lockstep::ComputeClient::create).
    Create,
    /// [`ComputeClient::empty`](lockstep::ComputeClient::empty).
    Empty,
    /// [`ComputeClient::create_tensors`](lockstep::ComputeClient::create_tensors).
    CreateTensors,
    /// [`ComputeClient::empty_tensors`](lockstep::ComputeClient::empty_tensors).
    EmptyTensors,
    /// [`ComputeClient::write`](lockstep::ComputeClient::write).
    Write,
    /// [`ComputeClient::write_at`](lockstep::ComputeClient::write_at).
    WriteAt,
    /// [`ComputeClient::read_one`](lockstep::ComputeClient::read_one).
    ReadOne,
    /// [`ComputeClient::read_async`](lockstep::ComputeClient::read_async).
    ReadAsync,
    /// [`ComputeClient::read_tensor_async`](lockstep::ComputeClient::read_tensor_async).
    ReadTensorAsync,
    /// [`ComputeClient::read_lazy`](lockstep::ComputeClient::read_lazy).
    ReadLazy,
    /// [`Bytes::materialize`](lockstep::Bytes::materialize) of a lazy read: its first access.
    Materialize,
    /// [`ComputeClient::launch`](lockstep::ComputeClient::launch).
    Launch,
    /// A launch inside [`dry_run`](lockstep::dry_run()).
    DryRun,
    /// [`ComputeClient::profile`](lockstep::ComputeClient::profile).
    Profile,
    /// [`ProfileDuration::resolve_blocking`](lockstep::ProfileDuration::resolve_blocking).
    ProfileResolve,
    /// [`ComputeClient::graph_prepare`](lockstep::ComputeClient::graph_prepare).
    GraphPrepare,
    /// [`ComputeClient::start_capture`](lockstep::ComputeClient::start_capture).
    StartCapture,
    /// [`ComputeClient::stop_capture`](lockstep::ComputeClient::stop_capture).
    StopCapture,
    /// [`Graph::replay`](lockstep::Graph::replay).
    Replay,
    /// The drop of a [`Graph`](lockstep::Graph)'s last clone.
    DropGraph,
    /// The drop of a [`Handle`](lockstep::Handle)'s last clone: its release.
    DropHandle,
    /// [`ComputeClient::flush`](lockstep::ComputeClient::flush).
    Flush,
    /// [`ComputeClient::sync`](lockstep::ComputeClient::sync).
    Sync,
    /// [`ComputeClient::sync_all`](lockstep::ComputeClient::sync_all).
    SyncAll,
    /// [`ComputeClient::memory_usage`](lockstep::ComputeClient::memory_usage).
    MemoryUsage,
    /// [`ComputeClient::memory_report`](lockstep::ComputeClient::memory_report).
    MemoryReport,
    /// [`ComputeClient::memory_cleanup`](lockstep::ComputeClient::memory_cleanup).
    MemoryCleanup,
    /// [`ComputeClient::install_memory_pools`](lockstep::ComputeClient::install_memory_pools).
    InstallMemoryPools,
    /// [`ComputeClient::all_reduce`](lockstep::ComputeClient::all_reduce).
    AllReduce,
    /// [`ComputeClient::to_client`](lockstep::ComputeClient::to_client) from the explored device to
    /// a peer.
    ToClient,
    /// [`ComputeClient::to_client`](lockstep::ComputeClient::to_client) from a peer into the
    /// explored device.
    ToClientInto,
    /// [`ComputeClient::exclusive`](lockstep::ComputeClient::exclusive).
    Exclusive,
}

impl Method {
    /// Every method, in declaration order.
    pub const ALL: [Method; 32] = [
        Method::Create,
        Method::Empty,
        Method::CreateTensors,
        Method::EmptyTensors,
        Method::Write,
        Method::WriteAt,
        Method::ReadOne,
        Method::ReadAsync,
        Method::ReadTensorAsync,
        Method::ReadLazy,
        Method::Materialize,
        Method::Launch,
        Method::DryRun,
        Method::Profile,
        Method::ProfileResolve,
        Method::GraphPrepare,
        Method::StartCapture,
        Method::StopCapture,
        Method::Replay,
        Method::DropGraph,
        Method::DropHandle,
        Method::Flush,
        Method::Sync,
        Method::SyncAll,
        Method::MemoryUsage,
        Method::MemoryReport,
        Method::MemoryCleanup,
        Method::InstallMemoryPools,
        Method::AllReduce,
        Method::ToClient,
        Method::ToClientInto,
        Method::Exclusive,
    ];

    /// The method's name, as coverage reports print it.
    pub fn name(self) -> &'static str {
        match self {
            Method::Create => "create",
            Method::Empty => "empty",
            Method::CreateTensors => "create_tensors",
            Method::EmptyTensors => "empty_tensors",
            Method::Write => "write",
            Method::WriteAt => "write_at",
            Method::ReadOne => "read_one",
            Method::ReadAsync => "read_async",
            Method::ReadTensorAsync => "read_tensor_async",
            Method::ReadLazy => "read_lazy",
            Method::Materialize => "Bytes::materialize",
            Method::Launch => "launch",
            Method::DryRun => "dry_run",
            Method::Profile => "profile",
            Method::ProfileResolve => "ProfileDuration::resolve_blocking",
            Method::GraphPrepare => "graph_prepare",
            Method::StartCapture => "start_capture",
            Method::StopCapture => "stop_capture",
            Method::Replay => "Graph::replay",
            Method::DropGraph => "Graph drop",
            Method::DropHandle => "Handle drop",
            Method::Flush => "flush",
            Method::Sync => "sync",
            Method::SyncAll => "sync_all",
            Method::MemoryUsage => "memory_usage",
            Method::MemoryReport => "memory_report",
            Method::MemoryCleanup => "memory_cleanup",
            Method::InstallMemoryPools => "install_memory_pools",
            Method::AllReduce => "all_reduce",
            Method::ToClient => "to_client",
            Method::ToClientInto => "to_client (into this device)",
            Method::Exclusive => "exclusive",
        }
    }
}

/// The calling stream's state at the call, as the driver knows it (from its model and its
/// captures). When several hold, the first listed wins.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum StreamState {
    /// A call returned `DeviceLost`.
    Lost,
    /// A `start_capture` is open.
    Capturing,
    /// `graph_prepare`d; the capture has not started.
    Prepared,
    /// A failure is pending: a checked kernel's fault not yet returned (an injected fault's
    /// timing is the device's secret, so those streams count as idle).
    Failed,
    /// Nothing pending: the stream is ready.
    Idle,
}

impl StreamState {
    /// Every state.
    pub const ALL: [StreamState; 5] = [
        StreamState::Idle,
        StreamState::Prepared,
        StreamState::Capturing,
        StreamState::Failed,
        StreamState::Lost,
    ];

    /// The state's name, as coverage reports print it.
    pub fn name(self) -> &'static str {
        match self {
            StreamState::Lost => "lost",
            StreamState::Capturing => "capturing",
            StreamState::Prepared => "prepared",
            StreamState::Failed => "failed",
            StreamState::Idle => "idle",
        }
    }
}

/// The class of a call's arguments.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Arg {
    /// Not classified: the method takes no buffer or size, or the device is lost.
    Any,
    /// No bytes.
    Empty,
    /// One `u32` element.
    One,
    /// One element below a size at which allocations change pool (a pool's largest slice or
    /// its page, see `World::size_edges_bytes`).
    BelowEdge,
    /// Exactly a size at which allocations change pool.
    AtEdge,
    /// One element above a size at which allocations change pool.
    AboveEdge,
    /// A size no device serves, whose rounding to whole alignment units overflows.
    Overflowing,
    /// A range past the handle's end, or whose end overflows `u64` (refused).
    OutOfRange,
    /// A tensor at a non-zero offset of its packed group.
    View,
    /// One handle bound twice, once writable (refused).
    Aliased,
    /// A byte offset that is not a multiple of the element size.
    Misaligned,
    /// A handle of another client (refused).
    Foreign,
    /// Any other argument.
    Ordinary,
}

impl Arg {
    /// Every class.
    pub const ALL: [Arg; 13] = [
        Arg::Any,
        Arg::Empty,
        Arg::One,
        Arg::BelowEdge,
        Arg::AtEdge,
        Arg::AboveEdge,
        Arg::Overflowing,
        Arg::OutOfRange,
        Arg::View,
        Arg::Aliased,
        Arg::Misaligned,
        Arg::Foreign,
        Arg::Ordinary,
    ];

    /// The class's name, as coverage reports print it.
    pub fn name(self) -> &'static str {
        match self {
            Arg::Any => "-",
            Arg::Empty => "empty",
            Arg::One => "one",
            Arg::BelowEdge => "edge-1",
            Arg::AtEdge => "edge",
            Arg::AboveEdge => "edge+1",
            Arg::Overflowing => "overflow",
            Arg::OutOfRange => "out-of-range",
            Arg::View => "view",
            Arg::Aliased => "aliased",
            Arg::Misaligned => "misaligned",
            Arg::Foreign => "foreign",
            Arg::Ordinary => "ordinary",
        }
    }
}

/// How the call's buffer stands towards other streams. When several hold, the first listed
/// wins.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Relation {
    /// The call names no buffer of this device.
    None,
    /// Held by the live graph.
    LiveGraph,
    /// Recorded by the open capture.
    CapturingStream,
    /// A handle drop while the last stream that used the buffer has not synced or read since.
    Queued,
    /// Last written or read by another stream.
    OtherStream,
    /// Last used by the calling stream (or new).
    Own,
    /// An allocation served at the call, from a page the stream's pools held (the runtime's
    /// `memory/books.rs`).
    AtCall,
    /// An allocation the actor served or refused, in a blocking call.
    ByActor,
}

impl Relation {
    /// Every relation.
    pub const ALL: [Relation; 8] = [
        Relation::None,
        Relation::LiveGraph,
        Relation::CapturingStream,
        Relation::Queued,
        Relation::OtherStream,
        Relation::Own,
        Relation::AtCall,
        Relation::ByActor,
    ];

    /// The relation's name, as coverage reports print it.
    pub fn name(self) -> &'static str {
        match self {
            Relation::None => "-",
            Relation::LiveGraph => "graph",
            Relation::CapturingStream => "capturing",
            Relation::Queued => "queued",
            Relation::OtherStream => "other",
            Relation::Own => "own",
            Relation::AtCall => "at-call",
            Relation::ByActor => "by-actor",
        }
    }
}

/// One cell of the space.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Cell {
    /// The call.
    pub method: Method,
    /// The calling stream's state.
    pub state: StreamState,
    /// The class of its arguments.
    pub arg: Arg,
    /// How its buffer stands towards other streams.
    pub relation: Relation,
}

impl Cell {
    /// The cell a call falls in. On a lost device, arguments and relations are not told apart
    /// (every call fails alike); on a prepared stream or one holding a failure, relations are
    /// not (the server orders a buffer's accesses by its access history and by whether the
    /// stream captures, never by whether it is prepared or failed); on a capturing stream, a
    /// live graph's buffer counts as another stream's.
    pub fn new(method: Method, state: StreamState, arg: Arg, relation: Relation) -> Cell {
        match state {
            StreamState::Lost => Cell {
                method,
                state,
                arg: Arg::Any,
                relation: Relation::None,
            },
            StreamState::Prepared | StreamState::Failed => Cell {
                method,
                state,
                arg,
                relation: Relation::None,
            },
            // On a capturing stream a buffer a live graph holds (the graph of another stream)
            // is ordered as any buffer another stream used last: counted with those, since
            // a graph beside an open capture is too rare for each call's cell of its own.
            StreamState::Capturing if relation == Relation::LiveGraph => Cell {
                method,
                state,
                arg,
                relation: Relation::OtherStream,
            },
            StreamState::Capturing | StreamState::Idle => Cell {
                method,
                state,
                arg,
                relation,
            },
        }
    }

    fn key(self) -> usize {
        let m = self.method as usize;
        let s = self.state as usize;
        let a = self.arg as usize;
        let r = self.relation as usize;
        ((m * StreamState::ALL.len() + s) * Arg::ALL.len() + a) * Relation::ALL.len() + r
    }
}

const NONE: &[Relation] = &[Relation::None];
/// A buffer other streams may share.
const SHARED: &[Relation] = &[
    Relation::Own,
    Relation::OtherStream,
    Relation::CapturingStream,
    Relation::LiveGraph,
];
/// A tensor's buffer: graphs capture launches on buffer slots only.
const TENSOR: &[Relation] = &[Relation::Own, Relation::OtherStream];
/// Who served an allocation: the calling thread or the actor.
const PATHS: &[Relation] = &[Relation::AtCall, Relation::ByActor];
const ANY: &[(Arg, &[Relation])] = &[(Arg::Any, NONE)];
const SIZES: &[(Arg, &[Relation])] = &[
    (Arg::Empty, PATHS),
    (Arg::One, PATHS),
    (Arg::BelowEdge, PATHS),
    (Arg::AtEdge, PATHS),
    (Arg::AboveEdge, PATHS),
    (Arg::Ordinary, PATHS),
];

/// The argument classes of `method`, each with the relations that apply to it.
fn spec(method: Method) -> &'static [(Arg, &'static [Relation])] {
    match method {
        Method::Create => SIZES,
        Method::Empty => &[
            (Arg::Empty, PATHS),
            (Arg::One, PATHS),
            (Arg::BelowEdge, PATHS),
            (Arg::AtEdge, PATHS),
            (Arg::AboveEdge, PATHS),
            (Arg::Ordinary, PATHS),
            // No pool serves it: the actor refuses it.
            (Arg::Overflowing, NONE),
        ],
        // A group of no tensors, or with a shape whose size overflows (refused).
        Method::CreateTensors => &[
            (Arg::Ordinary, NONE),
            (Arg::Empty, NONE),
            (Arg::Overflowing, NONE),
        ],
        Method::Write | Method::ToClientInto => &[(Arg::Ordinary, NONE)],
        Method::EmptyTensors => &[(Arg::Overflowing, NONE)],
        Method::WriteAt => &[
            (Arg::One, SHARED),
            (Arg::Ordinary, SHARED),
            (Arg::Misaligned, SHARED),
            (Arg::Empty, NONE),
            (Arg::OutOfRange, NONE),
            (Arg::Foreign, NONE),
        ],
        Method::ReadOne => &[
            (Arg::Ordinary, SHARED),
            (Arg::Empty, NONE),
            (Arg::Foreign, NONE),
        ],
        Method::ReadAsync | Method::ReadLazy | Method::AllReduce => &[(Arg::Ordinary, SHARED)],
        // A buffer slot, or a dense tensor of a packed group.
        Method::ToClient => &[(Arg::Ordinary, SHARED), (Arg::View, TENSOR)],
        // A group of no tensors names no buffer.
        Method::ReadTensorAsync => &[
            (Arg::Ordinary, TENSOR),
            (Arg::View, TENSOR),
            (Arg::Empty, NONE),
            // A strided view past its tensor, or of a size that overflows (refused).
            (Arg::OutOfRange, NONE),
        ],
        Method::Launch => &[
            (Arg::Ordinary, SHARED),
            // The source is a buffer slot.
            (Arg::View, SHARED),
            (Arg::Aliased, NONE),
            (Arg::Foreign, NONE),
        ],
        Method::DropHandle => &[(
            Arg::Any,
            &[
                Relation::Own,
                Relation::OtherStream,
                Relation::Queued,
                Relation::CapturingStream,
                Relation::LiveGraph,
            ],
        )],
        Method::Materialize
        | Method::DryRun
        | Method::Profile
        | Method::ProfileResolve
        | Method::GraphPrepare
        | Method::StartCapture
        | Method::StopCapture
        | Method::Replay
        | Method::DropGraph
        | Method::Flush
        | Method::Sync
        | Method::SyncAll
        | Method::MemoryUsage
        | Method::MemoryReport
        | Method::MemoryCleanup
        | Method::InstallMemoryPools
        | Method::Exclusive => ANY,
    }
}

/// A declaration that the cells it matches cannot be reached; an empty list matches anything.
pub struct Exclusion {
    /// Methods matched.
    pub methods: &'static [Method],
    /// Stream states matched.
    pub states: &'static [StreamState],
    /// Argument classes matched.
    pub args: &'static [Arg],
    /// Relations matched.
    pub relations: &'static [Relation],
    /// Why those cells cannot be reached.
    pub reason: &'static str,
}

impl Exclusion {
    fn matches(&self, cell: Cell) -> bool {
        fn any_or<T: PartialEq>(list: &[T], x: T) -> bool {
            list.is_empty() || list.contains(&x)
        }
        any_or(self.methods, cell.method)
            && any_or(self.states, cell.state)
            && any_or(self.args, cell.arg)
            && any_or(self.relations, cell.relation)
    }
}

/// The cells of called methods that the explorer cannot reach. The first that matches a cell
/// gives its reason.
pub const EXCLUDED: &[Exclusion] = &[
    Exclusion {
        methods: &[
            Method::Create,
            Method::Empty,
            Method::CreateTensors,
            Method::EmptyTensors,
            Method::Write,
            Method::ReadAsync,
            Method::ReadTensorAsync,
            Method::DryRun,
            Method::Profile,
            Method::ProfileResolve,
            Method::StartCapture,
            Method::InstallMemoryPools,
            Method::AllReduce,
            Method::ToClient,
            Method::ToClientInto,
        ],
        states: &[StreamState::Capturing],
        args: &[],
        relations: &[],
        reason: "on a capturing stream the driver makes only the calls whose outcome the capture rules fix (launches recorded, a write refused late, reads, flush, sync and graph_prepare refused at once, releases, lazy reads, memory queries); an allocation's outcome is the device's (hardware graphs refuse it, software ones waste it)",
    },
    Exclusion {
        methods: &[Method::WriteAt],
        states: &[StreamState::Capturing],
        args: &[Arg::Ordinary],
        relations: &[],
        reason: "inside a capture window the driver writes one element: the write is refused late (by stop_capture) whatever its size",
    },
    Exclusion {
        methods: &[Method::WriteAt],
        states: &[StreamState::Capturing],
        args: &[Arg::OutOfRange],
        relations: &[],
        reason: "inside a capture window the driver's writes are one element at a buffer's start, or misaligned bytes inside it: a range past the end is refused at the call, capturing or not",
    },
    Exclusion {
        methods: &[Method::ReadOne],
        states: &[StreamState::Capturing],
        args: &[Arg::Empty],
        relations: &[],
        reason: "a handle of no bytes comes from an allocation, which the driver skips inside a capture window (its outcome there is the device's)",
    },
    Exclusion {
        methods: &[Method::Launch],
        states: &[StreamState::Capturing],
        args: &[Arg::View],
        relations: &[],
        reason: "inside a capture window the driver skips launches on views: recorded, the one of a view last used by the capturing stream is hit 2 to 4 times in 60,000 seeds, too rare for CI's gate (the launch_view_offsets self-test covers views in launches outside windows)",
    },
    Exclusion {
        methods: &[Method::Exclusive],
        states: &[StreamState::Capturing],
        args: &[],
        relations: &[],
        reason: "inside a capture window the driver skips exclusive: its closure's calls are refused or recorded as the same calls outside it are",
    },
    Exclusion {
        methods: &[Method::Replay, Method::DropGraph],
        states: &[StreamState::Capturing],
        args: &[],
        relations: &[],
        reason: "a capture starts only on a stream no live graph replays on (a replay there is refused into the stream's failures, which the model does not hold), so a graph's stream never captures",
    },
    Exclusion {
        methods: &[Method::Write, Method::ProfileResolve],
        states: &[StreamState::Lost],
        args: &[],
        relations: &[],
        reason: "follows, in the same step, a call that succeeded (empty, profile), and the driver learns of a loss only from a call's result",
    },
];

/// Every public method the explorer never calls, with the reason.
pub const NOT_CALLED: &[(&str, &str)] = &[
    (
        "new, with_options, init, load, inline",
        "construct a client: no stream or buffer exists yet (the explorer builds its clients with `inline`, or `with_options` in worlds whose clients run on actor threads)",
    ),
    (
        "device_id, stream_id, set_stream, properties, features, info, properties_mut, peer_id, supports_collectives, enumerate_devices, enumerate_all_devices, device_count, device_count_total, timing_method, io_optimized_vector_sizes, Graph::stream, Handle::size, Handle::device",
        "answer from the client's, graph's or handle's own fields: they reach no stream",
    ),
    (
        "create_from_slice, create_tensor, create_tensor_from_slice, empty_tensor, create_tensors_from_slices, read_one_tensor_async, read_lazy_async, sync_collective, ProfileDuration::resolve",
        "convert their arguments and call create, create_tensors, empty_tensors, read_tensor_async, read_lazy, sync or resolve_blocking, whose cells cover them",
    ),
    (
        "read, read_one_unchecked, read_tensor, read_one_unchecked_tensor, Bytes as Deref",
        "panic where read_async, read_one, read_tensor_async and Bytes::materialize return the error; the driver must judge errors",
    ),
    (
        "to_client_tensor",
        "to_client is to_client_tensor of a dense descriptor; a strided source takes the read-then-write path that read_tensor_async and create cover",
    ),
    (
        "compile",
        "fills the compile cache, which no stream orders; every launch compiles on first use",
    ),
    (
        "write_tensor, write_tensors",
        "enqueue write_at's server write once per run of consecutive elements, in one task, whose cells write_at covers; the tensor_writes property checks where the runs land",
    ),
    (
        "allocation_mode, memory_persistent_allocation",
        "route allocations to the persistent pool; the explorer reaches that pool through graph_prepare's window",
    ),
    (
        "ensure_init_collective",
        "all_reduce creates its communicator on first use",
    ),
    (
        "staging",
        "a no-op on the simulator, which has no pinned host memory",
    ),
    (
        "set_profile_level, profile_summary",
        "per-launch profiling only counts and times launches; the model judges nothing of it beyond profile's duration resolving",
    ),
    (
        "measure_throughput",
        "reaches the device only through create, launch, sync and profile on buffers of its own",
    ),
    (
        "get_resource, Resource::with_buffer",
        "lend the raw device buffer, whose use outside the runtime the model cannot judge",
    ),
];

/// One cell with its declaration.
#[derive(Clone, Copy, Debug)]
pub struct CellInfo {
    /// The cell.
    pub cell: Cell,
    /// Why the explorer cannot reach it; `None` for a reachable cell.
    pub excluded: Option<&'static str>,
}

/// The space, enumerated once.
pub struct Space {
    /// Every cell, in enumeration order.
    pub cells: Vec<CellInfo>,
    /// [`Cell::key`] → index in `cells`, or `u32::MAX` for a cell outside the space.
    index: Vec<u32>,
}

impl Space {
    /// The space, enumerated on first use.
    pub fn get() -> &'static Space {
        static SPACE: OnceLock<Space> = OnceLock::new();
        SPACE.get_or_init(Space::enumerate)
    }

    fn enumerate() -> Space {
        let mut cells = Vec::new();
        for method in Method::ALL {
            for state in StreamState::ALL {
                if state == StreamState::Lost {
                    cells.push(Cell::new(method, state, Arg::Any, Relation::None));
                    continue;
                }
                for &(arg, relations) in spec(method) {
                    for &relation in relations {
                        let cell = Cell::new(method, state, arg, relation);
                        if !cells.contains(&cell) {
                            cells.push(cell);
                        }
                    }
                }
            }
        }
        let keys =
            Method::ALL.len() * StreamState::ALL.len() * Arg::ALL.len() * Relation::ALL.len();
        let mut index = vec![u32::MAX; keys];
        for (i, cell) in cells.iter().enumerate() {
            index[cell.key()] = i as u32;
        }
        let cells = cells
            .into_iter()
            .map(|cell| CellInfo {
                cell,
                excluded: EXCLUDED.iter().find(|e| e.matches(cell)).map(|e| e.reason),
            })
            .collect();
        Space { cells, index }
    }

    /// The index of `cell` in [`Space::cells`], if it is in the space.
    pub fn index(&self, cell: Cell) -> Option<usize> {
        let i = self.index[cell.key()];
        (i != u32::MAX).then_some(i as usize)
    }
}
