//! How close a device's result of an inexact function must be to the exact value: the bounds
//! the WGSL specification states for `f32` (the table in the IR's module doc), as numbers.
//!
//! A bound in ULPs is measured at the exact result, where one ULP is the distance between two
//! adjacent `f32`s of that magnitude. An "inherited" bound is the error of evaluating the
//! expression the specification names with every operation within its own bound: the errors
//! of the operands carried through, plus the operation's own error at the largest magnitude
//! the result can have. The exact value is computed in `f64`, whose error is far below any
//! `f32` bound.

use super::ir::UnaryOp;

/// A call of an inexact function, with its operands.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum MathCall {
    /// `op(x)` for a unary function.
    Unary(UnaryOp, f32),
    /// `pow(x, y)`.
    Pow(f32, f32),
    /// `fma(a, b, c) = a * b + c`.
    Fma(f32, f32, f32),
    /// `atan2(y, x)`.
    Atan2(f32, f32),
}

impl MathCall {
    /// The exact value, to `f64` precision.
    pub fn exact(self) -> f64 {
        match self {
            MathCall::Unary(op, x) => {
                let x = x as f64;
                match op {
                    UnaryOp::Abs => x.abs(),
                    UnaryOp::Floor => x.floor(),
                    UnaryOp::Ceil => x.ceil(),
                    UnaryOp::Trunc => x.trunc(),
                    UnaryOp::Round => x.round_ties_even(),
                    UnaryOp::Sqrt => libm::sqrt(x),
                    UnaryOp::InverseSqrt => 1.0 / libm::sqrt(x),
                    UnaryOp::Exp => libm::exp(x),
                    UnaryOp::Log => libm::log(x),
                    UnaryOp::Tanh => libm::tanh(x),
                    UnaryOp::Sin => libm::sin(x),
                    UnaryOp::Cos => libm::cos(x),
                    UnaryOp::Tan => libm::tan(x),
                    UnaryOp::Sinh => libm::sinh(x),
                    UnaryOp::Cosh => libm::cosh(x),
                    UnaryOp::Asin => libm::asin(x),
                    UnaryOp::Acos => libm::acos(x),
                    UnaryOp::Atan => libm::atan(x),
                    UnaryOp::Asinh => libm::asinh(x),
                    UnaryOp::Acosh => libm::acosh(x),
                    UnaryOp::Atanh => libm::atanh(x),
                }
            }
            MathCall::Pow(x, y) => libm::pow(x as f64, y as f64),
            // The product of two f32s is exact in f64; the sum rounds once, far below f32's ULP.
            MathCall::Fma(a, b, c) => a as f64 * b as f64 + c as f64,
            MathCall::Atan2(y, x) => libm::atan2(y as f64, x as f64),
        }
    }

    /// The largest distance a device's result may have from [`exact`](Self::exact); `None`
    /// where the specification bounds nothing: outside the function's domain, `sin`/`cos`
    /// outside [-π, π], or where the value or an inherited bound leaves `f32`'s range.
    pub fn max_error(self) -> Option<f64> {
        let bound = match self {
            MathCall::Unary(op, x) => unary(op, x as f64)?,
            MathCall::Pow(x, y) => {
                if x <= 0.0 {
                    return None;
                }
                exp2(Bound::exact(y as f64).mul(log2(x as f64)?)?)?
            }
            MathCall::Fma(a, b, c) => Bound::exact(a as f64)
                .mul(Bound::exact(b as f64))?
                .add(Bound::exact(c as f64))?,
            MathCall::Atan2(y, x) => atan2(Bound::exact(y as f64), Bound::exact(x as f64))?,
        };
        (bound.value.abs() + bound.error <= f32::MAX as f64).then_some(bound.error)
    }

    /// Whether a device may return `got`: within [`max_error`](Self::max_error) of the exact
    /// value, or anything where nothing is bounded.
    pub fn accepts(self, got: f32) -> bool {
        match self.max_error() {
            Some(error) => (got as f64 - self.exact()).abs() <= error,
            None => true,
        }
    }
}

