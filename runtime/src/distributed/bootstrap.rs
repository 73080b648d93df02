//! The blocking drivers: one rendezvous over any [`Transport`], rank 0 serving and the others
//! joining, with the decisions left to `rendezvous.rs`.

use std::io;
use std::time::Duration;

use super::env::WorldEnv;
use super::error::{BootstrapError, millis};
use super::rendezvous::{Admission, Joiner, RankZero, refusal};
use super::transport::{Link, Listener, Received, Transport};

/// How long rank 0 pauses after an accept failed for the moment (out of descriptors, say)
/// before it accepts again.
const ACCEPT_RETRY: Duration = Duration::from_millis(10);

/// How long a rendezvous may take, and how its connections pace themselves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RendezvousOptions {
    /// How long each stage may take: rank 0 waits this long from its start for every rank to
    /// join; another rank tries this long from its start to connect to rank 0, then waits this
    /// long (and [`verdict_margin`](Self::verdict_margin)) from its connection for the reply.
    pub timeout: Duration,
    /// The pause between two connection attempts of a rank that cannot reach rank 0 yet.
    pub retry_interval: Duration,
    /// How long rank 0 waits for the first frame of a new connection before dropping it as
    /// a stranger's.
    pub join_frame_timeout: Duration,
    /// How much longer than `timeout` a joined rank waits for rank 0's reply. Invariant: a
    /// rank's reply deadline, its connection's moment plus `timeout` and this margin, falls after
    /// rank 0's deadline (its start plus `timeout`), since rank 0 was listening when the rank
    /// connected. So when a rank never comes, the others hear rank 0's verdict (which ranks are
    /// missing) instead of timing out on their own, however late rank 0 started.
    pub verdict_margin: Duration,
}

impl Default for RendezvousOptions {
    /// Two minutes, like a slow job's start on a busy cluster; a retry every 100 ms.
    fn default() -> Self {
        Self {
            timeout: Duration::from_secs(120),
            retry_interval: Duration::from_millis(100),
            join_frame_timeout: Duration::from_secs(5),
            verdict_margin: Duration::from_secs(2),
        }
    }
}

/// A process's place in its world once the rendezvous succeeded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct World {
    /// This process's global rank, `RANK`: its devices are named by it.
    pub rank: u32,
    /// How many processes the world has, `WORLD_SIZE`.
    pub world_size: u32,
    /// The GPU of this host the process drives, `LOCAL_RANK`.
    pub local_rank: u32,
    /// The communicator id rank 0 made, the same bytes in every process.
    pub id: Vec<u8>,
}

/// Runs the rendezvous of `env` over `transport`: rank 0 listens on `MASTER_PORT`, waits for
/// every other rank, then calls `make_id` and sends its bytes to all; the others connect to
/// `MASTER_ADDR:MASTER_PORT` and wait for them.
///
/// # Errors
/// [`BootstrapError`]: see its variants and the module documentation for which rank sees what.
pub fn bootstrap<T: Transport>(
    transport: &T,
    env: &WorldEnv,
    options: RendezvousOptions,
    make_id: impl FnOnce() -> Result<Vec<u8>, String>,
) -> Result<World, BootstrapError> {
    let id = if env.rank == 0 {
        let listener = transport
            .listen(env.master_port)
            .map_err(|err| BootstrapError::Listen {
                port: env.master_port,
                reason: err.to_string(),
            })?;
        serve(transport, listener, env.world_size, options, make_id)?
    } else {
        join(transport, env, options)?
    };
    Ok(World {
        rank: env.rank,
        world_size: env.world_size,
        local_rank: env.local_rank,
        id,
    })
}

/// Rank 0: admits a join from each other rank on `listener`, then sends each the id `make_id`
/// makes, and returns it. The first failure is sent to every joined rank and returned; an
/// accept that fails for the moment (a connection reset before it was accepted, descriptors
/// run out) is no failure: rank 0 accepts again until its deadline. Rank 0 decides by its
/// deadline (a connection's first frame is awaited no later), and sends the id only while
/// every joined rank still waits for it: an id made after the deadline and the verdict margin
/// fails every rank with [`BootstrapError::Id`] rather than reach some of them.
///
/// # Errors
/// [`BootstrapError::RankTimeout`] (or [`BootstrapError::ManyRanksTimeout`]),
/// [`BootstrapError::WorldSizeMismatch`], [`BootstrapError::DuplicateRank`],
/// [`BootstrapError::VersionMismatch`], [`BootstrapError::Protocol`], [`BootstrapError::Io`]
/// for a listener that fails for good, or [`BootstrapError::Id`] from `make_id` (or for an id
/// over [`MAX_ID_BYTES`](super::MAX_ID_BYTES)).
pub fn serve<T: Transport>(
    transport: &T,
    mut listener: T::Listener,
    world_size: u32,
    options: RendezvousOptions,
    make_id: impl FnOnce() -> Result<Vec<u8>, String>,
) -> Result<Vec<u8>, BootstrapError> {
    let mut state = RankZero::new(world_size, millis(options.timeout));
    let mut joined: Vec<T::Link> = Vec::new();
    let deadline = transport.now().saturating_add(options.timeout);
    while !state.is_complete() {
        let left = deadline.saturating_sub(transport.now());
        let accepted = match listener.accept(left) {
            Ok(Some(link)) => link,
            Ok(None) => return Err(abort(&mut joined, state.timed_out())),
            Err(err) if is_transient(&err) && !left.is_zero() => {
                tracing::debug!(error = %err, "rendezvous: an accept failed; accepting again");
                transport.pause(left.min(ACCEPT_RETRY));
                continue;
            }
            Err(err) if is_transient(&err) => return Err(abort(&mut joined, state.timed_out())),
            Err(err) => {
                let error = BootstrapError::Io {
                    peer: format!("port {}", listener.port()),
                    during: "accepting a rank",
                    reason: err.to_string(),
                };
                return Err(abort(&mut joined, error));
            }
        };
        let mut link = accepted;
        // From now, not from before the accept: a connection near the deadline must not hold
        // the verdict past it (the joined ranks wait only the verdict margin longer).
        let wait = deadline
            .saturating_sub(transport.now())
            .min(options.join_frame_timeout);
        // A connection that says nothing, closes, or fails is no rank: drop it, keep waiting.
        let Ok(Received::Frame(frame)) = link.recv(wait) else {
            continue;
        };
        match state.admit(&frame, &link.peer()) {
            Ok(Admission::Joined(_)) => joined.push(link),
            Ok(Admission::Stranger) => {}
            Err(error) => {
                joined.push(link);
                return Err(abort(&mut joined, error));
            }
        }
    }
    let made = make_id().map_err(|reason| BootstrapError::Id { reason });
    // A world of one has no rank to keep waiting.
    let made = if joined.is_empty() {
        made
    } else {
        made.and_then(|id| in_time(id, transport.now(), deadline, options))
    };
    let (welcome, id) = match made.and_then(|id| Ok((state.welcome(&id)?, id))) {
        Ok(made) => made,
        Err(error) => return Err(abort(&mut joined, error)),
    };
    for link in &mut joined {
        // A rank that died since it joined will not join the communicator either; the
        // communicator's own timeout reports it.
        let _ = link.send(&welcome);
    }
    Ok(id)
}

