//! Tensor layouts: shapes, strides, the host-side gather that `read_tensor` performs and the
//! runs of consecutive elements that `write_tensor` copies. Strides count elements, not bytes.

use std::collections::TryReserveError;

use crate::bytes::Bytes;
use crate::error::IoError;
use crate::handle::Handle;

/// How a tensor was laid out in device memory.
#[derive(Clone, Debug)]
pub struct MemoryLayout {
    /// The handle holding the tensor, from its first element.
    pub memory: Handle,
    /// Element strides per dimension; the last dimension is the innermost.
    pub strides: Vec<usize>,
}

/// How the runtime may lay out a tensor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemoryLayoutStrategy {
    /// Dense row-major: strides are the products of the inner dimensions.
    Contiguous,
    /// The runtime's choice: rows (the last dimension) of tensors with two or more dimensions
    /// are padded ("pitched") to the device's widest load, so every row starts aligned.
    Optimized,
}

/// A tensor to lay out: its shape, element size and strategy.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemoryLayoutDescriptor {
    /// Whether rows may be padded.
    pub strategy: MemoryLayoutStrategy,
    /// Elements per dimension, outermost first.
    pub shape: Vec<usize>,
    /// Size of one element, in bytes (at least 1).
    pub elem_size: usize,
}

impl MemoryLayoutDescriptor {
    /// Describes a tensor of `shape` with `elem_size`-byte elements, laid out by `strategy`.
    pub fn new(strategy: MemoryLayoutStrategy, shape: Vec<usize>, elem_size: usize) -> Self {
        Self {
            strategy,
            shape,
            elem_size,
        }
    }
}

/// Strides chosen for a tensor and the bytes it occupies.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct TensorPlan {
    pub strides: Vec<usize>,
    /// `u64::MAX` when the padding overflows (the strides are then meaningless).
    pub bytes: u64,
}

fn gcd(a: usize, b: usize) -> usize {
    if b == 0 { a } else { gcd(b, a % b) }
}

/// Lays out `desc`: contiguous, or with rows pitched to a multiple of `row_alignment` bytes
/// (and of the element size, so strides stay whole elements).
pub(crate) fn plan(
    desc: &MemoryLayoutDescriptor,
    row_alignment: usize,
) -> Result<TensorPlan, IoError> {
    let shape = &desc.shape;
    let elem_size = desc.elem_size;
    let dense = contiguous_strides(shape);
    extent_bytes(shape, &dense, elem_size)?;
    let elems = num_elems(shape)?;
    let dense_bytes = elems
        .checked_mul(elem_size)
        .ok_or_else(|| invalid(format!("{elems} elements of {elem_size} bytes overflow")))?;
    let pitched = desc.strategy == MemoryLayoutStrategy::Optimized && shape.len() >= 2 && elems > 0;
    if !pitched {
        return Ok(TensorPlan {
            strides: dense,
            bytes: dense_bytes as u64,
        });
    }
    // Padding that overflows saturates: the plan then asks for `u64::MAX` bytes, which no
    // device serves, so the allocation is refused as out of memory before any stride is used.
    let n = shape.len();
    let unit = row_alignment / gcd(row_alignment, elem_size) * elem_size;
    let row_bytes = shape[n - 1] * elem_size;
    let pitch_elems = row_bytes
        .checked_next_multiple_of(unit)
        .unwrap_or(usize::MAX)
        / elem_size;
    let mut strides = vec![1; n];
    strides[n - 2] = pitch_elems;
    for i in (0..n - 2).rev() {
        strides[i] = strides[i + 1].saturating_mul(shape[i + 1]);
    }
    let bytes = shape[0]
        .checked_mul(strides[0])
        .and_then(|e| e.checked_mul(elem_size))
        .map_or(u64::MAX, |bytes| bytes as u64);
    Ok(TensorPlan { strides, bytes })
}

/// Copies dense row-major `src` into `dst` laid out with `strides` (the inverse of [`gather`]),
/// whose extent ([`extent_bytes`]) was checked: one copy per run of consecutive elements
/// ([`runs`]), not one per element (a pitched tensor's rows were a copy per element, 4% of the
/// explorer's instructions).
pub(crate) fn scatter(
    src: &[u8],
    dst: &mut [u8],
    shape: &[usize],
    strides: &[usize],
    elem_size: usize,
) {
    if src.is_empty() {
        return;
    }
    let runs = runs(shape, strides, elem_size);
    let run_bytes = runs.run_bytes as usize;
    for (run, &offset) in src.chunks_exact(run_bytes).zip(&runs.offsets_bytes) {
        let offset = offset as usize;
        dst[offset..offset + run_bytes].copy_from_slice(run);
    }
}