/// The distance between adjacent `f32`s at magnitude `x` (the smallest subnormal below the
/// normal range).
pub fn ulp(x: f64) -> f64 {
    let a = x.abs();
    if a < f32::MIN_POSITIVE as f64 {
        return f64::from_bits((1023 - 149) << 52);
    }
    // a = m * 2^e with m in [0.5, 1): the f32 spacing there is 2^(e - 1 - 23).
    let (_, e) = libm::frexp(a);
    libm::ldexp(1.0, e - 24)
}

/// WGSL's bound for `x / y` holds for `|y|` in this range.
const DIVISOR_MIN: f64 = 1.0 / (1u128 << 126) as f64;
const DIVISOR_MAX: f64 = (1u128 << 126) as f64;

/// A value and a bound on the error of computing it.
#[derive(Clone, Copy, Debug)]
struct Bound {
    value: f64,
    error: f64,
}

impl Bound {
    fn exact(value: f64) -> Self {
        Self { value, error: 0.0 }
    }

    /// `self` with `ulps` ULPs of an operation's own error, at the largest magnitude it can
    /// have; `None` once anything is not finite.
    fn plus_ulps(self, ulps: f64) -> Option<Self> {
        let error = self.error + ulps * ulp(self.value.abs() + self.error);
        (self.value.is_finite() && error.is_finite()).then_some(Self {
            value: self.value,
            error,
        })
    }

    /// `self * other`, correctly rounded.
    fn mul(self, other: Bound) -> Option<Self> {
        Self {
            value: self.value * other.value,
            error: self.value.abs() * other.error
                + other.value.abs() * self.error
                + self.error * other.error,
        }
        .plus_ulps(0.5)
    }

    /// `self + other`, correctly rounded.
    fn add(self, other: Bound) -> Option<Self> {
        Self {
            value: self.value + other.value,
            error: self.error + other.error,
        }
        .plus_ulps(0.5)
    }

    /// `self - other`, correctly rounded.
    fn sub(self, other: Bound) -> Option<Self> {
        self.add(Bound {
            value: -other.value,
            error: other.error,
        })
    }

    /// `self * 0.5`: exact.
    fn half(self) -> Self {
        Self {
            value: self.value * 0.5,
            error: self.error * 0.5,
        }
    }

    /// `self / other`: 2.5 ULP for `|other|` in [2^-126, 2^126].
    fn div(self, other: Bound) -> Option<Self> {
        let low = other.value.abs() - other.error;
        if low < DIVISOR_MIN || other.value.abs() + other.error > DIVISOR_MAX {
            return None;
        }
        let value = self.value / other.value;
        Self {
            value,
            error: (self.error + value.abs() * other.error) / low,
        }
        .plus_ulps(2.5)
    }
}

/// `base^x` for `x` with an error: the operand's error carried through, plus `3 + 2|x|` ULP
/// (WGSL's bound for `exp` and `exp2`).
fn power_of(base: f64, x: Bound) -> Option<Bound> {
    let value = libm::pow(base, x.value);
    let carried = libm::pow(base, x.value + x.error) - value;
    Bound {
        value,
        error: carried,
    }
    .plus_ulps(3.0 + 2.0 * (x.value.abs() + x.error))
}

fn exp(x: Bound) -> Option<Bound> {
    power_of(std::f64::consts::E, x)
}

fn exp2(x: Bound) -> Option<Bound> {
    power_of(2.0, x)
}

/// `log(x)` or `log2(x)` of an exact `x > 0`: absolute error below 2^-21 in [0.5, 2], 3 ULP
/// elsewhere.
fn logarithm(x: f64, value: f64) -> Option<Bound> {
    if (0.5..=2.0).contains(&x) {
        Some(Bound {
            value,
            error: 1.0 / (1u32 << 21) as f64,
        })
    } else {
        Bound::exact(value).plus_ulps(3.0)
    }
}

fn log2(x: f64) -> Option<Bound> {
    logarithm(x, libm::log2(x))
}

