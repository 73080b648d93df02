//! Fault injection: scripted faults at the n-th operation of a kind, and probabilistic ones.

use rand::Rng;
use rand_chacha::ChaCha8Rng;

/// What can go wrong on the simulated hardware.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
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
/// A window of two or more allocation failures refuses an allocation and the runtime's retry
/// after reclaiming: the refusal reaches the caller.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ScriptedFault {
    pub kind: FaultKind,
    pub nth: u64,
    /// How many consecutive triggers fault, from the `nth`; zero faults none.
    pub count: u64,
}

impl ScriptedFault {
    /// The `nth` trigger of `kind` faults.
    pub fn at(kind: FaultKind, nth: u64) -> Self {
        Self::window(kind, nth, 1)
    }

    /// Triggers `nth..nth + count` of `kind` fault.
    pub fn window(kind: FaultKind, nth: u64, count: u64) -> Self {
        Self { kind, nth, count }
    }

    fn covers(&self, kind: FaultKind, n: u64) -> bool {
        self.kind == kind && n >= self.nth && n - self.nth < self.count
    }
}

/// Per-trigger probabilities of each fault kind.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct FaultRates {
    pub allocation_failure: f64,
    pub transfer_failure: f64,
    pub kernel_fault: f64,
    pub device_loss: f64,
}

/// The faults a simulated device injects. The default injects none.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FaultPlan {
    pub scripted: Vec<ScriptedFault>,
    pub rates: FaultRates,
}

impl FaultPlan {
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
    pub kind: FaultKind,
    /// The stream whose operation faulted; `None` for allocations, which belong to no stream.
    pub stream: Option<u32>,
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
    counts: [u64; 5],
}

impl FaultInjector {
    pub fn new(plan: FaultPlan, rng: ChaCha8Rng) -> Self {
        Self {
            plan,
            rng,
            counts: [0; 5],
        }
    }

    /// Counts one trigger of `kind` and returns whether it faults.
    pub fn fires(&mut self, kind: FaultKind) -> bool {
        let slot = kind as usize;
        self.counts[slot] += 1;
        let n = self.counts[slot];
        let scripted = self.plan.scripted.iter().any(|f| f.covers(kind, n));
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tag_names_its_fault() {
        let fault = InjectedFault {
            id: 42,
            kind: FaultKind::KernelFault,
            stream: Some(1),
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
            .map(|_| injector.fires(FaultKind::AllocationFailure))
            .collect();
        assert_eq!(allocations, [false, false, true, true, false, false]);
        let launches: Vec<bool> = (0..3)
            .map(|_| injector.fires(FaultKind::KernelFault))
            .collect();
        assert_eq!(launches, [false, true, false]);
    }
}