/// What to read back or write: a handle viewed as a tensor, from its first byte.
#[derive(Clone, Debug)]
pub struct CopyDescriptor {
    /// The handle holding the tensor; its first byte is the first element.
    pub handle: Handle,
    /// Elements per dimension, outermost first.
    pub shape: Vec<usize>,
    /// Element strides per dimension (same rank as `shape`); the last dimension is the innermost.
    pub strides: Vec<usize>,
    /// Size of one element, in bytes (at least 1).
    pub elem_size: usize,
}

impl CopyDescriptor {
    /// Views `handle` as a tensor of `shape` with `strides` and `elem_size`-byte elements.
    pub fn new(handle: Handle, shape: Vec<usize>, strides: Vec<usize>, elem_size: usize) -> Self {
        Self {
            handle,
            shape,
            strides,
            elem_size,
        }
    }
}

/// Row-major strides of a dense tensor of `shape`. A stride past `usize::MAX` saturates: such
/// a shape has more elements than fit in `usize`, which every call that takes it refuses (as
/// [`IoError::InvalidLayout`]), never panics on.
pub fn contiguous_strides(shape: &[usize]) -> Vec<usize> {
    let mut strides = vec![1usize; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        strides[i] = strides[i + 1].saturating_mul(shape[i + 1]);
    }
    strides
}

fn invalid(reason: String) -> IoError {
    IoError::InvalidLayout { reason }
}

/// Number of elements of `shape`, or an error if it overflows. A shape with a dimension of
/// zero has none, whatever its other dimensions (as [`extent_bytes`] spans none of it).
pub fn num_elems(shape: &[usize]) -> Result<usize, IoError> {
    if shape.contains(&0) {
        return Ok(0);
    }
    shape.iter().try_fold(1usize, |acc, &d| {
        acc.checked_mul(d).ok_or_else(|| {
            invalid(format!(
                "shape {shape:?} has more elements than fit in usize"
            ))
        })
    })
}

/// Bytes of a tensor of `shape` gathered dense, row-major, as a read returns it: refused
/// where they overflow `usize` or pass `isize::MAX`, more than any host allocation holds (a
/// broadcast view, of stride 0, spans few bytes of its handle however many elements it has).
pub(crate) fn dense_bytes(shape: &[usize], elem_size: usize) -> Result<usize, IoError> {
    let elems = num_elems(shape)?;
    elems
        .checked_mul(elem_size)
        .filter(|&bytes| bytes <= isize::MAX as usize)
        .ok_or_else(|| {
            invalid(format!(
                "shape {shape:?} of {elem_size}-byte elements is more bytes than any host allocation holds"
            ))
        })
}

/// Bytes from the tensor's first element to the end of its last one: how much of the handle a
/// strided tensor spans. Zero for an empty tensor.
pub fn extent_bytes(shape: &[usize], strides: &[usize], elem_size: usize) -> Result<u64, IoError> {
    if shape.len() != strides.len() {
        return Err(invalid(format!(
            "shape {shape:?} has {} dimensions but strides {strides:?} have {}",
            shape.len(),
            strides.len()
        )));
    }
    if elem_size == 0 {
        return Err(invalid("element size is zero".to_owned()));
    }
    if shape.contains(&0) {
        return Ok(0);
    }
    let overflow = || {
        invalid(format!(
            "shape {shape:?} with strides {strides:?} overflows"
        ))
    };
    let last_elem = shape
        .iter()
        .zip(strides)
        .try_fold(0usize, |acc, (&d, &s)| {
            (d - 1).checked_mul(s).and_then(|x| acc.checked_add(x))
        })
        .ok_or_else(overflow)?;
    let bytes = last_elem
        .checked_add(1)
        .and_then(|n| n.checked_mul(elem_size))
        .ok_or_else(overflow)?;
    Ok(bytes as u64)
}

