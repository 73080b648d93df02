//! Why an explored run failed, as a type: the class of the failure (where it happened and which
//! check failed) apart from the numbers a person reads, so that the shrinker keeps a candidate
//! by comparing classes (`==`) and the report prints the message it always printed.
//!
//! **Invariant:** a [`FailureClass`] holds no number that changes as operations are removed
//! (sizes, streams, buffer or fault ids): those live in the failure's `detail`, for a person.

use std::fmt;

use lockstep::{DeviceError, ReduceOperation, ServerError, StreamId};
use lockstep_sim::{FaultKind, KernelFinding, SanitizerReport};

use super::coverage::Method;
use super::workload::{ActionKind, Step};

/// Why an explored run (or its second run, or its world of processes) failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{}{detail}", at_operation(.operation))]
pub struct ExploreFailure {
    /// What kind of failure it was: the shrinker keeps candidates that fail in the same class.
    pub class: FailureClass,
    /// The operation of the workload that failed; `None` for a check around the workload.
    pub operation: Option<Box<Operation>>,
    /// The explored device's stream the failing operation or call ran on, where there is one.
    pub stream: Option<StreamId>,
    /// The check's message, with its numbers, for a person to read.
    pub detail: String,
}

/// An operation of a workload, as a failure names it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Operation {
    /// Its place in the run order (the shrinker cuts the operations after it).
    pub turn: usize,
    /// The host thread that performed it.
    pub thread: usize,
    /// What it did.
    pub step: Step,
}

/// `operation #N Step { .. }: ` before an operation's detail; nothing for other failures.
fn at_operation(operation: &Option<Box<Operation>>) -> String {
    operation.as_ref().map_or(String::new(), |o| {
        format!("operation #{} {:?}: ", o.turn, o.step)
    })
}

/// What kind of failure a run had, so that shrinking does not drift to a different bug.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FailureClass {
    /// Where it failed.
    pub at: At,
    /// Which check failed.
    pub check: Check,
}

impl fmt::Display for FailureClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.at, self.check)
    }
}

/// Where in a run a check failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum At {
    /// In an operation of the workload, of this kind.
    Operation(ActionKind),
    /// Before or after the workload.
    Stage(Stage),
}

impl fmt::Display for At {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            At::Operation(kind) => write!(f, "in operation `{kind:?}`"),
            At::Stage(stage) => write!(f, "{stage}"),
        }
    }
}

/// The checks around a workload, in the order a run makes them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    /// Installing the world's pools and budget, and the memory baselines (peers' included).
    Setup,
    /// `stop_capture` of a capture still open after the workload.
    EndCapture,
    /// The sync of every stream after the workload.
    Drain,
    /// What the drain resolved: the expected kernel faults, then the reads judged late.
    Verdicts,
    /// The read-back of everything live.
    FinalRead,
    /// The sync of every stream after every handle dropped and `memory_cleanup`.
    DrainAfterRelease,
    /// The explored device's memory against its baseline.
    Baseline,
    /// The peers' final syncs and memory.
    Peers,
    /// The simulators' own observations: a loss, the watchdog, the sanitizer, injected faults.
    Audit,
    /// The seed's second run, which must repeat the first.
    Rerun,
    /// The seed's world of processes.
    Processes,
}

impl fmt::Display for Stage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Stage::Setup => "in the world's setup",
            Stage::EndCapture => "at the stop_capture after the workload",
            Stage::Drain => "in the drain after the workload",
            Stage::Verdicts => "once the drain after the workload resolved every stream",
            Stage::FinalRead => "in the final read of everything live",
            Stage::DrainAfterRelease => "in the drain after releasing everything",
            Stage::Baseline => "at the memory baseline after the workload",
            Stage::Peers => "in the peers' final checks",
            Stage::Audit => "in the audit of the simulators' observations",
            Stage::Rerun => "in the seed's second run",
            Stage::Processes => "in the seed's world of processes",
        })
    }
}

