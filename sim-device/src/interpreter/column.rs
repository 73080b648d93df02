//! Columns: one expression's value on every lane of a batch, and the loops that compute them.
//!
//! Each operation is matched once per column, not once per lane: an operation and a type that
//! are constants in a loop turn `lockstep::kernel::semantics` (always inlined) into the
//! operation itself, and a loop over lanes that no branch has split is a plain loop over
//! slices, which the compiler vectorises. Results are those of `semantics` on each lane. (The
//! simulator's all-reduce folds its ranks' inputs with [`binary`] too.)

use lockstep::kernel::{BinOp, BitFn, CmpOp, ElemType, Scalar, UnaryOp, semantics};

/// One expression's value on every lane of a batch: scalars as the bits of their type (the IR
/// is typed, so a column has one), booleans as 1 (true) or 0. Inactive lanes hold leftovers.
/// Every column is as long as the batch has lanes.
pub(super) enum Column {
    Words(ElemType, Vec<u32>),
    Bools(Vec<u32>),
}

impl Column {
    pub(super) fn words(self) -> (ElemType, Vec<u32>) {
        match self {
            Column::Words(elem, bits) => (elem, bits),
            Column::Bools(_) => panic!("validated kernels use booleans only as conditions"),
        }
    }

    /// 1 on the lanes where the condition holds, 0 where it does not.
    pub(super) fn bools(self) -> Vec<u32> {
        match self {
            Column::Bools(v) => v,
            Column::Words(..) => panic!("validated kernels use only booleans as conditions"),
        }
    }

    /// A column of indices: `u32`.
    pub(super) fn indices(self) -> Vec<u32> {
        let (elem, bits) = self.words();
        assert_eq!(elem, ElemType::U32, "validated kernels index with u32");
        bits
    }
}

/// Buffers of finished columns, reused for new ones: evaluating an expression allocates only
/// while its deepest path has not been walked once in the launch.
///
/// **Invariant:** every buffer is `lanes` long, as long as the launch's largest batch.
pub(super) struct Spares {
    lanes: usize,
    free: Vec<Vec<u32>>,
}

impl Spares {
    pub fn new(lanes: usize) -> Self {
        Self {
            lanes,
            free: Vec::new(),
        }
    }

    /// A buffer for a new column, holding leftovers.
    pub fn take(&mut self) -> Vec<u32> {
        self.free.pop().unwrap_or_else(|| vec![0; self.lanes])
    }

    /// Takes back a buffer `take` gave.
    pub fn give(&mut self, bits: Vec<u32>) {
        debug_assert_eq!(bits.len(), self.lanes, "a column of another launch");
        self.free.push(bits);
    }
}

/// The number of lanes when `lanes` (ascending) are every lane below it, as they are until a
/// branch splits them.
#[inline]
pub(super) fn dense(lanes: &[u32]) -> Option<usize> {
    let n = lanes.len();
    (lanes.last().is_some_and(|&l| l as usize + 1 == n)).then_some(n)
}

/// Runs `$body` with `$l` bound to the index of every lane of `$lanes`, ascending. Dense lanes
/// get a loop of their own that reads no lane list (one loop choosing per lane cost a third of
/// a gather); a macro, so that both loops hold `$body` inlined (a closure called from two loops
/// was compiled as a call per lane).
macro_rules! each {
    ($lanes:expr, |$l:ident| $body:expr) => {
        match $crate::interpreter::column::dense($lanes) {
            Some(n) => (0..n).for_each(|$l: usize| $body),
            None => $lanes.iter().for_each(|&lane| {
                let $l = lane as usize;
                $body
            }),
        }
    };
}
pub(super) use each;

/// `out[l] = f(out[l])` on every lane of `lanes`.
#[inline(always)]
fn update(lanes: &[u32], out: &mut [u32], f: impl Fn(u32) -> u32) {
    match dense(lanes) {
        Some(n) => out[..n].iter_mut().for_each(|o| *o = f(*o)),
        None => lanes.iter().for_each(|&l| {
            let o = &mut out[l as usize];
            *o = f(*o);
        }),
    }
}

/// `out[l] = f(out[l], rhs[l])` on every lane of `lanes`.
#[inline(always)]
fn combine(lanes: &[u32], out: &mut [u32], rhs: &[u32], f: impl Fn(u32, u32) -> u32) {
    match dense(lanes) {
        Some(n) => out[..n]
            .iter_mut()
            .zip(&rhs[..n])
            .for_each(|(o, &r)| *o = f(*o, r)),
        None => lanes.iter().for_each(|&l| {
            let l = l as usize;
            out[l] = f(out[l], rhs[l]);
        }),
    }
}

