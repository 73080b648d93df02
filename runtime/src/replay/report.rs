//! What a replay found: its differences from the recording ([`Mismatch`]) and its totals
//! ([`ReplayReport`]), each printed for a person.

use std::collections::BTreeMap;
use std::fmt;

use crate::record::Range;

/// A difference between the recording and its replay.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mismatch {
    /// The recorded call.
    pub call: u64,
    /// Its kind ([`Op::kind`](crate::record::Op::kind)).
    pub kind: String,
    /// Its stream.
    pub stream: u64,
    /// Its thread.
    pub thread: u32,
    /// What differs.
    pub detail: MismatchDetail,
}

/// What differs in a [`Mismatch`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MismatchDetail {
    /// Range `index` of a read first differs in bytes `start..end` of the range.
    Bytes {
        /// Which range of the read.
        index: usize,
        /// The range as recorded.
        range: Range,
        /// First differing byte's chunk start, from the range's start.
        start: u64,
        /// That chunk's end.
        end: u64,
    },
    /// Range `index` of a read differs at byte `offset` of the range, where the recording
    /// kept the bytes: the differing value (a kernel's float past the tolerance, or else the
    /// aligned 4-byte word around the first differing byte) as recorded and as replayed.
    Value {
        /// Which range of the read.
        index: usize,
        /// The range as recorded.
        range: Range,
        /// The value's first byte, from the range's start.
        offset: u64,
        /// The value as recorded.
        recorded: String,
        /// The value as replayed.
        replayed: String,
    },
    /// The call succeeded in one run and failed in the other.
    Outcome {
        /// What the recording says it returned.
        recorded: String,
        /// What it returned in the replay.
        replayed: String,
    },
}

impl fmt::Display for Mismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "call {} ({} on stream {}, thread {}): {}",
            self.call, self.kind, self.stream, self.thread, self.detail
        )
    }
}

impl fmt::Display for MismatchDetail {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MismatchDetail::Bytes {
                index,
                range,
                start,
                end,
            } => write!(
                f,
                "range {index} (buffer {}, bytes {}..{}) first differs in its bytes {start}..{end}",
                range.buffer,
                range.offset,
                range.offset + range.len
            ),
            MismatchDetail::Value {
                index,
                range,
                offset,
                recorded,
                replayed,
            } => write!(
                f,
                "range {index} (buffer {}, bytes {}..{}) differs at byte {offset}: recorded {recorded}, replayed {replayed}",
                range.buffer,
                range.offset,
                range.offset + range.len
            ),
            MismatchDetail::Outcome { recorded, replayed } => {
                write!(f, "recorded {recorded}, replayed {replayed}")
            }
        }
    }
}

/// What a replay did and found.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ReplayReport {
    /// Calls run.
    pub calls_replayed: u64,
    /// Calls refused at the call when recorded (they changed nothing; not run).
    pub calls_refused: u64,
    /// Reads whose every range matched the recording: bit for bit, or with kernels' floats
    /// within the tolerance.
    pub reads_matched: u64,
    /// Of those, the reads that matched only within the float tolerance.
    pub reads_within_tolerance: u64,
    /// The largest difference those floats had.
    pub float_difference: FloatDifference,
    /// Waiting calls (not reads) whose success or failure matched.
    pub outcomes_matched: u64,
    /// Differences, in recorded order.
    pub mismatches: Vec<Mismatch>,
    /// What could not be checked, and why.
    pub unchecked: Vec<String>,
    /// Calls not run, by reason, with their counts.
    pub skipped: BTreeMap<String, u64>,
}

impl ReplayReport {
    /// Whether every check passed (things unchecked are listed, not failures).
    pub fn matched(&self) -> bool {
        self.mismatches.is_empty()
    }
}

impl fmt::Display for ReplayReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "replayed {} calls ({} refused when recorded, not run): {} reads and {} outcomes matched, {} mismatches",
            self.calls_replayed,
            self.calls_refused,
            self.reads_matched,
            self.outcomes_matched,
            self.mismatches.len()
        )?;
        if self.reads_within_tolerance > 0 {
            let FloatDifference { absolute, relative } = self.float_difference;
            writeln!(
                f,
                "{} reads matched with floats that kernels computed within the tolerance (largest difference {absolute:e}, relative {relative:e})",
                self.reads_within_tolerance
            )?;
        }
        for mismatch in &self.mismatches {
            writeln!(f, "MISMATCH {mismatch}")?;
        }
        for note in &self.unchecked {
            writeln!(f, "not checked: {note}")?;
        }
        for (reason, n) in &self.skipped {
            writeln!(f, "not replayed ({n}): {reason}")?;
        }
        Ok(())
    }
}

/// The largest difference of floats accepted within the tolerance.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct FloatDifference {
    /// Largest `|replayed - recorded|`.
    pub absolute: f64,
    /// Largest `|replayed - recorded| / |recorded|`, over recorded values other than zero.
    pub relative: f64,
}

impl FloatDifference {
    pub(super) fn note(&mut self, recorded: f64, replayed: f64) {
        let difference = (replayed - recorded).abs();
        if difference.is_finite() {
            self.absolute = self.absolute.max(difference);
            if recorded != 0.0 {
                self.relative = self.relative.max(difference / recorded.abs());
            }
        }
    }

    /// The larger of both, field by field.
    pub fn max(self, other: Self) -> Self {
        Self {
            absolute: self.absolute.max(other.absolute),
            relative: self.relative.max(other.relative),
        }
    }
}