/// Which check failed: what went wrong, without numbers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Check {
    /// A read returned bytes the model does not hold.
    WrongRead {
        /// The device whose read returned them.
        on: Side,
        /// What differs.
        differs: Difference,
    },
    /// A peer's result of an all-reduce differs from the reference.
    WrongReduction(ReduceOperation),
    /// A tensor requested dense was laid out with other strides.
    NotDense,
    /// A handle of no bytes has some.
    WrongHandleSize,
    /// A call that must succeed failed (an allocation: with no legal refusal to explain it, a
    /// pool's cap, the budget, an injected failure or a lost device).
    Refused {
        /// The call.
        call: Method,
        /// The device it was made on.
        on: Side,
    },
    /// `set_memory_budget` failed on an idle device.
    BudgetRefused,
    /// A call that must be refused with one exact error returned something else.
    WrongRefusal {
        /// The call.
        call: Method,
        /// What it returned instead: `None` for success.
        got: Option<ErrorKind>,
    },
    /// A call returned a value other than the one the model gives (`exclusive`: its closure's).
    WrongValue(Method),
    /// A call succeeded after the device was lost.
    SucceededAfterLoss(Method),
    /// A call returned an error that no injected fault, expected kernel fault or legal refusal
    /// explains.
    UnexpectedError {
        /// The call.
        call: Method,
        /// What it returned.
        error: ErrorKind,
    },
    /// A blocking call succeeded where its stream owed a checked kernel's fault.
    KernelFaultMissing(Method),
    /// A checked kernel's fault that a stream owed never surfaced.
    KernelFaultNeverSurfaced,
    /// An injected fault never surfaced.
    FaultNeverSurfaced(FaultKind),
    /// An injected fault surfaced a second time, at this call.
    FaultSurfacedTwice(Method),
    /// One stream returned the faults of two device streams.
    FaultsOfTwoDeviceStreams,
    /// One device stream's faults surfaced on two streams.
    FaultsOnTwoStreams,
    /// More allocations were refused than allocation failures were injected.
    UninjectedRefusals,
    /// The device was lost, yet no loss was injected: the runtime loses the device when one of
    /// its invariants breaks, naming the invariant (in the detail).
    LossNotInjected,
    /// Virtual time passed the simulator's watchdog.
    Hang,
    /// The simulator's sanitizer reported.
    Sanitizer(ReportKind),
    /// Memory did not return to its baseline.
    Leak(Side),
    /// The operation panicked.
    Panic,
    /// A peer's wait for the explored device timed out, yet that device was never lost.
    PeerTimedOut,
    /// Building a kernel with a workgroup size of no invocations, or of more than the
    /// runtime's maximum, was not refused as `InvalidWorkgroupSize` naming the size.
    WorkgroupSizeAccepted,
    /// A call of a recording returned other than in the recorded run (explored in another
    /// order of its threads, or with another interleaving of its streams).
    DiffersFromRecording,
    /// Two runs of one seed differ (trace hashes, or a world of processes' outcomes).
    Nondeterminism,
    /// A process of a world of processes saw other than the model expects.
    ProcessOutcome,
}