/// The value every lane of `column` holds, if they hold one (`None` for no lanes).
pub(super) fn uniform(column: &[u32], lanes: &[u32]) -> Option<u32> {
    let first = column[*lanes.first()? as usize];
    let same = match dense(lanes) {
        Some(n) => column[..n].iter().all(|&v| v == first),
        None => lanes.iter().all(|&l| column[l as usize] == first),
    };
    same.then_some(first)
}

/// A `u32` divisor above 1, with its quotients and remainders by multiplications: Lemire,
/// Kaser and Kurz, "Faster Remainder by Direct Computation" (2019), exact for every `u32`
/// dividend with a 64-bit `m`.
struct Divisor {
    d: u32,
    /// `ceil(2^64 / d)`.
    m: u64,
}

impl Divisor {
    /// `None` for 0 and 1 (`m` would not fit; `semantics` takes care of them).
    fn new(d: u32) -> Option<Self> {
        (d > 1).then(|| Self {
            d,
            m: u64::MAX / d as u64 + 1,
        })
    }

    /// `a / d`.
    #[inline(always)]
    fn quotient(&self, a: u32) -> u32 {
        ((self.m as u128 * a as u128) >> 64) as u32
    }

    /// `a % d`.
    #[inline(always)]
    fn remainder(&self, a: u32) -> u32 {
        let low = self.m.wrapping_mul(a as u64);
        ((low as u128 * self.d as u128) >> 64) as u32
    }
}

/// Runs `$body` with `$name` bound to `$value` as a constant, one arm per listed variant (the
/// match is exhaustive, so a new variant must be listed): each arm is its own copy of the loop
/// in `$body`, with the variant folded in.
macro_rules! with_constant {
    ($value:expr, $name:ident: $ty:ty => $body:expr; $($variant:path),+ $(,)?) => {
        match $value {
            $($variant => {
                const $name: $ty = $variant;
                $body
            })+
        }
    };
}

/// Runs `$body` with `$elem`, a column's type, as the constant `$name`.
macro_rules! with_elem {
    ($elem:expr, $name:ident => $body:expr) => {
        with_constant!($elem, $name: ElemType => $body; ElemType::U32, ElemType::I32, ElemType::F32,
            ElemType::F16, ElemType::BF16)
    };
}

/// `op` on the lanes of `lhs` and `rhs`, columns of `elem`, into `lhs`.
pub(crate) fn binary(op: BinOp, elem: ElemType, lhs: &mut [u32], rhs: &[u32], lanes: &[u32]) {
    if let (ElemType::U32, BinOp::Div | BinOp::Rem) = (elem, op)
        && let Some(divisor) = uniform(rhs, lanes)
    {
        return binary_by(op, elem, lhs, divisor, lanes);
    }
    with_elem!(elem, ELEM => with_constant!(op, OP: BinOp => combine(lanes, lhs, rhs, |a, b| {
        semantics::binary(OP, Scalar::from_bits(ELEM, a), Scalar::from_bits(ELEM, b)).to_bits()
    });
        BinOp::Add, BinOp::Sub, BinOp::Mul, BinOp::Div, BinOp::Rem, BinOp::Min, BinOp::Max,
        BinOp::BitAnd, BinOp::BitOr, BinOp::BitXor, BinOp::Shl, BinOp::Shr, BinOp::Pow,
        BinOp::Atan2))
}

/// `op` on the lanes of `lhs`, a column of `elem`, and `rhs`, the same bits on every lane (a
/// literal, a parameter or a length), into `lhs`: the same as [`binary`] with a column of
/// `rhs`, without making that column.
pub(super) fn binary_by(op: BinOp, elem: ElemType, lhs: &mut [u32], rhs: u32, lanes: &[u32]) {
    if let (ElemType::U32, BinOp::Div | BinOp::Rem) = (elem, op)
        && let Some(divisor) = Divisor::new(rhs)
    {
        // A division is slow; by one divisor on every lane (`% len(src)`), it need not be.
        match op {
            BinOp::Div => update(lanes, lhs, |a| divisor.quotient(a)),
            _ => update(lanes, lhs, |a| divisor.remainder(a)),
        }
        return;
    }
    let b = Scalar::from_bits(elem, rhs);
    with_elem!(elem, ELEM => with_constant!(op, OP: BinOp => update(lanes, lhs, |a| {
        semantics::binary(OP, Scalar::from_bits(ELEM, a), b).to_bits()
    });
        BinOp::Add, BinOp::Sub, BinOp::Mul, BinOp::Div, BinOp::Rem, BinOp::Min, BinOp::Max,
        BinOp::BitAnd, BinOp::BitOr, BinOp::BitXor, BinOp::Shl, BinOp::Shr, BinOp::Pow,
        BinOp::Atan2))
}