/// `id`, made at `now`, if every joined rank still waits for it: each connected after rank 0
/// started listening, so waits at least until `deadline` (rank 0's) and the verdict margin.
fn in_time(
    id: Vec<u8>,
    now: Duration,
    deadline: Duration,
    options: RendezvousOptions,
) -> Result<Vec<u8>, BootstrapError> {
    let late = now.saturating_sub(deadline.saturating_add(options.verdict_margin));
    if late.is_zero() {
        return Ok(id);
    }
    Err(BootstrapError::Id {
        reason: format!(
            "made {} ms after the joined ranks stopped waiting for it (the timeout and the \
             verdict margin)",
            millis(late)
        ),
    })
}

/// Whether an accept failure is the moment's rather than the listener's: a connection gone
/// before it was accepted, a signal, or descriptors or memory run short (`EMFILE`, `ENFILE`:
/// other connections may close). Rank 0 pauses [`ACCEPT_RETRY`] and accepts again.
fn is_transient(err: &io::Error) -> bool {
    /// `ENFILE` and `EMFILE`, the same numbers on Linux, macOS and the BSDs; the standard
    /// library gives them no kind of their own.
    const OUT_OF_DESCRIPTORS: [i32; 2] = [23, 24];
    matches!(
        err.kind(),
        io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::Interrupted
            | io::ErrorKind::WouldBlock
            | io::ErrorKind::OutOfMemory
    ) || err
        .raw_os_error()
        .is_some_and(|code| OUT_OF_DESCRIPTORS.contains(&code))
}

/// Sends `error` to every joined rank (those gone already are past telling) and returns it.
fn abort<L: Link>(joined: &mut [L], error: BootstrapError) -> BootstrapError {
    let frame = refusal(&error);
    for link in joined {
        let _ = link.send(&frame);
    }
    error
}

/// A rank other than 0: connects to rank 0 (retrying until the timeout: rank 0 may start
/// later), sends its join and returns the id of rank 0's reply, waiting for it at most the
/// timeout and the verdict margin from the connection.
///
/// # Errors
/// [`BootstrapError::Unreachable`], [`BootstrapError::ReplyTimeout`],
/// [`BootstrapError::RankZeroClosed`], [`BootstrapError::Io`], or the failure rank 0 sent.
pub fn join<T: Transport>(
    transport: &T,
    env: &WorldEnv,
    options: RendezvousOptions,
) -> Result<Vec<u8>, BootstrapError> {
    let joiner = Joiner {
        rank: env.rank,
        world_size: env.world_size,
        addr: format!("{}:{}", env.master_addr, env.master_port),
        timeout_ms: millis(options.timeout),
    };
    let deadline = transport.now().saturating_add(options.timeout);
    let mut attempts: u32 = 0;
    let mut link = loop {
        let left = deadline.saturating_sub(transport.now());
        attempts = attempts.saturating_add(1);
        match transport.connect(&env.master_addr, env.master_port, left) {
            Ok(link) => break link,
            Err(err) if transport.now().saturating_add(options.retry_interval) >= deadline => {
                return Err(joiner.unreachable(attempts, err.to_string()));
            }
            Err(_) => transport.pause(options.retry_interval),
        }
    };
    // Rank 0 was listening by now, so its own deadline is at most `timeout` away.
    let reply_deadline = transport
        .now()
        .saturating_add(options.timeout)
        .saturating_add(options.verdict_margin);
    link.send(&joiner.join_frame())
        .map_err(|err| joiner.io("sending its join", &err))?;
    match link.recv(reply_deadline.saturating_sub(transport.now())) {
        Ok(Received::Frame(frame)) => joiner.reply(&frame),
        Ok(Received::Closed) => Err(joiner.closed()),
        Ok(Received::TimedOut) => Err(joiner.reply_timed_out(millis(options.verdict_margin))),
        Err(err) => Err(joiner.io("waiting for the id", &err)),
    }
}
