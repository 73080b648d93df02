//! Fault injection: scripted faults at the n-th operation of a kind (on every stream, or on
//! one stream the runtime names), and probabilistic ones.
//!
//! A fault aimed at a stream names it by its [`StreamId`], the id users know: the runtime
//! tells the device which of its streams serves which id through
//! [`Device::label_stream`](lockstep::Device::label_stream), right after creating it.

use std::collections::BTreeMap;

use lockstep::StreamId;
use rand::Rng;
use rand_chacha::ChaCha8Rng;
use thiserror::Error;

/// What can go wrong on the simulated hardware.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum FaultKind {
    /// `allocate` fails with out-of-memory.
    AllocationFailure,
    /// A write or read fails when it executes; a failed write leaves the target unchanged.
    TransferFailure,
    /// A kernel faults when it executes, writing nothing.
    KernelFault,
    /// The device is lost when an operation executes; every later call fails.
    DeviceLoss,
    /// The device never joins a collective it executes (scripted only): its peers wait for it
    /// until a virtual-time timeout and fail with `CollectiveError::PeerTimeout`; the device
    /// itself reports `CollectiveError::CommunicatorFailed`.
    PeerAbsent,
}

/// Faults at fixed points: `count` consecutive occurrences of the kind's trigger, from the
/// `nth` (counting from 1) — allocations for `AllocationFailure`, executed transfers for
/// `TransferFailure`, executed launches for `KernelFault`, any executed operation for
/// `DeviceLoss`, executed collectives (all-reduces, sends, receives) for `PeerAbsent`.
///
/// Triggers are counted on every stream together, or, for a fault aimed at a stream with
/// [`on_stream`](Self::on_stream), on that stream alone, so a test aims at one stream's n-th
/// launch without counting the others'.
///
/// A window of two or more allocation failures refuses an allocation and the runtime's retry
/// after reclaiming: the refusal reaches the caller.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ScriptedFault {
    /// What the fault does.
    pub kind: FaultKind,
    /// Which trigger of `kind` faults first, counting from 1.
    pub nth: u64,
    /// How many consecutive triggers fault, from the `nth`; zero faults none.
    pub count: u64,
    /// The stream whose triggers are counted; `None` counts every stream's.
    stream: Option<StreamId>,
}

/// A scripted fault that cannot be aimed as asked.
#[derive(Clone, Copy, Debug, Error, PartialEq, Eq)]
pub enum FaultPlanError {
    /// `on_stream` aimed an `AllocationFailure` at a stream.
    #[error(
        "an allocation belongs to no stream, so an AllocationFailure cannot be aimed at {stream}: count allocations on every stream instead"
    )]
    AllocationOnStream {
        /// The stream it was aimed at.
        stream: StreamId,
    },
}

impl ScriptedFault {
    /// The `nth` trigger of `kind` faults.
    pub fn at(kind: FaultKind, nth: u64) -> Self {
        Self::window(kind, nth, 1)
    }

    /// Triggers `nth..nth + count` of `kind` fault.
    pub fn window(kind: FaultKind, nth: u64, count: u64) -> Self {
        Self {
            kind,
            nth,
            count,
            stream: None,
        }
    }

    /// The same fault, counting only the triggers of `stream` (the runtime's id of it).
    ///
    /// # Errors
    /// [`FaultPlanError::AllocationOnStream`] for an `AllocationFailure`: the device
    /// allocates for the whole runtime, not for a stream.
    pub fn on_stream(self, stream: StreamId) -> Result<Self, FaultPlanError> {
        if self.kind == FaultKind::AllocationFailure {
            return Err(FaultPlanError::AllocationOnStream { stream });
        }
        Ok(Self {
            stream: Some(stream),
            ..self
        })
    }

    /// The stream this fault is aimed at, if it is aimed at one.
    pub fn stream(&self) -> Option<StreamId> {
        self.stream
    }

    /// Whether this fault covers trigger number `n` of its stream (of every stream when it
    /// is aimed at none).
    fn covers(&self, n: u64) -> bool {
        n >= self.nth && n - self.nth < self.count
    }
}

/// Per-trigger probabilities of each fault kind.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct FaultRates {
    /// Probability that an allocation fails (per allocation, 0 to 1).
    pub allocation_failure: f64,
    /// Probability that an executed transfer fails (per transfer).
    pub transfer_failure: f64,
    /// Probability that an executed launch faults (per launch).
    pub kernel_fault: f64,
    /// Probability that an executed operation loses the device (per operation).
    pub device_loss: f64,
}

/// The faults a simulated device injects. The default injects none.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FaultPlan {
    /// Faults at fixed triggers.
    pub scripted: Vec<ScriptedFault>,
    /// Faults drawn at random, from the device's seed.
    pub rates: FaultRates,
}

impl FaultPlan {
    /// A plan of only `faults`, with no probabilistic ones.
    pub fn scripted(faults: impl IntoIterator<Item = ScriptedFault>) -> Self {
        Self {
            scripted: faults.into_iter().collect(),
            rates: FaultRates::default(),
        }
    }
}

/// A fault the simulator injected, as an observer sees it. Its error message carries
/// [`tag`](Self::tag), so a test can match every error it gets back to the fault behind it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InjectedFault {
    /// Numbers injected faults of one device from 0, in injection order.
    pub id: u64,
    /// What the fault was.
    pub kind: FaultKind,
    /// The device's index of the stream whose operation faulted (in creation order); `None`
    /// for allocations, which belong to no stream.
    pub stream: Option<u32>,
    /// The runtime's id of that stream, when the runtime named it
    /// ([`Device::label_stream`](lockstep::Device::label_stream)).
    pub stream_id: Option<StreamId>,
    /// The enqueue number of the operation that faulted (see
    /// [`Observations::ops_enqueued`](crate::Observations::ops_enqueued)); `None` for
    /// allocations, which are not enqueued.
    pub op: Option<u64>,
}

