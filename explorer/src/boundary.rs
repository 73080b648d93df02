//! Boundary values: every number the workload draws into a call argument is, one time in four,
//! drawn from the classes where arithmetic goes wrong instead of from its usual distribution:
//! 0, 1, a power of two or one of its neighbours, the argument's largest value, and values past
//! it chosen so that a sum or product the call computes overflows.
//!
//! The choice comes from a random stream of its own ([`Bounds`], seeded from the world's seed),
//! and the usual value is drawn from the workload's stream whether or not it is replaced, so a
//! seed's actions, slots and streams stay what they were without boundary values. A number's
//! class is a function of its value and its range ([`Class::of`]): the driver records it from
//! the argument it passes, never from how it was drawn.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use lockstep::kernel::MAX_WORKGROUP_INVOCATIONS;

use crate::view::View;
use crate::workload::{LaunchCount, MAX_WORKGROUPS};

/// The class of a number drawn from `0..=max`, or past `max`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Class {
    /// 0.
    Zero,
    /// 1.
    One,
    /// `2^k - 1`, for `k >= 2`.
    BelowPow2,
    /// `2^k`, for `k >= 1`.
    Pow2,
    /// `2^k + 1`, for `k >= 2`.
    AbovePow2,
    /// The range's largest value.
    Max,
    /// Past the range: a value whose sum or product in the call overflows, or that exceeds
    /// what the device serves.
    Overflow,
    /// Any other value.
    Ordinary,
}

impl Class {
    /// Every class, in the order reports print them.
    pub const ALL: [Class; 8] = [
        Class::Zero,
        Class::One,
        Class::BelowPow2,
        Class::Pow2,
        Class::AbovePow2,
        Class::Max,
        Class::Overflow,
        Class::Ordinary,
    ];

    /// The class of `value` in `0..=max` (past `max`: [`Class::Overflow`]). The first that
    /// applies wins: zero, one, max, overflow, then the powers of two.
    pub fn of(value: u64, max: u64) -> Class {
        match value {
            0 => Class::Zero,
            1 => Class::One,
            v if v == max => Class::Max,
            v if v > max => Class::Overflow,
            v if v.is_power_of_two() => Class::Pow2,
            v if (v + 1).is_power_of_two() => Class::BelowPow2,
            v if (v - 1).is_power_of_two() => Class::AbovePow2,
            _ => Class::Ordinary,
        }
    }

    /// The class's name, as coverage reports print it.
    pub fn name(self) -> &'static str {
        match self {
            Class::Zero => "zero",
            Class::One => "one",
            Class::BelowPow2 => "2^k-1",
            Class::Pow2 => "2^k",
            Class::AbovePow2 => "2^k+1",
            Class::Max => "max",
            Class::Overflow => "overflow",
            Class::Ordinary => "ordinary",
        }
    }
}

/// The boundary draws of one workload: a random stream apart from the workload's own, and
/// one each for workgroup counts and strided views (so that a seed's other boundary values
/// stayed what they were when those joined).
pub struct Bounds {
    rng: ChaCha8Rng,
    counts: ChaCha8Rng,
    views: ChaCha8Rng,
}

/// Counts past [`MAX_WORKGROUPS`] a workgroup count's axis is drawn from: one past, and the
/// type's largest.
const OVERFLOWING_COUNTS: [u64; 2] = [MAX_WORKGROUPS as u64 + 1, u32::MAX as u64];

/// Workgroup sizes every kernel must be refused for: an axis of zero, an x one past
/// [`MAX_WORKGROUP_INVOCATIONS`], axes each within it whose product is past it, products that
/// wrap to zero in `u32` (2^32), and one that wraps `u64`.
pub const REFUSED_WORKGROUP_SIZES: [[u32; 3]; 8] = [
    [0, 1, 1],
    [8, 0, 1],
    [8, 1, 0],
    [MAX_WORKGROUP_INVOCATIONS as u32 + 1, 1, 1],
    [32, 64, 1],
    [1 << 16, 1 << 16, 1],
    [1024, 1024, 4096],
    [u32::MAX; 3],
];

/// The invocations of a workgroup of `size`, saturating at `u64::MAX`.
pub fn invocations(size: [u32; 3]) -> u64 {
    let product = size.iter().map(|&d| u128::from(d)).product::<u128>();
    u64::try_from(product).unwrap_or(u64::MAX)
}

impl Bounds {
    /// The boundary stream of the world of `seed`.
    pub fn new(seed: u64) -> Self {
        Self {
            rng: ChaCha8Rng::seed_from_u64(seed ^ 0xb0da_4d5e_ed0f_b0d5),
            counts: ChaCha8Rng::seed_from_u64(seed ^ 0xc0c0_a7e5_0f0b_0d5e),
            views: ChaCha8Rng::seed_from_u64(seed ^ 0x5717_dedf_1e75_7717),
        }
    }