/// Checks that no two elements of a tensor of `shape` laid out with `strides` share a place, so
/// that a write of it is unambiguous. Sufficient, not necessary: taken by increasing stride,
/// each dimension's stride must reach past everything the dimensions before it span (as dense,
/// pitched, transposed and sliced layouts do). Dimensions of one element never collide, and
/// an empty tensor has nothing to collide.
pub(crate) fn check_disjoint(shape: &[usize], strides: &[usize]) -> Result<(), IoError> {
    if shape.contains(&0) {
        return Ok(());
    }
    let mut dims: Vec<(usize, usize)> = strides
        .iter()
        .zip(shape)
        .filter(|&(_, &dim)| dim > 1)
        .map(|(&stride, &dim)| (stride, dim))
        .collect();
    dims.sort_unstable();
    // Elements the dimensions taken so far span, from the first to past the last.
    let mut span = 1usize;
    for (stride, dim) in dims {
        if stride < span {
            return Err(invalid(format!(
                "strides {strides:?} place two elements of shape {shape:?} at one offset: a write would be ambiguous"
            )));
        }
        span = stride.saturating_mul(dim - 1).saturating_add(span);
    }
    Ok(())
}

/// Where a strided tensor's elements lie, as runs of consecutive elements in row-major order:
/// the tensor's innermost dimensions that are dense together form one run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Runs {
    /// Bytes of each run; the `k`-th run holds bytes `k * run_bytes..` of the dense data.
    pub run_bytes: u64,
    /// Byte offset of each run from the tensor's first element, in row-major order.
    pub offsets_bytes: Vec<u64>,
}

/// The runs of a tensor of `shape` laid out with `strides` whose extent
/// ([`extent_bytes`]) was checked.
pub(crate) fn runs(shape: &[usize], strides: &[usize], elem_size: usize) -> Runs {
    // Merge the innermost dimensions while each one's stride is the elements inside it.
    let mut run_elems = 1usize;
    let mut outer = shape.len();
    while outer > 0 && (shape[outer - 1] == 1 || strides[outer - 1] == run_elems) {
        run_elems *= shape[outer - 1];
        outer -= 1;
    }
    let (outer_shape, outer_strides) = (&shape[..outer], &strides[..outer]);
    // An empty dimension merged into the run empties the tensor, whatever the outer ones hold.
    let count = match run_elems {
        0 => 0,
        _ => outer_shape.iter().product(),
    };
    let mut offsets_bytes = Vec::with_capacity(count);
    let mut index = vec![0usize; outer];
    for _ in 0..count {
        let offset: usize = index.iter().zip(outer_strides).map(|(i, s)| i * s).sum();
        offsets_bytes.push((offset * elem_size) as u64);
        advance(&mut index, outer_shape);
    }
    Runs {
        run_bytes: (run_elems * elem_size) as u64,
        offsets_bytes,
    }
}

/// Copies a strided tensor out of `src` (which starts at the tensor's first element) into a
/// dense row-major buffer. The tensor's dense size ([`dense_bytes`]) and extent
/// ([`extent_bytes`], within `src`) were checked; the host may still refuse the dense buffer
/// (a broadcast view of far more elements than its source).
pub fn gather(
    src: &[u8],
    shape: &[usize],
    strides: &[usize],
    elem_size: usize,
) -> Result<Vec<u8>, TryReserveError> {
    let count = shape.iter().product::<usize>();
    let mut out = Vec::new();
    out.try_reserve_exact(count * elem_size)?;
    // Dense row-major: one copy instead of one per element.
    if count > 0 && strides == contiguous_strides(shape) {
        out.extend_from_slice(&src[..count * elem_size]);
        return Ok(out);
    }
    if count == 0 {
        return Ok(out);
    }
    let mut index = vec![0usize; shape.len()];
    for _ in 0..count {
        let offset: usize = index.iter().zip(strides).map(|(i, s)| i * s).sum();
        let start = offset * elem_size;
        out.extend_from_slice(&src[start..start + elem_size]);
        advance(&mut index, shape);
    }
    Ok(out)
}

/// [`gather`] for bytes a read returned: already dense row-major bytes are returned as they
/// are (a read's pooled block stays lent, with no copy); others are gathered into heap bytes.
pub fn gather_bytes(
    bytes: Bytes,
    shape: &[usize],
    strides: &[usize],
    elem_size: usize,
) -> Result<Bytes, TryReserveError> {
    let dense_bytes = shape.iter().product::<usize>() * elem_size;
    if bytes.len() == dense_bytes && strides == contiguous_strides(shape) {
        return Ok(bytes);
    }
    gather(&bytes, shape, strides, elem_size).map(Bytes::from_bytes_vec)
}

