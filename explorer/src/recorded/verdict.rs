//! Why a seed of a recording failed, as a type: its class (the kind of call it failed at, and
//! the check) apart from the numbers a person reads, so shrinking compares classes by value.
//!
//! **Invariant:** a [`RecordedClass`] holds no call number, thread, stream or byte offset:
//! those change as calls are removed, and live in the failure's `call` and `detail`.

use std::fmt;

use lockstep::replay::{Mismatch, MismatchDetail};

use crate::failure::{Check, Violation};

/// Why a seed of a recording failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{detail}")]
pub struct RecordedFailure {
    /// What kind of failure it was.
    pub class: RecordedClass,
    /// The call it failed at; `None` for a check after the calls.
    pub call: Option<CallAt>,
    /// The check's message, with its numbers, for a person to read.
    pub detail: String,
}

/// What kind of failure a seed had.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordedClass {
    /// The kind ([`Op::kind`](lockstep::record::Op::kind)) of the call it failed at; `None`
    /// after the calls.
    pub kind: Option<String>,
    /// Which check failed.
    pub check: Check,
}

impl fmt::Display for RecordedClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            Some(kind) => write!(f, "at a `{kind}`: {}", self.check),
            None => write!(f, "after the calls: {}", self.check),
        }
    }
}

/// A recorded call, as a failure names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CallAt {
    /// Its number in the recording.
    pub call: u64,
    /// Its recorded thread.
    pub thread: u32,
    /// Its stream.
    pub stream: u64,
}

impl RecordedFailure {
    /// A check of the simulator's that failed at `call` (of `kind`), or after the calls.
    pub(super) fn observed(violation: Violation, at: Option<(CallAt, &str)>) -> Self {
        let detail = match at {
            Some((call, kind)) => format!(
                "call {} ({kind} on thread {}, stream {}): {}",
                call.call, call.thread, call.stream, violation.detail
            ),
            None => format!("after the calls: {}", violation.detail),
        };
        RecordedFailure {
            class: RecordedClass {
                kind: at.map(|(_, kind)| kind.to_owned()),
                check: violation.check,
            },
            call: at.map(|(call, _)| call),
            detail,
        }
    }

    /// A call whose result differs from the recorded run's.
    pub(super) fn differs(mismatch: &Mismatch) -> Self {
        let Mismatch {
            call,
            kind,
            thread,
            stream,
            detail,
        } = mismatch;
        let detail = match detail {
            MismatchDetail::Bytes { .. } | MismatchDetail::Value { .. } => format!(
                "{kind} of call {call} on thread {thread} differs from the recorded run: the result depends on the interleaving ({detail})"
            ),
            MismatchDetail::Outcome { .. } => format!(
                "{kind} of call {call} on thread {thread} returned other than in the recorded run ({detail})"
            ),
        };
        RecordedFailure {
            class: RecordedClass {
                kind: Some(kind.clone()),
                check: Check::DiffersFromRecording,
            },
            call: Some(CallAt {
                call: *call,
                thread: *thread,
                stream: *stream,
            }),
            detail,
        }
    }
}