fn unary(op: UnaryOp, x: f64) -> Option<Bound> {
    match op {
        UnaryOp::Abs | UnaryOp::Floor | UnaryOp::Ceil | UnaryOp::Trunc | UnaryOp::Round => {
            Some(Bound::exact(0.0))
        }
        UnaryOp::Sin | UnaryOp::Cos => (x.abs() <= std::f64::consts::PI).then_some(Bound {
            value: 0.0,
            error: 1.0 / (1u32 << 11) as f64,
        }),
        UnaryOp::Exp => exp(Bound::exact(x)),
        UnaryOp::Log => (x > 0.0).then(|| logarithm(x, libm::log(x)))?,
        UnaryOp::InverseSqrt => (x > 0.0).then(|| inverse_sqrt(x))?,
        UnaryOp::Sqrt if x == 0.0 => Some(Bound::exact(0.0)),
        UnaryOp::Sqrt => (x > 0.0).then(|| Bound::exact(1.0).div(inverse_sqrt(x)?))?,
        UnaryOp::Tanh => sinh(x)?.div(cosh(x)?),
        UnaryOp::Sinh => sinh(x),
        UnaryOp::Cosh => cosh(x),
        UnaryOp::Tan => sin_cos(libm::sin(x), x)?.div(sin_cos(libm::cos(x), x)?),
        UnaryOp::Atan => Bound::exact(libm::atan(x)).plus_ulps(4096.0),
        UnaryOp::Asin if x.abs() <= 1.0 => atan2(Bound::exact(x), sqrt(one_minus_square(x)?)?),
        UnaryOp::Acos if x.abs() <= 1.0 => atan2(sqrt(one_minus_square(x)?)?, Bound::exact(x)),
        UnaryOp::Asin | UnaryOp::Acos => None,
        UnaryOp::Asinh => {
            let root = sqrt(square(x)?.add(Bound::exact(1.0))?)?;
            log(Bound::exact(x).add(root)?)
        }
        UnaryOp::Acosh if x >= 1.0 => {
            let root = sqrt(square(x)?.sub(Bound::exact(1.0))?)?;
            log(Bound::exact(x).add(root)?)
        }
        UnaryOp::Acosh => None,
        UnaryOp::Atanh if x.abs() < 1.0 => {
            let (one, x) = (Bound::exact(1.0), Bound::exact(x));
            Some(log(one.add(x)?.div(one.sub(x)?)?)?.half())
        }
        UnaryOp::Atanh => None,
    }
}

/// `sin(x)` or `cos(x)` (`value`) of an exact `x`: absolute error 2^-11 for `x` in [-π, π].
fn sin_cos(value: f64, x: f64) -> Option<Bound> {
    (x.abs() <= std::f64::consts::PI).then_some(Bound {
        value,
        error: 1.0 / (1u32 << 11) as f64,
    })
}

/// `sinh(x)`, inherited from `(exp(x) - exp(-x)) * 0.5`.
fn sinh(x: f64) -> Option<Bound> {
    Some(exp(Bound::exact(x))?.sub(exp(Bound::exact(-x))?)?.half())
}

/// `cosh(x)`, inherited from `(exp(x) + exp(-x)) * 0.5`.
fn cosh(x: f64) -> Option<Bound> {
    Some(exp(Bound::exact(x))?.add(exp(Bound::exact(-x))?)?.half())
}

/// `x * x` of an exact `x`, correctly rounded.
fn square(x: f64) -> Option<Bound> {
    Bound::exact(x).mul(Bound::exact(x))
}

/// `1 - x * x` of an exact `x`.
fn one_minus_square(x: f64) -> Option<Bound> {
    Bound::exact(1.0).sub(square(x)?)
}

/// `sqrt(v)` of a value with an error, inherited from `1.0 / inverseSqrt(v)`: the operand's
/// error carried through `inverseSqrt` (at the smallest operand it can be), its own 2 ULP,
/// then the division's. `None` where the operand may reach zero or below (an exact zero is
/// exact).
fn sqrt(v: Bound) -> Option<Bound> {
    if v.value == 0.0 && v.error == 0.0 {
        return Some(Bound::exact(0.0));
    }
    let low = v.value - v.error;
    if low <= 0.0 {
        return None;
    }
    let value = 1.0 / libm::sqrt(v.value);
    let inverse = Bound {
        value,
        error: 1.0 / libm::sqrt(low) - value,
    }
    .plus_ulps(2.0)?;
    Bound::exact(1.0).div(inverse)
}