/// Steps a multi-index over `shape` to the next element in row-major order (innermost
/// dimension first), wrapping to all zeros after the last.
fn advance(index: &mut [usize], shape: &[usize]) {
    for dim in (0..shape.len()).rev() {
        index[dim] += 1;
        if index[dim] < shape[dim] {
            return;
        }
        index[dim] = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shape_with_a_zero_dimension_has_no_elements_however_large_the_others() {
        // It was refused as overflowing when the huge dimensions came first.
        assert_eq!(num_elems(&[usize::MAX, usize::MAX, 0]), Ok(0));
        assert_eq!(
            extent_bytes(&[usize::MAX, usize::MAX, 0], &[1, 1, 1], 4),
            Ok(0)
        );
        assert!(num_elems(&[usize::MAX, 2]).is_err());
        assert_eq!(num_elems(&[]), Ok(1));
    }

    #[test]
    fn contiguous_strides_are_row_major() {
        assert_eq!(contiguous_strides(&[2, 3, 4]), vec![12, 4, 1]);
        assert_eq!(contiguous_strides(&[]), Vec::<usize>::new());
    }

    #[test]
    fn a_shape_whose_strides_overflow_is_refused_not_a_panic() {
        // The explorer's boundary dimensions found it: the product of every dimension but the
        // first overflowed computing the dense strides, a panic in debug builds (and wrapped
        // strides in release) before the shape's size was checked.
        let huge = 1usize << 33;
        assert_eq!(contiguous_strides(&[1, huge, huge]), [usize::MAX, huge, 1]);
        assert_eq!(contiguous_strides(&[2, 0, huge]), [0, huge, 1]);
        for strategy in [
            MemoryLayoutStrategy::Contiguous,
            MemoryLayoutStrategy::Optimized,
        ] {
            let desc = MemoryLayoutDescriptor::new(strategy, vec![1, huge, huge], 4);
            assert!(
                matches!(plan(&desc, 16), Err(IoError::InvalidLayout { .. })),
                "{strategy:?}"
            );
        }
    }

    #[test]
    fn extent_of_a_pitched_matrix_ends_at_its_last_element() {
        // Two rows of three 4-byte elements, rows pitched to 8 elements.
        assert_eq!(extent_bytes(&[2, 3], &[8, 1], 4).unwrap(), (8 + 2 + 1) * 4);
        assert_eq!(extent_bytes(&[0, 3], &[8, 1], 4).unwrap(), 0);
        assert!(extent_bytes(&[2], &[1, 1], 4).is_err());
        assert!(extent_bytes(&[usize::MAX, 2], &[usize::MAX, 1], 4).is_err());
    }

    #[test]
    fn optimized_layouts_pitch_rows_to_the_load_width() {
        let desc = |shape: Vec<usize>, elem_size| {
            MemoryLayoutDescriptor::new(MemoryLayoutStrategy::Optimized, shape, elem_size)
        };
        // Three 4-byte elements per row, rows pitched to 16 bytes.
        let p = plan(&desc(vec![2, 3], 4), 16).unwrap();
        assert_eq!((p.strides, p.bytes), (vec![4, 1], 32));
        let p = plan(&desc(vec![2, 2, 5], 2), 16).unwrap();
        assert_eq!((p.strides, p.bytes), (vec![16, 8, 1], 64));
        // Rows already aligned, vectors and empty tensors stay dense.
        assert_eq!(plan(&desc(vec![2, 4], 4), 16).unwrap().strides, vec![4, 1]);
        assert_eq!(plan(&desc(vec![7], 4), 16).unwrap().bytes, 28);
        assert_eq!(plan(&desc(vec![0, 3], 4), 16).unwrap().bytes, 0);
        // A 12-byte element pitches rows to a multiple of 48 bytes.
        assert_eq!(plan(&desc(vec![2, 1], 12), 16).unwrap().strides, vec![4, 1]);
    }

    #[test]
    fn scatter_then_gather_round_trips() {
        let dense: Vec<u8> = (0..12).collect();
        let (shape, strides) = ([2, 3], [5, 1]);
        let mut pitched = vec![0xFF; 2 * 5 * 2];
        scatter(&dense, &mut pitched, &shape, &strides, 2);
        assert_eq!(gather(&pitched, &shape, &strides, 2).unwrap(), dense);
    }

    #[test]
    fn scatter_places_each_element_at_its_strided_offset() {
        // The plain form, one element at a time, that the copy per run must equal.
        fn by_element(src: &[u8], dst: &mut [u8], shape: &[usize], strides: &[usize], size: usize) {
            let mut index = vec![0usize; shape.len()];
            for elem in src.chunks_exact(size) {
                let offset: usize = index.iter().zip(strides).map(|(i, s)| i * s).sum();
                dst[offset * size..(offset + 1) * size].copy_from_slice(elem);
                advance(&mut index, shape);
            }
        }
        for (shape, strides, size) in [
            (&[2, 3][..], &[3, 1][..], 4),
            (&[2, 3], &[4, 1], 4),
            (&[2, 2, 3], &[8, 4, 1], 1),
            (&[2, 1, 3], &[3, 99, 1], 2),
            (&[2, 2], &[1, 2], 4),
            (&[3, 2, 2], &[10, 1, 2], 2),
            (&[], &[], 8),
        ] {
            let count: usize = shape.iter().product();
            let dense: Vec<u8> = (0..(count * size) as u8).collect();
            let extent = extent_bytes(shape, strides, size).unwrap() as usize;
            let (mut runs, mut elements) = (vec![0xFF; extent], vec![0xFF; extent]);
            scatter(&dense, &mut runs, shape, strides, size);
            by_element(&dense, &mut elements, shape, strides, size);
            assert_eq!(runs, elements, "{shape:?} {strides:?} {size}");
        }
    }

    #[test]
    fn runs_merge_the_dense_inner_dimensions() {
        let runs_of = |shape: &[usize], strides: &[usize], elem_size| {
            let r = runs(shape, strides, elem_size);
            (r.run_bytes, r.offsets_bytes)
        };
        // Dense: one run.
        assert_eq!(runs_of(&[2, 3], &[3, 1], 4), (24, vec![0]));
        // Pitched rows: a run per row.
        assert_eq!(runs_of(&[2, 3], &[4, 1], 4), (12, vec![0, 16]));
        // Pitched rows of a 3-D tensor: a run per row, planes dense over pitched rows.
        assert_eq!(runs_of(&[2, 2, 3], &[8, 4, 1], 1), (3, vec![0, 4, 8, 12]));
        // A dimension of one element merges whatever its stride.
        assert_eq!(runs_of(&[2, 1, 3], &[3, 99, 1], 2), (12, vec![0]));
        // Transposed: a run per element.
        assert_eq!(runs_of(&[2, 2], &[1, 2], 4), (4, vec![0, 8, 4, 12]));
        // Empty, wherever the empty dimension is; a scalar is one run.
        assert_eq!(runs_of(&[0, 3], &[4, 1], 4), (12, vec![]));
        assert_eq!(runs_of(&[2, 0], &[4, 1], 4), (0, vec![]));
        assert_eq!(runs_of(&[], &[], 8), (8, vec![0]));
    }

    #[test]
    fn disjoint_strides_are_those_that_nest() {
        for (shape, strides) in [
            (&[2, 3][..], &[3, 1][..]),
            (&[2, 3], &[8, 1]),
            (&[2, 2], &[1, 2]),
            (&[3, 1, 2], &[2, 0, 7]),
            (&[1], &[0]),
            (&[2, 0], &[0, 1]),
        ] {
            assert_eq!(
                check_disjoint(shape, strides),
                Ok(()),
                "{shape:?} {strides:?}"
            );
        }
        for (shape, strides) in [(&[2, 3][..], &[2, 1][..]), (&[2], &[0]), (&[2, 2], &[1, 1])] {
            assert!(
                check_disjoint(shape, strides).is_err(),
                "{shape:?} {strides:?}"
            );
        }
    }

    #[test]
    fn gather_bytes_keeps_dense_bytes_and_gathers_the_rest() {
        let dense = Bytes::from(vec![1, 2, 3, 4]);
        let address = dense.as_ptr();
        let kept = gather_bytes(dense, &[2, 2], &[2, 1], 1).unwrap();
        assert_eq!((kept.as_ptr(), &kept[..]), (address, &[1, 2, 3, 4][..]));
        let transposed = gather_bytes(Bytes::from(vec![1, 2, 3, 4]), &[2, 2], &[1, 2], 1).unwrap();
        assert_eq!(*transposed, [1, 3, 2, 4]);
    }

    #[test]
    fn gather_drops_the_padding() {
        let src: Vec<u8> = (0..6).collect();
        // Two rows of two 1-byte elements, pitched to three.
        assert_eq!(gather(&src, &[2, 2], &[3, 1], 1).unwrap(), vec![0, 1, 3, 4]);
        // A transposed view.
        assert_eq!(gather(&src, &[2, 2], &[1, 3], 1).unwrap(), vec![0, 3, 1, 4]);
    }
}