impl fmt::Display for Check {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Check::WrongRead { on, differs } => {
                write!(f, "a read on the {on} differs from the model in {differs}")
            }
            Check::WrongReduction(op) => {
                write!(
                    f,
                    "all_reduce ({op:?}) on a peer differs from the reference"
                )
            }
            Check::NotDense => f.write_str("a tensor requested dense has other strides"),
            Check::WrongHandleSize => f.write_str("a handle of no bytes has bytes"),
            Check::Refused { call, on } => {
                write!(f, "{} on the {on} must succeed, and failed", call.name())
            }
            Check::BudgetRefused => f.write_str("set_memory_budget failed on an idle device"),
            Check::WrongRefusal { call, got: None } => {
                write!(f, "{} must be refused, and succeeded", call.name())
            }
            Check::WrongRefusal {
                call,
                got: Some(got),
            } => write!(
                f,
                "{} must be refused exactly, and got {got:?}",
                call.name()
            ),
            Check::WrongValue(call) => {
                write!(f, "{} returned another value than the model's", call.name())
            }
            Check::SucceededAfterLoss(call) => {
                write!(f, "{} succeeded after the device was lost", call.name())
            }
            Check::UnexpectedError { call, error } => {
                write!(f, "{} returned an unexpected {error:?} error", call.name())
            }
            Check::KernelFaultMissing(call) => write!(
                f,
                "{} succeeded where a checked kernel's fault was owed",
                call.name()
            ),
            Check::KernelFaultNeverSurfaced => {
                f.write_str("a checked kernel's fault never surfaced")
            }
            Check::FaultNeverSurfaced(kind) => write!(f, "an injected {kind:?} never surfaced"),
            Check::FaultSurfacedTwice(call) => {
                write!(f, "an injected fault surfaced twice, at {}", call.name())
            }
            Check::FaultsOfTwoDeviceStreams => {
                f.write_str("a stream returned faults of two device streams")
            }
            Check::FaultsOnTwoStreams => {
                f.write_str("a device stream's faults surfaced on two streams")
            }
            Check::UninjectedRefusals => {
                f.write_str("more allocations refused than allocation failures injected")
            }
            Check::LossNotInjected => f.write_str("the device was lost, yet no loss was injected"),
            Check::Hang => f.write_str("hang: virtual time passed the watchdog"),
            Check::Sanitizer(kind) => write!(f, "sanitizer: {kind:?}"),
            Check::Leak(side) => write!(f, "the {side}'s memory did not return to baseline"),
            Check::Panic => f.write_str("panicked"),
            Check::PeerTimedOut => {
                f.write_str("a peer timed out waiting for the explored device, which was not lost")
            }
            Check::WorkgroupSizeAccepted => {
                f.write_str("a kernel of an invalid workgroup size was not refused")
            }
            Check::DiffersFromRecording => f.write_str("the result differs from the recorded run"),
            Check::Nondeterminism => f.write_str("two runs differ"),
            Check::ProcessOutcome => f.write_str("a process saw other than the model expects"),
        }
    }
}

/// Which device of a world.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    /// The explored device.
    Explored,
    /// One of its peers.
    Peer,
}

impl fmt::Display for Side {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Side::Explored => "explored device",
            Side::Peer => "peer",
        })
    }
}

/// What differs between a read and the model.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Difference {
    /// The number of elements.
    Length,
    /// An element's value (the lengths agree).
    Values,
}

impl Difference {
    /// What differs between `actual` and `expected`, which differ.
    pub fn of(actual: &[u32], expected: &[u32]) -> Difference {
        if actual.len() == expected.len() {
            Difference::Values
        } else {
            Difference::Length
        }
    }
}

impl fmt::Display for Difference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Difference::Length => "length",
            Difference::Values => "values",
        })
    }
}

/// The variant of a [`ServerError`], without its numbers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// [`ServerError::KernelFault`].
    KernelFault,
    /// [`ServerError::DeviceLost`].
    DeviceLost,
    /// [`ServerError::OutOfMemory`].
    OutOfMemory,
    /// [`ServerError::Device`], with the device error's variant.
    Device(DeviceErrorKind),
    /// [`ServerError::TaskPanicked`].
    TaskPanicked,
    /// [`ServerError::Io`].
    Io,
    /// [`ServerError::Capture`].
    Capture,
    /// [`ServerError::ActorGone`].
    ActorGone,
    /// [`ServerError::Collective`].
    Collective,
    /// [`ServerError::HostOutOfMemory`].
    HostOutOfMemory,
}