/// `log(v)` of a value with an error: the error carried (largest toward the smaller operand,
/// `log` being concave) plus the function's own bound, the largest it has over the operand's
/// range. `None` where the operand may reach zero or below.
fn log(v: Bound) -> Option<Bound> {
    let (low, high) = (v.value - v.error, v.value + v.error);
    if low <= 0.0 {
        return None;
    }
    let own = [low, v.value, high]
        .into_iter()
        .map(|at| logarithm(at, libm::log(at)).map(|b| b.error))
        .try_fold(0.0f64, |worst, e| Some(worst.max(e?)))?;
    let value = libm::log(v.value);
    Some(Bound {
        value,
        error: value - libm::log(low) + own,
    })
}

/// `atan2(y, x)` of values with errors: 4096 ULP at the result, plus how far the angle can
/// move while the point stays within its operands' errors: `asin(d / r)` for a point at
/// distance `r` from the origin and a box of half-diagonal `d`. `None` where the box reaches
/// the origin, or crosses the negative x axis, where the angle jumps from π to -π.
fn atan2(y: Bound, x: Bound) -> Option<Bound> {
    let r = libm::hypot(x.value, y.value);
    let d = libm::hypot(x.error, y.error);
    let crosses_cut = x.value - x.error < 0.0 && y.value.abs() <= y.error;
    if d >= r || crosses_cut || (x.value == 0.0 && y.value == 0.0) {
        return None;
    }
    Bound {
        value: libm::atan2(y.value, x.value),
        error: libm::asin(d / r),
    }
    .plus_ulps(4096.0)
}