    /// One time in four, a launch's workgroup count of boundary values, static, or dynamic
    /// where `dynamic` allows it (half the time); else the count covering the destination.
    /// A dynamic count's x is, one time in four, any count instead (mostly an ordinary one,
    /// which static launches get from the covering count).
    pub fn launch_count(&mut self, dynamic: bool) -> LaunchCount {
        match self.workgroups() {
            None => LaunchCount::Covering,
            Some([x, y, z]) if dynamic && self.counts.random_bool(0.5) => {
                // Beside a zero x, y and z may repeat work: x stays.
                let x = match x != 0 && self.counts.random_ratio(1, 4) {
                    true => self.counts.random_range(1..=MAX_WORKGROUPS),
                    false => x,
                };
                LaunchCount::Dynamic([x, y, z])
            }
            Some(count) => LaunchCount::Static(count),
        }
    }

    /// One time in four, a workgroup count of boundary values (else `None`). The x axis takes
    /// any class of `0..=MAX_WORKGROUPS` or past it; y and z take 0, 1 or a value past the
    /// maximum, since more than one workgroup there would run x's elements again, racing;
    /// beside an x of 0, which launches nothing, they take any class. An x of the maximum
    /// comes with a y of 0: 65,535 workgroups of a plain formula cost the simulator under a
    /// millisecond, but a sharing formula's reach its barrier, every one of them.
    fn workgroups(&mut self) -> Option<[u32; 3]> {
        if !self.counts.random_ratio(1, 4) {
            return None;
        }
        let range = (0, u64::from(MAX_WORKGROUPS));
        let x = class_value(&mut self.counts, range, &OVERFLOWING_COUNTS);
        let other = |counts: &mut ChaCha8Rng| -> u64 {
            if x == 0 {
                class_value(counts, range, &OVERFLOWING_COUNTS)
            } else {
                [0, 1, 1, 1, OVERFLOWING_COUNTS[0], OVERFLOWING_COUNTS[1]]
                    [counts.random_range(0..6)]
            }
        };
        let (mut y, z) = (other(&mut self.counts), other(&mut self.counts));
        if x == u64::from(MAX_WORKGROUPS) {
            y = 0;
        }
        // Every value is at most `u32::MAX` (the overflowing ones included).
        Some([x, y, z].map(|v| v as u32))
    }

    /// A formula's workgroup size along x: one time in four a boundary value of 1 to
    /// [`MAX_WORKGROUP_INVOCATIONS`] or, as often, any value of it; else `usual`.
    pub fn workgroup_size(&mut self, usual: u32) -> u32 {
        let max = MAX_WORKGROUP_INVOCATIONS;
        if !self.hit() {
            return usual;
        }
        let size = match self.half() {
            true => self.boundary((1, max), &[]),
            false => self.rng.random_range(1..=max),
        };
        size as u32
    }

    /// One time in eight, a workgroup size every kernel must be refused for.
    pub fn refused_workgroup_size(&mut self) -> Option<[u32; 3]> {
        let sizes = &REFUSED_WORKGROUP_SIZES;
        (self.rng.random_ratio(1, 8)).then(|| sizes[self.rng.random_range(0..sizes.len())])
    }

    /// Half the time, a strided view for a tensor read to take beside its group's dense
    /// descriptors ([`View::draw`]).
    pub(crate) fn view(&mut self) -> Option<View> {
        self.views
            .random_bool(0.5)
            .then(|| View::draw(&mut self.views))
    }

    /// Whether this draw takes a boundary value (one time in four).
    pub fn hit(&mut self) -> bool {
        self.rng.random_ratio(1, 4)
    }

    /// A fair coin of the boundary stream.
    pub fn half(&mut self) -> bool {
        self.rng.random_bool(0.5)
    }

    /// `ordinary`, or one time in four a boundary value of `0..=max` (`min` and above), or one
    /// of `overflow` (values past `max`; none where the call cannot be given one).
    pub fn number(&mut self, ordinary: u64, (min, max): (u64, u64), overflow: &[u64]) -> u64 {
        if !self.hit() {
            return ordinary;
        }
        self.boundary((min, max), overflow)
    }

    /// A boundary value of `min..=max`, or one of `overflow`: each class that has a value in
    /// the range (or an overflow given) equally likely, then a value of the class.
    pub fn boundary(&mut self, range: (u64, u64), overflow: &[u64]) -> u64 {
        class_value(&mut self.rng, range, overflow)
    }
}