/// `op` on the lanes of `lhs` and `rhs`, columns of `elem`, into `lhs` as booleans.
pub(super) fn compare(op: CmpOp, elem: ElemType, lhs: &mut [u32], rhs: &[u32], lanes: &[u32]) {
    with_elem!(elem, ELEM => with_constant!(op, OP: CmpOp => combine(lanes, lhs, rhs, |a, b| {
        semantics::compare(OP, Scalar::from_bits(ELEM, a), Scalar::from_bits(ELEM, b)) as u32
    });
        CmpOp::Eq, CmpOp::Ne, CmpOp::Lt, CmpOp::Le, CmpOp::Gt, CmpOp::Ge))
}

/// [`compare`] with `rhs` the same bits on every lane, without making a column of it.
pub(super) fn compare_by(op: CmpOp, elem: ElemType, lhs: &mut [u32], rhs: u32, lanes: &[u32]) {
    let b = Scalar::from_bits(elem, rhs);
    with_elem!(elem, ELEM => with_constant!(op, OP: CmpOp => update(lanes, lhs, |a| {
        semantics::compare(OP, Scalar::from_bits(ELEM, a), b) as u32
    });
        CmpOp::Eq, CmpOp::Ne, CmpOp::Lt, CmpOp::Le, CmpOp::Gt, CmpOp::Ge))
}

/// `op` on the lanes of `value`, a column of `elem`, in place.
pub(super) fn unary(op: UnaryOp, elem: ElemType, value: &mut [u32], lanes: &[u32]) {
    with_elem!(elem, ELEM => update(lanes, value, |v| {
        semantics::unary(op, Scalar::from_bits(ELEM, v)).to_bits()
    }))
}

/// `op` of the bits of the lanes of `value`, a column of integers of `elem`, in place.
pub(super) fn bits(op: BitFn, elem: ElemType, value: &mut [u32], lanes: &[u32]) {
    with_elem!(elem, ELEM => update(lanes, value, |v| {
        semantics::bits(op, Scalar::from_bits(ELEM, v)).to_bits()
    }))
}

/// The negation of the lanes of `value`, a column of `elem`, in place.
pub(super) fn negate(elem: ElemType, value: &mut [u32], lanes: &[u32]) {
    with_elem!(elem, ELEM => update(lanes, value, |v| {
        semantics::negate(Scalar::from_bits(ELEM, v)).to_bits()
    }))
}

/// The lanes of `value`, a column of `from`, cast to `to` in place.
pub(super) fn cast(from: ElemType, to: ElemType, value: &mut [u32], lanes: &[u32]) {
    with_elem!(from, FROM => with_elem!(to, TO => update(lanes, value, |v| {
        semantics::cast(Scalar::from_bits(FROM, v), TO).to_bits()
    })))
}

/// The logical negation of the lanes of `value`, booleans, in place.
pub(super) fn not(value: &mut [u32], lanes: &[u32]) {
    update(lanes, value, |v| v ^ 1);
}

/// `a * b + c` on the lanes of three float columns of `elem`, into `a`.
pub(super) fn fma(elem: ElemType, a: &mut [u32], b: &[u32], c: &[u32], lanes: &[u32]) {
    if elem == ElemType::F32 {
        let f = f32::from_bits;
        each!(lanes, |l| {
            a[l] = semantics::fma(f(a[l]), f(b[l]), f(c[l])).to_bits()
        });
        return;
    }
    let s = |bits| Scalar::from_bits(elem, bits);
    each!(lanes, |l| {
        a[l] = semantics::fma_scalar(s(a[l]), s(b[l]), s(c[l])).to_bits()
    });
}

/// On the lanes of `cond` that are 0, `if_false`'s bits into `if_true`.
pub(super) fn select(cond: &[u32], if_true: &mut [u32], if_false: &[u32], lanes: &[u32]) {
    each!(lanes, |l| {
        if cond[l] == 0 {
            if_true[l] = if_false[l];
        }
    });
}