impl ErrorKind {
    /// `err`'s variant.
    pub fn of(err: &ServerError) -> ErrorKind {
        match err {
            ServerError::KernelFault { .. } => ErrorKind::KernelFault,
            ServerError::DeviceLost { .. } => ErrorKind::DeviceLost,
            ServerError::OutOfMemory(_) => ErrorKind::OutOfMemory,
            ServerError::Device { error, .. } => ErrorKind::Device(DeviceErrorKind::of(error)),
            ServerError::TaskPanicked { .. } => ErrorKind::TaskPanicked,
            ServerError::Io(_) => ErrorKind::Io,
            ServerError::Capture(_) => ErrorKind::Capture,
            ServerError::ActorGone { .. } => ErrorKind::ActorGone,
            ServerError::Collective { .. } => ErrorKind::Collective,
            ServerError::HostOutOfMemory { .. } => ErrorKind::HostOutOfMemory,
        }
    }

    /// The variant of the error `result` holds; `None` for success.
    pub fn of_result<T>(result: &Result<T, ServerError>) -> Option<ErrorKind> {
        result.as_ref().err().map(ErrorKind::of)
    }
}

/// The variant of a [`DeviceError`], without its numbers and reasons.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeviceErrorKind {
    /// [`DeviceError::OutOfMemory`].
    OutOfMemory,
    /// [`DeviceError::AllocationTooLarge`].
    AllocationTooLarge,
    /// [`DeviceError::Lost`].
    Lost,
    /// [`DeviceError::Unavailable`].
    Unavailable,
    /// [`DeviceError::TransferFailed`].
    TransferFailed,
    /// [`DeviceError::ExecutionFault`].
    ExecutionFault,
    /// [`DeviceError::Compile`].
    Compile,
    /// [`DeviceError::Unsupported`].
    Unsupported,
    /// [`DeviceError::Capture`].
    Capture,
    /// [`DeviceError::Collective`].
    Collective,
    /// [`DeviceError::Contract`].
    Contract,
}

impl DeviceErrorKind {
    /// `err`'s variant.
    pub fn of(err: &DeviceError) -> DeviceErrorKind {
        match err {
            DeviceError::OutOfMemory { .. } => DeviceErrorKind::OutOfMemory,
            DeviceError::AllocationTooLarge { .. } => DeviceErrorKind::AllocationTooLarge,
            DeviceError::Lost { .. } => DeviceErrorKind::Lost,
            DeviceError::Unavailable { .. } => DeviceErrorKind::Unavailable,
            DeviceError::TransferFailed { .. } => DeviceErrorKind::TransferFailed,
            DeviceError::ExecutionFault { .. } => DeviceErrorKind::ExecutionFault,
            DeviceError::Compile { .. } => DeviceErrorKind::Compile,
            DeviceError::Unsupported { .. } => DeviceErrorKind::Unsupported,
            DeviceError::Capture { .. } => DeviceErrorKind::Capture,
            DeviceError::Collective(_) => DeviceErrorKind::Collective,
            DeviceError::Contract { .. } => DeviceErrorKind::Contract,
        }
    }
}

/// The variant of a [`SanitizerReport`], without its operations, buffers and bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReportKind {
    /// [`SanitizerReport::UninitializedRead`].
    UninitializedRead,
    /// [`SanitizerReport::UseAfterFree`].
    UseAfterFree,
    /// [`SanitizerReport::FreeWhileInUse`].
    FreeWhileInUse,
    /// [`SanitizerReport::Race`].
    Race,
    /// [`SanitizerReport::ContractViolation`].
    ContractViolation,
    /// What the kernel sanitizer found inside a launch.
    Kernel(KernelFinding),
}

impl ReportKind {
    /// `report`'s variant.
    pub fn of(report: &SanitizerReport) -> ReportKind {
        match report {
            SanitizerReport::UninitializedRead { .. } => ReportKind::UninitializedRead,
            SanitizerReport::UseAfterFree { .. } => ReportKind::UseAfterFree,
            SanitizerReport::FreeWhileInUse { .. } => ReportKind::FreeWhileInUse,
            SanitizerReport::Race { .. } => ReportKind::Race,
            SanitizerReport::ContractViolation(_) => ReportKind::ContractViolation,
            SanitizerReport::Kernel { finding, .. } => ReportKind::Kernel(*finding),
        }
    }
}