/// [`Bounds::boundary`], drawn from `rng`.
pub(crate) fn class_value(rng: &mut ChaCha8Rng, (min, max): (u64, u64), overflow: &[u64]) -> u64 {
    debug_assert!(min <= max && overflow.iter().all(|&v| v > max));
    // A power of two 2^k (k >= 1), or its neighbour (k >= 2, so that 3 is 2^2 - 1 only),
    // inside the range.
    let near_pow2 = |rng: &mut ChaCha8Rng, below: u64, above: u64| -> Option<u64> {
        let k_min = if below + above > 0 { 2 } else { 1 };
        let values: Vec<u64> = (k_min..64)
            .map(|k| (1u64 << k) - below + above)
            .filter(|&v| v >= min && v <= max)
            .collect();
        (!values.is_empty()).then(|| values[rng.random_range(0..values.len())])
    };
    let mut candidates: Vec<u64> = Vec::with_capacity(7);
    for class in Class::ALL {
        let value = match class {
            Class::Zero if min == 0 => Some(0),
            Class::One if min <= 1 && max >= 1 => Some(1),
            Class::BelowPow2 => near_pow2(rng, 1, 0),
            Class::Pow2 => near_pow2(rng, 0, 0),
            Class::AbovePow2 => near_pow2(rng, 0, 1),
            Class::Max => Some(max),
            Class::Overflow if !overflow.is_empty() => {
                Some(overflow[rng.random_range(0..overflow.len())])
            }
            _ => None,
        };
        candidates.extend(value);
    }
    candidates[rng.random_range(0..candidates.len())]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_classed_by_value_and_range() {
        let classes: Vec<Class> = [0, 1, 2, 3, 4, 5, 6, 24, 25, 17, 15, 16]
            .into_iter()
            .map(|v| Class::of(v, 24))
            .collect();
        use Class::*;
        assert_eq!(
            classes,
            [
                Zero, One, Pow2, BelowPow2, Pow2, AbovePow2, Ordinary, Max, Overflow, AbovePow2,
                BelowPow2, Pow2
            ]
        );
        assert_eq!(Class::of(u64::MAX, u64::MAX), Max);
    }

    #[test]
    fn every_class_of_a_range_is_drawn_and_each_draw_stays_in_its_class() {
        let mut bounds = Bounds::new(7);
        let mut seen = std::collections::BTreeSet::new();
        for _ in 0..2000 {
            let v = bounds.boundary((0, 1 << 16), &[u64::MAX]);
            let class = Class::of(v, 1 << 16);
            assert_ne!(class, Class::Ordinary, "{v} is no boundary value");
            assert!(v <= 1 << 16 || v == u64::MAX);
            seen.insert(class);
        }
        let expected: std::collections::BTreeSet<Class> = Class::ALL[..7].iter().copied().collect();
        assert_eq!(seen, expected);
        // A range from 1 draws neither zero nor, without overflow values, past its end.
        for _ in 0..500 {
            let v = bounds.boundary((1, 8), &[]);
            assert!((1..=8).contains(&v), "{v}");
        }
    }

    /// x takes every class; y and z repeat x's elements only beside an x of 0 (nothing runs);
    /// the largest x comes with a y of 0.
    #[test]
    fn workgroup_counts_take_every_class_and_never_repeat_work() {
        let mut bounds = Bounds::new(11);
        let max = u64::from(MAX_WORKGROUPS);
        let mut classes = std::collections::BTreeSet::new();
        let counts: Vec<[u32; 3]> = (0..4000).filter_map(|_| bounds.workgroups()).collect();
        assert!(
            (800..1200).contains(&counts.len()),
            "{} of 4000 drew a count",
            counts.len()
        );
        for [x, y, z] in counts {
            classes.insert(Class::of(x.into(), max));
            if x != 0 {
                assert!(
                    [0, 1].contains(&y.min(2)) || u64::from(y) > max,
                    "{x} {y} {z}"
                );
                assert!(
                    [0, 1].contains(&z.min(2)) || u64::from(z) > max,
                    "{x} {y} {z}"
                );
            }
            if u64::from(x) == max {
                assert_eq!(y, 0, "the largest x launches nothing");
            }
        }
        let drawn: std::collections::BTreeSet<Class> = Class::ALL[..7].iter().copied().collect();
        assert_eq!(classes, drawn);
    }

    #[test]
    fn workgroup_sizes_take_every_class_and_refused_ones_are_past_1024_or_zero() {
        let mut bounds = Bounds::new(5);
        let max = MAX_WORKGROUP_INVOCATIONS;
        let classes: std::collections::BTreeSet<Class> = (0..4000)
            .map(|_| bounds.workgroup_size(8))
            .map(|size| Class::of(size.into(), max))
            .collect();
        use Class::*;
        let valid = [One, BelowPow2, Pow2, AbovePow2, Max, Ordinary];
        assert_eq!(classes, valid.into_iter().collect());
        for size in REFUSED_WORKGROUP_SIZES {
            let class = Class::of(invocations(size), max);
            assert!([Zero, Overflow].contains(&class), "{size:?} is {class:?}");
        }
        assert_eq!(invocations([u32::MAX; 3]), u64::MAX);
        assert_eq!(invocations([1 << 16, 1 << 16, 1]), 1 << 32);
    }

    #[test]
    fn a_quarter_of_numbers_are_replaced_and_equal_seeds_draw_alike() {
        let draw = |seed| {
            let mut bounds = Bounds::new(seed);
            (0..400)
                .map(|_| bounds.number(12_345, (0, 1 << 20), &[]))
                .collect::<Vec<_>>()
        };
        let replaced = draw(3).iter().filter(|&&v| v != 12_345).count();
        assert!((60..140).contains(&replaced), "{replaced} of 400 replaced");
        assert_eq!(draw(3), draw(3));
        assert_ne!(draw(3), draw(4));
    }
}