/// `bits` on every lane of `lanes`.
pub(super) fn fill(out: &mut [u32], bits: u32, lanes: &[u32]) {
    match dense(lanes) {
        Some(n) => out[..n].fill(bits),
        None => lanes.iter().for_each(|&l| out[l as usize] = bits),
    }
}

/// The indices `at` holds on `lanes` as one range, when the lanes are dense and lane `l`
/// holds `at[0] + l` (a 1-D grid's global id does): an access by every lane is then one of
/// consecutive words.
pub(super) fn consecutive(at: &[u32], lanes: &[u32]) -> Option<std::ops::Range<usize>> {
    let n = dense(lanes)?;
    let first = at[0];
    // An inclusive range ends at `last` without stepping past it (`first..` would overflow
    // after yielding `u32::MAX`).
    let last = first.checked_add(u32::try_from(n - 1).ok()?)?;
    let runs = at[..n]
        .iter()
        .zip(first..=last)
        .all(|(&i, expected)| i == expected);
    runs.then(|| first as usize..first as usize + n)
}

/// `from`'s bits into `out` on every lane of `lanes`.
pub(super) fn copy(out: &mut [u32], from: &[u32], lanes: &[u32]) {
    match dense(lanes) {
        Some(n) => out[..n].copy_from_slice(&from[..n]),
        None => lanes
            .iter()
            .for_each(|&l| out[l as usize] = from[l as usize]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn consecutive_indices_are_one_range_only_on_dense_lanes_without_wrapping() {
        let dense: Vec<u32> = (0..4).collect();
        assert_eq!(consecutive(&[7, 8, 9, 10], &dense), Some(7..11));
        assert_eq!(consecutive(&[7, 8, 10, 11], &dense), None, "a gap");
        assert_eq!(consecutive(&[7, 7, 8, 9], &dense), None, "a repeat");
        assert_eq!(consecutive(&[7, 8, 9, 10], &[0, 1, 3]), None, "lanes split");
        let wraps = [u32::MAX - 1, u32::MAX, 0, 1];
        assert_eq!(consecutive(&wraps, &dense), None, "indices wrapping round");
        assert_eq!(
            consecutive(&[u32::MAX], &[0]),
            Some(u32::MAX as usize..1 << 32)
        );
        assert_eq!(consecutive(&[], &[]), None, "no lanes");
    }

    #[test]
    fn quotients_and_remainders_by_a_divisor_are_exact() {
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            // xorshift64: any spread of values will do.
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state as u32
        };
        let mut divisors: Vec<u32> = vec![2, 3, 5, 7, 10, 641, 1 << 16, (1 << 31) + 1, u32::MAX];
        divisors.extend((2..40).chain((0..32).map(|k| 1 << k)).filter(|&d| d > 1));
        divisors.extend((0..200).map(|_| next().max(2)));
        divisors.extend((0..200).map(|_| (next() >> 20).max(2)));
        for d in divisors {
            let divisor = Divisor::new(d).expect("above 1");
            let mut dividends = vec![0, 1, d - 1, d, d.wrapping_add(1), u32::MAX, u32::MAX - 1];
            dividends.extend((0..300).map(|_| next()));
            let multiples = (1..4).filter_map(|k: u32| k.checked_mul(d));
            dividends.extend(multiples.flat_map(|m| [m - 1, m]));
            for a in dividends {
                assert_eq!(divisor.quotient(a), a / d, "{a} / {d}");
                assert_eq!(divisor.remainder(a), a % d, "{a} % {d}");
            }
        }
        assert!(Divisor::new(0).is_none() && Divisor::new(1).is_none());
    }

    #[test]
    fn a_column_divided_by_one_value_matches_the_semantics() {
        let lanes: Vec<u32> = (0..6).collect();
        for (op, divisor) in [
            (BinOp::Div, 7),
            (BinOp::Rem, 7),
            (BinOp::Rem, 0),
            (BinOp::Div, 1),
        ] {
            let mut lhs = vec![0, 6, 7, 50, u32::MAX, 13];
            let expected: Vec<u32> = lhs
                .iter()
                .map(|&a| semantics::binary(op, Scalar::U32(a), Scalar::U32(divisor)).to_bits())
                .collect();
            binary(op, ElemType::U32, &mut lhs, &[divisor; 6], &lanes);
            assert_eq!(lhs, expected, "{op:?} by {divisor}");
        }
    }
}
