//! Comparing what a replayed read returned with what the recording holds: by chunk hashes
//! first; where they differ and the recording kept the bytes, value by value, with the floats
//! that kernels computed accepted within a [`FloatTolerance`] (devices differ in how they round
//! transcendental functions and whether they fuse a multiply and an add, so no replay on
//! another device reproduces them bit for bit). Everything else must match exactly.

use std::collections::BTreeMap;

use half::{bf16, f16};

use super::report::{FloatDifference, MismatchDetail};
use crate::kernel::ElemType;
use crate::record::{self, Range, ReadData};

/// How far a float that a kernel computed may be from the recorded one and still match:
/// `|replayed - recorded| <= absolute + relative * |recorded|` (NumPy's `isclose`). NaN
/// matches NaN; an infinity only itself.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FloatTolerance {
    /// Allowed difference relative to the recorded value.
    pub relative: f64,
    /// Allowed difference for values near zero.
    pub absolute: f64,
}

impl FloatTolerance {
    /// Bit-exact: no difference accepted.
    pub const EXACT: Self = Self {
        relative: 0.0,
        absolute: 0.0,
    };

    fn accepts(self, recorded: f64, replayed: f64) -> bool {
        if recorded.is_nan() || replayed.is_nan() {
            return recorded.is_nan() && replayed.is_nan();
        }
        if recorded.is_infinite() || replayed.is_infinite() {
            return recorded == replayed;
        }
        (replayed - recorded).abs() <= self.absolute + self.relative * recorded.abs()
    }
}

impl Default for FloatTolerance {
    /// A relative 1e-3 and an absolute 1e-5: wide enough for the ULPs that WGSL allows
    /// transcendental functions, carried through a few dependent kernels; far below any
    /// difference of a token, an index or a wrong sum.
    fn default() -> Self {
        Self {
            relative: 1e-3,
            absolute: 1e-5,
        }
    }
}

/// The byte ranges of one buffer that kernels last wrote through a float binding, with its
/// type. **Invariant:** the ranges are disjoint and none is empty.
#[derive(Clone, Debug, Default)]
pub(super) struct FloatRanges(BTreeMap<u64, (u64, ElemType)>);

impl FloatRanges {
    /// Bytes `start..end` were last written as `elem` (by a kernel) or as host data (`None`).
    pub(super) fn written(&mut self, start: u64, end: u64, elem: Option<ElemType>) {
        let overlapping: Vec<(u64, (u64, ElemType))> = self
            .0
            .range(..end)
            .filter(|(_, (e, _))| *e > start)
            .map(|(&s, &v)| (s, v))
            .collect();
        for (s, (e, t)) in overlapping {
            self.0.remove(&s);
            if s < start {
                self.0.insert(s, (start, t));
            }
            if e > end {
                self.0.insert(end, (e, t));
            }
        }
        if let Some(elem) = elem.filter(|e| e.is_float())
            && start < end
        {
            self.0.insert(start, (end, elem));
        }
    }

    /// The float element of the buffer holding byte `at`: its start and type.
    fn element_at(&self, at: u64) -> Option<(u64, ElemType)> {
        let (&start, &(end, elem)) = self.0.range(..=at).next_back()?;
        (at < end).then(|| {
            let size = elem.size_bytes() as u64;
            (start + (at - start) / size * size, elem)
        })
    }
}

/// How one range read compares with the recording.
pub(super) enum Verdict {
    /// Bit for bit.
    Exact,
    /// Every difference is a kernel's float within the tolerance.
    Within(FloatDifference),
    /// A difference outside the tolerance, or one the recording cannot locate.
    Differs(MismatchDetail),
}

/// Compares range `index` of a read (`range`, of a buffer whose kernel-written floats are
/// `floats`) with what the recording holds.
pub(super) fn compare(
    (index, range): (usize, Range),
    recorded: &ReadData,
    replayed: &[u8],
    floats: Option<&FloatRanges>,
    tolerance: FloatTolerance,
) -> Verdict {
    let Some((start, end)) =
        record::first_differing_chunk(&recorded.hashes, &record::chunk_hashes(replayed))
    else {
        return Verdict::Exact;
    };
    let chunk = MismatchDetail::Bytes {
        index,
        range,
        start,
        end,
    };
    match &recorded.bytes {
        Some(bytes) if bytes.len() == replayed.len() => {
            let empty = FloatRanges::default();
            let values = Values {
                index,
                range,
                floats: floats.unwrap_or(&empty),
                tolerance,
            };
            match values.compare(bytes, replayed) {
                // The bytes kept agree, the hashes do not: the recording contradicts itself.
                Verdict::Within(_) if bytes == replayed => Verdict::Differs(chunk),
                verdict => verdict,
            }
        }
        _ => Verdict::Differs(chunk),
    }
}

/// A value-by-value comparison of one range read.
struct Values<'a> {
    index: usize,
    range: Range,
    floats: &'a FloatRanges,
    tolerance: FloatTolerance,
}

