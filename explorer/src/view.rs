//! Strided views of a tensor: a shape and strides `read_tensor_async` is given beside a
//! group's dense descriptors (transposed, broadcast, sliced, of rank 0, or overflowing), and
//! what the read must give for it — refused at the call, or the tensor's elements gathered
//! dense. The gather here is written apart from the runtime's: it walks each output element's
//! row-major index, where the runtime steps a multi-index.

use rand::Rng;
use rand::seq::SliceRandom;
use rand_chacha::ChaCha8Rng;

use crate::boundary::class_value;
use crate::driver::elems;
use crate::workload::MAX_TENSORS;

/// The largest dimension of a view, but for dimensions drawn to overflow.
pub const MAX_VIEW_DIM: usize = 8;
/// The largest stride of a view, but for strides drawn to overflow: past every element of a
/// group's largest tensor (24^3).
pub const MAX_VIEW_STRIDE: usize = 1 << 14;
/// Dimensions past [`MAX_VIEW_DIM`], whose dense bytes pass `isize::MAX`: refused at the call
/// whatever the strides, never gathered (a broadcast of fewer elements, which a host could
/// hold, would cost the run gigabytes).
pub const OVERFLOWING_VIEW_DIMS: [u64; 2] = [1 << 61, u64::MAX];
/// Strides past [`MAX_VIEW_STRIDE`] whose extent overflows `usize` with any dimension of two
/// or more.
pub const OVERFLOWING_STRIDES: [u64; 2] = [u64::MAX / 2 + 1, u64::MAX];

/// A strided view of tensor `index` (modulo the group's length) of a packed group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct View {
    /// Which tensor of the group, modulo its length.
    pub index: usize,
    /// Elements per dimension, outermost first.
    pub shape: Vec<usize>,
    /// Element strides per dimension, of the same rank.
    pub strides: Vec<usize>,
}

/// How a read of a view must be refused at the call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ViewRefusal {
    /// `IoError::InvalidLayout`: its extent, or its dense size, overflows (or passes
    /// `isize::MAX`, for the dense size).
    Layout,
    /// `IoError::OutOfRange`: its extent runs past the tensor's bytes.
    Range,
}

impl View {
    /// Draws a view from `rng`: rank 1 to 3 (0 one time in eight), dimensions 1 to 6, and the
    /// strides of a dense layout of the dimensions in a random order (a transpose); each
    /// dimension and stride one time in four a boundary value instead, overflowing ones
    /// included.
    pub fn draw(rng: &mut ChaCha8Rng) -> View {
        let rank = match rng.random_ratio(1, 8) {
            true => 0,
            false => rng.random_range(1..=3),
        };
        let shape: Vec<usize> = (0..rank)
            .map(|_| {
                let usual = rng.random_range(1..=6);
                number(rng, usual, MAX_VIEW_DIM, &OVERFLOWING_VIEW_DIMS)
            })
            .collect();
        let mut order: Vec<usize> = (0..rank).collect();
        order.shuffle(rng);
        let mut dense = vec![0; rank];
        let mut step = 1usize;
        for &dim in order.iter().rev() {
            dense[dim] = step;
            step = step.saturating_mul(shape[dim]);
        }
        let strides = (dense.into_iter())
            .map(|usual| number(rng, usual, MAX_VIEW_STRIDE, &OVERFLOWING_STRIDES))
            .collect();
        View {
            index: rng.random_range(0..MAX_TENSORS),
            shape,
            strides,
        }
    }