const TAG_PREFIX: &str = "[injected fault #";

impl InjectedFault {
    /// `[injected fault #id]`: part of the message of the error this fault causes.
    pub fn tag(&self) -> String {
        format!("{TAG_PREFIX}{}]", self.id)
    }

    /// The id of the injected fault an error message reports, if it reports one.
    pub fn id_in(message: &str) -> Option<u64> {
        let start = message.find(TAG_PREFIX)? + TAG_PREFIX.len();
        let len = message[start..].find(']')?;
        message[start..start + len].parse().ok()
    }
}

/// Counts triggers and decides, deterministically, whether each one faults.
#[derive(Debug)]
pub(crate) struct FaultInjector {
    plan: FaultPlan,
    /// Separate from the scheduler's generator, so that enabling faults does not change the
    /// interleaving of a seed before the first fault.
    rng: ChaCha8Rng,
    /// Triggers so far of each kind, on every stream together.
    counts: BTreeMap<FaultKind, u64>,
    /// Triggers so far of each kind on each named stream.
    stream_counts: BTreeMap<(FaultKind, StreamId), u64>,
}

impl FaultInjector {
    pub fn new(plan: FaultPlan, rng: ChaCha8Rng) -> Self {
        Self {
            plan,
            rng,
            counts: BTreeMap::new(),
            stream_counts: BTreeMap::new(),
        }
    }

    /// Whether a scripted fault is aimed at a stream: the device must then know the runtime's
    /// id of every stream that runs work.
    pub fn aims_at_streams(&self) -> bool {
        self.plan.scripted.iter().any(|f| f.stream.is_some())
    }

    /// Counts one trigger of `kind`, on the stream the runtime calls `stream` (`None` for an
    /// allocation, or a stream the runtime did not name), and returns whether it faults.
    pub fn fires(&mut self, kind: FaultKind, stream: Option<StreamId>) -> bool {
        let n = increment(self.counts.entry(kind).or_default());
        let n_on_stream =
            stream.map(|s| increment(self.stream_counts.entry((kind, s)).or_default()));
        let scripted = self.plan.scripted.iter().any(|f| {
            f.kind == kind
                && match f.stream {
                    None => f.covers(n),
                    Some(target) => {
                        stream == Some(target) && n_on_stream.is_some_and(|n| f.covers(n))
                    }
                }
        });
        let rate = match kind {
            FaultKind::AllocationFailure => self.plan.rates.allocation_failure,
            FaultKind::TransferFailure => self.plan.rates.transfer_failure,
            FaultKind::KernelFault => self.plan.rates.kernel_fault,
            FaultKind::DeviceLoss => self.plan.rates.device_loss,
            FaultKind::PeerAbsent => 0.0,
        };
        // Draw only when a rate is set, so a plan without rates consumes no randomness.
        let random = rate > 0.0 && self.rng.random_bool(rate.min(1.0));
        scripted || random
    }
}

/// Adds one to `count` and returns the new count.
fn increment(count: &mut u64) -> u64 {
    *count += 1;
    *count
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tag_names_its_fault() {
        let fault = InjectedFault {
            id: 42,
            kind: FaultKind::KernelFault,
            stream: Some(1),
            stream_id: Some(StreamId(4)),
            op: Some(3),
        };
        let message = format!("kernel failed {} (seed 7)", fault.tag());
        assert_eq!(InjectedFault::id_in(&message), Some(42));
        assert_eq!(InjectedFault::id_in("kernel failed (seed 7)"), None);
    }

    #[test]
    fn a_window_faults_its_consecutive_triggers_only() {
        let plan = FaultPlan::scripted([
            ScriptedFault::window(FaultKind::AllocationFailure, 3, 2),
            ScriptedFault::at(FaultKind::KernelFault, 2),
        ]);
        let mut injector = FaultInjector::new(plan, rand::SeedableRng::seed_from_u64(0));
        let allocations: Vec<bool> = (0..6)
            .map(|_| injector.fires(FaultKind::AllocationFailure, None))
            .collect();
        assert_eq!(allocations, [false, false, true, true, false, false]);
        let launches: Vec<bool> = (0..3)
            .map(|_| injector.fires(FaultKind::KernelFault, Some(StreamId(0))))
            .collect();
        assert_eq!(launches, [false, true, false]);
    }

    #[test]
    fn a_fault_aimed_at_a_stream_counts_that_streams_triggers_only() {
        let (a, b) = (StreamId(0), StreamId(1));
        let aimed = ScriptedFault::at(FaultKind::KernelFault, 2)
            .on_stream(b)
            .expect("a launch belongs to a stream");
        let mut injector = FaultInjector::new(
            FaultPlan::scripted([aimed]),
            rand::SeedableRng::seed_from_u64(0),
        );
        assert!(injector.aims_at_streams());
        // Launches of a, b, a, a, b, b: the second of b is the fifth overall.
        let fired: Vec<bool> = [a, b, a, a, b, b]
            .into_iter()
            .map(|s| injector.fires(FaultKind::KernelFault, Some(s)))
            .collect();
        assert_eq!(fired, [false, false, false, false, true, false]);
        // A transfer on b is another kind: it counts apart.
        assert!(!injector.fires(FaultKind::TransferFailure, Some(b)));
    }

    #[test]
    fn an_allocation_fault_cannot_be_aimed_at_a_stream() {
        let refused = ScriptedFault::at(FaultKind::AllocationFailure, 1).on_stream(StreamId(3));
        assert_eq!(
            refused,
            Err(FaultPlanError::AllocationOnStream {
                stream: StreamId(3)
            })
        );
    }
}