/// `inverseSqrt(x)`, 2 ULP.
fn inverse_sqrt(x: f64) -> Option<Bound> {
    Bound::exact(1.0 / libm::sqrt(x)).plus_ulps(2.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ulps_at(x: f64, n: f64) -> f64 {
        n * ulp(x)
    }

    #[test]
    fn ulps_follow_the_f32_spacing() {
        assert_eq!(ulp(1.0), f32::EPSILON as f64);
        assert_eq!(ulp(1.5), f32::EPSILON as f64);
        assert_eq!(ulp(2.0), 2.0 * f32::EPSILON as f64);
        assert_eq!(ulp(-0.75), f32::EPSILON as f64 / 2.0);
        assert_eq!(ulp(0.0), f64::from_bits((1023 - 149) << 52));
        assert_eq!(ulp(0.0), 1.401298464324817e-45);
    }

    #[test]
    fn the_specified_bounds_are_what_the_table_says() {
        let exp2 = MathCall::Unary(UnaryOp::Exp, 2.0);
        let e2 = libm::exp(2.0);
        assert_eq!(exp2.max_error(), Some(ulps_at(e2, 7.0)));
        let log = MathCall::Unary(UnaryOp::Log, 1.5);
        assert_eq!(log.max_error(), Some(1.0 / (1u32 << 21) as f64));
        let log = MathCall::Unary(UnaryOp::Log, 8.0);
        assert_eq!(log.max_error(), Some(ulps_at(libm::log(8.0), 3.0)));
        let rsqrt = MathCall::Unary(UnaryOp::InverseSqrt, 4.0);
        assert_eq!(rsqrt.max_error(), Some(ulps_at(0.5, 2.0)));
        for op in [UnaryOp::Abs, UnaryOp::Floor, UnaryOp::Ceil] {
            assert_eq!(MathCall::Unary(op, -2.5).max_error(), Some(0.0));
        }
        assert_eq!(
            MathCall::Unary(UnaryOp::Sin, 3.0).max_error(),
            Some(1.0 / 2048.0)
        );
    }

    #[test]
    fn outside_a_domain_nothing_is_bounded() {
        assert_eq!(MathCall::Unary(UnaryOp::Sin, 4.0).max_error(), None);
        assert_eq!(MathCall::Unary(UnaryOp::Log, 0.0).max_error(), None);
        assert_eq!(MathCall::Unary(UnaryOp::Sqrt, -1.0).max_error(), None);
        assert_eq!(MathCall::Pow(-2.0, 2.0).max_error(), None);
        // e^100 is past f32's range; so is tanh's inherited bound at 100.
        assert_eq!(MathCall::Unary(UnaryOp::Exp, 100.0).max_error(), None);
        assert_eq!(MathCall::Unary(UnaryOp::Tanh, 100.0).max_error(), None);
        assert!(MathCall::Unary(UnaryOp::Cos, 10.0).accepts(7.0));
    }

    #[test]
    fn inherited_bounds_are_a_few_ulps_where_nothing_cancels() {
        // sqrt from 1 / inverseSqrt: 2 ULP carried, 2.5 ULP of the division, at most 9 ULP.
        let sqrt = MathCall::Unary(UnaryOp::Sqrt, 2.0).max_error().unwrap();
        assert!(sqrt > ulps_at(2f64.sqrt(), 4.0) && sqrt < ulps_at(2f64.sqrt(), 9.0));
        // fma: the product's rounding and the sum's.
        let fma = MathCall::Fma(3.0, 5.0, 1.0).max_error().unwrap();
        assert_eq!(fma, 0.5 * ulp(15.0) + 0.5 * ulp(16.0 + 0.5 * ulp(15.0)));
        // tanh near zero is an absolute bound: exp's error does not shrink with x.
        let tanh = MathCall::Unary(UnaryOp::Tanh, 1e-3).max_error().unwrap();
        assert!(tanh > 1e-7 && tanh < 1e-5, "{tanh}");
        // pow(2, 10): exp2(10 * log2(2)), log2's 2^-21 times 10, carried through exp2.
        let pow = MathCall::Pow(2.0, 10.0).max_error().unwrap();
        assert!(
            pow > 1024.0 * 10.0 * 2f64.powi(-21) * 0.69 && pow < 0.1,
            "{pow}"
        );
    }

    #[test]
    fn the_inverse_and_hyperbolic_functions_and_atan2_are_bounded_in_their_domains() {
        use UnaryOp::*;
        let inside = [
            (Tan, 1.0),
            (Sinh, -3.0),
            (Cosh, 2.0),
            (Asin, 0.5),
            (Acos, -0.5),
            (Atan, 10.0),
            (Asinh, -5.0),
            (Acosh, 3.0),
            (Atanh, 0.25),
        ];
        for (op, x) in inside {
            let call = MathCall::Unary(op, x);
            let bound = call
                .max_error()
                .unwrap_or_else(|| panic!("{op:?}({x}) is bounded"));
            // A correctly rounded result is accepted; one far off is not.
            assert!(call.accepts(call.exact() as f32), "{op:?}({x})");
            assert!(
                !call.accepts((call.exact() + 2.0 * bound + 1.0) as f32),
                "{op:?}({x})"
            );
        }
        // atan's and atan2's own bound is 4096 ULP.
        let atan = MathCall::Unary(Atan, 10.0).max_error().unwrap();
        assert_eq!(atan, ulps_at(libm::atan(10.0), 4096.0));
        let atan2 = MathCall::Atan2(1.0, -1.0).max_error().unwrap();
        assert_eq!(atan2, ulps_at(libm::atan2(1.0, -1.0), 4096.0));
        // Outside a domain, or where the inherited expression leaves it, nothing is bounded.
        for (op, x) in [
            (Asin, 1.5),
            (Acos, -2.0),
            (Acosh, 0.5),
            (Atanh, 1.0),
            (Tan, 4.0),
        ] {
            assert_eq!(MathCall::Unary(op, x).max_error(), None, "{op:?}({x})");
        }
        assert_eq!(MathCall::Atan2(0.0, 0.0).max_error(), None);
    }

    #[test]
    fn accepts_the_reference_and_refuses_what_is_too_far() {
        let call = MathCall::Unary(UnaryOp::Exp, 1.0);
        let e = std::f32::consts::E;
        assert!(call.accepts(e));
        let five_ulps = f32::from_bits(e.to_bits() + 5);
        assert!(call.accepts(five_ulps));
        assert!(!call.accepts(f32::from_bits(e.to_bits() + 6)));
        // fma rounded twice is acceptable, and so is fused.
        let (a, b, c) = (1.0 + f32::EPSILON, 1.0 - f32::EPSILON, -1.0);
        let fma = MathCall::Fma(a, b, c);
        assert!(fma.accepts(a * b + c));
        assert!(fma.accepts(libm::fmaf(a, b, c)));
        assert!(!fma.accepts(1e-3));
    }
}