impl Values<'_> {
    fn compare(&self, recorded: &[u8], replayed: &[u8]) -> Verdict {
        let mut worst = FloatDifference::default();
        let mut at = 0;
        while let Some(skip) = recorded[at..]
            .iter()
            .zip(&replayed[at..])
            .position(|(a, b)| a != b)
        {
            at += skip;
            // A float element counts only when the read holds all of it.
            let element = self
                .floats
                .element_at(self.range.offset + at as u64)
                .and_then(|(start, elem)| {
                    let start = start.checked_sub(self.range.offset)?;
                    (start + elem.size_bytes() as u64 <= self.range.len)
                        .then_some((start as usize, elem))
                });
            let Some((start, elem)) = element else {
                return Verdict::Differs(self.word(at, recorded, replayed));
            };
            let span = start..start + elem.size_bytes();
            let (a, b) = (
                float(elem, &recorded[span.clone()]),
                float(elem, &replayed[span.clone()]),
            );
            if !self.tolerance.accepts(a, b) {
                return Verdict::Differs(self.value(
                    start,
                    format!("{a:e} ({elem:?})"),
                    format!("{b:e}"),
                ));
            }
            worst.note(a, b);
            at = span.end;
        }
        Verdict::Within(worst)
    }

    /// The differing byte at `at`, shown with the aligned 4-byte word around it.
    fn word(&self, at: usize, recorded: &[u8], replayed: &[u8]) -> MismatchDetail {
        let start = at / 4 * 4;
        let end = (start + 4).min(recorded.len());
        let hex = |bytes: &[u8]| {
            let digits: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
            format!("bytes {digits}")
        };
        self.value(
            start,
            hex(&recorded[start..end]),
            hex(&replayed[start..end]),
        )
    }

    fn value(&self, offset: usize, recorded: String, replayed: String) -> MismatchDetail {
        MismatchDetail::Value {
            index: self.index,
            range: self.range,
            offset: offset as u64,
            recorded,
            replayed,
        }
    }
}

/// The float `elem` whose little-endian bytes are `bytes`, widened.
fn float(elem: ElemType, bytes: &[u8]) -> f64 {
    let half = || u16::from_le_bytes([bytes[0], bytes[1]]);
    match elem {
        ElemType::F16 => f16::from_bits(half()).to_f64(),
        ElemType::BF16 => bf16::from_bits(half()).to_f64(),
        _ => f32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]).into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn range(len: u64) -> Range {
        Range {
            buffer: 3,
            offset: 0,
            len,
        }
    }

    fn recorded(bytes: &[u8]) -> ReadData {
        ReadData {
            hashes: record::chunk_hashes(bytes),
            bytes: Some(bytes.to_vec()),
        }
    }

    fn floats_of(values: &[f32]) -> Vec<u8> {
        values.iter().flat_map(|v| v.to_le_bytes()).collect()
    }

    #[test]
    fn kernel_floats_match_within_the_tolerance_and_are_named_outside_it() {
        let mut floats = FloatRanges::default();
        floats.written(0, 12, Some(ElemType::F32));
        let was = floats_of(&[1.0, 2.0, 3.0]);
        let close = floats_of(&[1.0, 2.0005, 3.0]);
        let far = floats_of(&[1.0, 2.0, 3.1]);
        let tolerance = FloatTolerance::default();
        let verdict = compare(
            (0, range(12)),
            &recorded(&was),
            &close,
            Some(&floats),
            tolerance,
        );
        let Verdict::Within(worst) = verdict else {
            panic!("a difference within the tolerance was refused");
        };
        assert!((worst.relative - 0.00025).abs() < 1e-6, "{worst:?}");
        let Verdict::Differs(detail) = compare(
            (0, range(12)),
            &recorded(&was),
            &far,
            Some(&floats),
            tolerance,
        ) else {
            panic!("a difference past the tolerance was accepted");
        };
        assert_eq!(
            detail.to_string(),
            "range 0 (buffer 3, bytes 0..12) differs at byte 8: recorded 3e0 (F32), replayed 3.0999999046325684e0"
        );
    }

    #[test]
    fn bytes_no_float_kernel_wrote_must_match_exactly() {
        let mut floats = FloatRanges::default();
        floats.written(0, 8, Some(ElemType::F32));
        // A host write over the second float makes it exact data again.
        floats.written(4, 8, None);
        let was = floats_of(&[1.0, 2.0]);
        let close = floats_of(&[1.0000001, 2.0000002]);
        let Verdict::Differs(detail) = compare(
            (1, range(8)),
            &recorded(&was),
            &close,
            Some(&floats),
            FloatTolerance::default(),
        ) else {
            panic!("host data that differs was accepted");
        };
        assert_eq!(
            detail.to_string(),
            "range 1 (buffer 3, bytes 0..8) differs at byte 4: recorded bytes 00000040, replayed bytes 01000040"
        );
    }

    #[test]
    fn without_kept_bytes_the_first_differing_chunk_is_named() {
        let was = ReadData {
            bytes: None,
            ..recorded(&[1, 2, 3, 4])
        };
        let Verdict::Differs(MismatchDetail::Bytes { start, end, .. }) = compare(
            (0, range(4)),
            &was,
            &[1, 2, 3, 5],
            None,
            FloatTolerance::default(),
        ) else {
            panic!("a difference went unnamed");
        };
        assert_eq!((start, end), (0, 4));
    }

    #[test]
    fn nan_matches_nan_and_an_infinity_only_itself() {
        let t = FloatTolerance::default();
        assert!(t.accepts(f64::NAN, f64::NAN));
        assert!(!t.accepts(f64::NAN, 1.0));
        assert!(t.accepts(f64::INFINITY, f64::INFINITY));
        assert!(!t.accepts(f64::INFINITY, f64::MAX));
        assert!(!FloatTolerance::EXACT.accepts(1.0, 1.0 + 1e-12));
    }
}