    /// How a read of the view of a tensor of `bytes` bytes must be refused, if it must: its
    /// extent (to the end of its last element) and dense size computed in `u128`, checked in
    /// the runtime's order. A view with a dimension of zero reads nothing, whatever the rest.
    pub fn refusal(&self, bytes: u64) -> Option<ViewRefusal> {
        if self.shape.contains(&0) {
            return None;
        }
        let last = (self.shape.iter().zip(&self.strides)).try_fold(0u128, |acc, (&d, &s)| {
            acc.checked_add((d as u128 - 1).checked_mul(s as u128)?)
        });
        let extent = last
            .and_then(|last| (last + 1).checked_mul(4))
            .filter(|&extent| extent <= usize::MAX as u128);
        let dense = elems(&self.shape)
            .and_then(|elems| elems.checked_mul(4))
            .filter(|&dense| dense <= isize::MAX as usize);
        match (extent, dense) {
            (Some(extent), Some(_)) if extent <= u128::from(bytes) => None,
            (Some(_), Some(_)) => Some(ViewRefusal::Range),
            _ => Some(ViewRefusal::Layout),
        }
    }

    /// The view's elements of a tensor holding `values`, dense in row-major order: element
    /// `i`'s index in each dimension, innermost first, times that dimension's stride. Only
    /// for a view [`refusal`](Self::refusal) accepts.
    pub fn gather(&self, values: &[u32]) -> Vec<u32> {
        let count = elems(&self.shape).expect("an accepted view's size fits");
        (0..count)
            .map(|i| {
                let (mut rest, mut at) = (i, 0);
                for (&d, &s) in self.shape.iter().zip(&self.strides).rev() {
                    at += rest % d * s;
                    rest /= d;
                }
                values[at]
            })
            .collect()
    }
}

/// `usual`, or one time in four a boundary value of `0..=max` or one of `overflow`.
fn number(rng: &mut ChaCha8Rng, usual: usize, max: usize, overflow: &[u64]) -> usize {
    match rng.random_ratio(1, 4) {
        true => class_value(rng, (0, max as u64), overflow) as usize,
        false => usual,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    fn view(shape: &[usize], strides: &[usize]) -> View {
        View {
            index: 0,
            shape: shape.to_vec(),
            strides: strides.to_vec(),
        }
    }

    #[test]
    fn views_gather_transposed_broadcast_and_sliced_elements() {
        let values: Vec<u32> = (10..22).collect();
        assert_eq!(
            view(&[2, 3], &[1, 2]).gather(&values),
            [10, 12, 14, 11, 13, 15]
        );
        assert_eq!(view(&[2, 2], &[0, 5]).gather(&values), [10, 15, 10, 15]);
        assert_eq!(view(&[], &[]).gather(&values), [10]);
        assert_eq!(view(&[3, 0], &[7, 1]).gather(&values), Vec::<u32>::new());
    }

    #[test]
    fn a_view_is_refused_for_its_layout_before_its_range() {
        use ViewRefusal::{Layout, Range};
        // 12 elements: the last at index 11 fits, 12 runs past.
        assert_eq!(view(&[4, 3], &[3, 1]).refusal(48), None);
        assert_eq!(view(&[2, 2], &[6, 6]).refusal(48), Some(Range));
        assert_eq!(view(&[], &[]).refusal(0), Some(Range));
        // An extent that overflows, a dense size past isize::MAX of a broadcast.
        assert_eq!(view(&[2], &[usize::MAX]).refusal(48), Some(Layout));
        assert_eq!(view(&[1 << 61], &[0]).refusal(48), Some(Layout));
        assert_eq!(view(&[usize::MAX, 2], &[0, 0]).refusal(48), Some(Layout));
        // Any zero dimension reads nothing, however the rest overflows.
        assert_eq!(view(&[usize::MAX, 0], &[usize::MAX, 1]).refusal(0), None);
    }

    #[test]
    fn drawn_views_are_mostly_dense_permutations_of_small_shapes() {
        let mut rng = ChaCha8Rng::seed_from_u64(9);
        let views: Vec<View> = (0..2000).map(|_| View::draw(&mut rng)).collect();
        let accepted = views
            .iter()
            .filter(|v| v.refusal(4 * 216).is_none())
            .count();
        assert!(
            (1000..1900).contains(&accepted),
            "{accepted} of 2000 accepted"
        );
        assert!(views.iter().any(|v| v.strides.contains(&0)));
        assert!(views.iter().any(|v| v.shape.is_empty()));
        assert!(views.iter().all(|v| v.shape.len() == v.strides.len()));
    }
}