/// A check that failed, not yet placed in the run: what the driver's calls and the model
/// return. The operation that made the call, or the stage around the workload, places it
/// ([`Violation::in_operation`], [`Violation::in_stage`]).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{detail}")]
pub struct Violation {
    /// Which check failed.
    pub check: Check,
    /// The explored device's stream of the failing call, where the check knows it.
    pub stream: Option<StreamId>,
    /// The check's message, for a person to read.
    pub detail: String,
}

impl Violation {
    /// `check` failed, as `detail` says.
    pub fn new(check: Check, detail: impl Into<String>) -> Self {
        Violation {
            check,
            stream: None,
            detail: detail.into(),
        }
    }

    /// A panic, caught: its message (a `String` or `&str` payload) is the detail.
    pub fn panicked(payload: &(dyn std::any::Any + Send)) -> Self {
        let message = (payload.downcast_ref::<String>().cloned())
            .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default();
        Violation::new(Check::Panic, format!("panicked: {message}"))
    }

    /// `call` on device `on`, which must succeed, failed with `err`: the detail reads
    /// `what: err`.
    pub fn refused(
        call: Method,
        on: Side,
        what: impl fmt::Display,
        err: impl fmt::Display,
    ) -> Self {
        Violation::new(Check::Refused { call, on }, err.to_string()).context(what)
    }

    /// The same, on stream `s`.
    pub fn on(self, s: StreamId) -> Self {
        Violation {
            stream: Some(s),
            ..self
        }
    }

    /// The same, its detail after `what: ` (the call or step that made the check).
    pub fn context(self, what: impl fmt::Display) -> Self {
        Violation {
            detail: format!("{what}: {}", self.detail),
            ..self
        }
    }

    /// Placed in `operation`, whose call ran on `stream` (unless the check named another).
    pub fn in_operation(self, operation: Operation, stream: StreamId) -> ExploreFailure {
        ExploreFailure {
            class: FailureClass {
                at: At::Operation(operation.step.action.kind()),
                check: self.check,
            },
            operation: Some(Box::new(operation)),
            stream: self.stream.or(Some(stream)),
            detail: self.detail,
        }
    }

    /// Placed in `stage`, around the workload.
    pub fn in_stage(self, stage: Stage) -> ExploreFailure {
        ExploreFailure {
            class: FailureClass {
                at: At::Stage(stage),
                check: self.check,
            },
            operation: None,
            stream: self.stream,
            detail: self.detail,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::{Action, On};

    #[test]
    fn an_operations_failure_reads_as_it_always_did_and_is_classed_by_its_action() {
        let step = Step {
            on: On::Pinned(2),
            action: Action::Read { slot: 3 },
        };
        let read = Check::WrongRead {
            on: Side::Explored,
            differs: Difference::Values,
        };
        let failure = Violation::new(read, "read 17 elements, model holds 17")
            .context("read on stream-2")
            .in_operation(
                Operation {
                    turn: 41,
                    thread: 0,
                    step,
                },
                StreamId(2),
            );
        assert_eq!(
            failure.to_string(),
            "operation #41 Step { on: Pinned(2), action: Read { slot: 3 } }: read on stream-2: read 17 elements, model holds 17"
        );
        assert_eq!(failure.class.at, At::Operation(ActionKind::Read));
        assert_eq!(failure.stream, Some(StreamId(2)));
        let after = Violation::new(Check::Hang, "hang").in_stage(Stage::Audit);
        assert_eq!(after.to_string(), "hang");
        assert_eq!(after.class.at, At::Stage(Stage::Audit));
    }
}
