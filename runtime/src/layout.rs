//! Tensor layouts: shapes, strides and the host-side gather that `read_tensor` performs.
//! Strides count elements, not bytes.

use crate::error::IoError;
use crate::handle::Handle;

/// How a tensor was laid out in device memory.
#[derive(Clone, Debug)]
pub struct MemoryLayout {
    pub memory: Handle,
    /// Element strides per dimension; the last dimension is the innermost.
    pub strides: Vec<usize>,
}

/// What to read back: a handle viewed as a tensor.
#[derive(Clone, Debug)]
pub struct CopyDescriptor {
    pub handle: Handle,
    pub shape: Vec<usize>,
    pub strides: Vec<usize>,
    pub elem_size: usize,
}

impl CopyDescriptor {
    pub fn new(handle: Handle, shape: Vec<usize>, strides: Vec<usize>, elem_size: usize) -> Self {
        Self {
            handle,
            shape,
            strides,
            elem_size,
        }
    }
}

/// Row-major strides of a dense tensor of `shape`.
pub fn contiguous_strides(shape: &[usize]) -> Vec<usize> {
    let mut strides = vec![1; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        strides[i] = strides[i + 1] * shape[i + 1];
    }
    strides
}

fn invalid(reason: String) -> IoError {
    IoError::InvalidLayout { reason }
}

/// Number of elements of `shape`, or an error if it overflows.
pub fn num_elems(shape: &[usize]) -> Result<usize, IoError> {
    shape.iter().try_fold(1usize, |acc, &d| {
        acc.checked_mul(d).ok_or_else(|| {
            invalid(format!(
                "shape {shape:?} has more elements than fit in usize"
            ))
        })
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

/// Copies a strided tensor out of `src` (which starts at the tensor's first element) into a
/// dense row-major buffer.
pub fn gather(src: &[u8], shape: &[usize], strides: &[usize], elem_size: usize) -> Vec<u8> {
    let count = shape.iter().product::<usize>();
    let mut out = Vec::with_capacity(count * elem_size);
    if count == 0 {
        return out;
    }
    let mut index = vec![0usize; shape.len()];
    for _ in 0..count {
        let offset: usize = index.iter().zip(strides).map(|(i, s)| i * s).sum();
        let start = offset * elem_size;
        out.extend_from_slice(&src[start..start + elem_size]);
        // Advance the multi-index, innermost dimension first.
        for dim in (0..shape.len()).rev() {
            index[dim] += 1;
            if index[dim] < shape[dim] {
                break;
            }
            index[dim] = 0;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn contiguous_strides_are_row_major() {
        assert_eq!(contiguous_strides(&[2, 3, 4]), vec![12, 4, 1]);
        assert_eq!(contiguous_strides(&[]), Vec::<usize>::new());
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
    fn gather_drops_the_padding() {
        let src: Vec<u8> = (0..6).collect();
        // Two rows of two 1-byte elements, pitched to three.
        assert_eq!(gather(&src, &[2, 2], &[3, 1], 1), vec![0, 1, 3, 4]);
        // A transposed view.
        assert_eq!(gather(&src, &[2, 2], &[1, 3], 1), vec![0, 3, 1, 4]);
    }
}
