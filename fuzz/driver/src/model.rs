//! The reference model of the fuzzed buffers: which bytes each holds, which the program never
//! wrote, where a strided tensor's elements lie, and which layouts a write may use.

/// What the model knows of a buffer's bytes: byte `i` is `values[i]` where `known[i]` is
/// 0xFF, and never written where it is 0. Compared eight bytes at a time: reads are checked
/// after every operation, and a byte-wise comparison was a quarter of the fuzzer's time.
#[derive(Clone)]
pub(super) struct Known {
    values: Vec<u8>,
    known: Vec<u8>,
}

/// A summary: the bytes are compared by [`check`](Known::check), which names the first that
/// differs.
impl std::fmt::Debug for Known {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let known = self.known.iter().filter(|&&k| k != 0).count();
        write!(f, "Known({} bytes, {known} known)", self.len())
    }
}

impl Known {
    pub(super) fn written(values: Vec<u8>) -> Self {
        let known = vec![0xFF; values.len()];
        Self { values, known }
    }

    pub(super) fn unwritten(len: usize) -> Self {
        Self {
            values: vec![0; len],
            known: vec![0; len],
        }
    }

    pub(super) fn len(&self) -> usize {
        self.values.len()
    }

    pub(super) fn write(&mut self, offset: usize, data: &[u8]) {
        self.values[offset..offset + data.len()].copy_from_slice(data);
        self.known[offset..offset + data.len()].fill(0xFF);
    }

    /// Forgets bytes `offset..offset + len`: the program changed them in a way the model does not
    /// follow (a kernel's stores, a write a capture may have dropped).
    pub(super) fn forget(&mut self, offset: usize, len: usize) {
        self.known[offset..offset + len].fill(0);
    }

    /// Forgets every byte (see [`forget`](Self::forget)).
    pub(super) fn forget_all(&mut self) {
        self.known.fill(0);
    }

    /// Copies `other` to `offset`, what it knows and what it does not (a copy of a buffer the
    /// model knows only in part).
    pub(super) fn copy_from(&mut self, offset: usize, other: &Known) {
        let end = offset + other.len();
        self.values[offset..end].copy_from_slice(&other.values);
        self.known[offset..end].copy_from_slice(&other.known);
    }

    /// The elements `shape` and `strides` select (row-major), dense.
    pub(super) fn gather(&self, shape: &[usize], strides: &[usize], elem: usize) -> Known {
        let count: usize = shape.iter().product();
        let mut out = Known {
            values: Vec::with_capacity(count * elem),
            known: Vec::with_capacity(count * elem),
        };
        for linear in 0..count {
            let at = element_offset(linear, shape, strides) * elem;
            out.values.extend_from_slice(&self.values[at..at + elem]);
            out.known.extend_from_slice(&self.known[at..at + elem]);
        }
        out
    }

    /// `actual` must hold every known byte.
    pub(super) fn check(&self, actual: &[u8]) -> Result<(), String> {
        if actual.len() != self.len() {
            return Err(format!(
                "read {} bytes, handle holds {}",
                actual.len(),
                self.len()
            ));
        }
        let word = |bytes: &[u8]| u64::from_le_bytes(bytes.try_into().expect("8-byte chunk"));
        let differ = |(a, (v, k)): (&[u8], (&[u8], &[u8]))| (word(a) ^ word(v)) & word(k) != 0;
        let mut chunks = actual
            .chunks_exact(8)
            .zip(self.values.chunks_exact(8).zip(self.known.chunks_exact(8)));
        let tail = actual.len() - actual.len() % 8;
        let suspect = chunks.position(differ).map_or(tail, |c| 8 * c);
        match (suspect..actual.len()).find(|&i| self.known[i] != 0 && actual[i] != self.values[i]) {
            Some(at) => Err(format!(
                "byte {at} is {}, model says {}",
                actual[at], self.values[at]
            )),
            None => Ok(()),
        }
    }
}

/// The contract's rule for a layout a write may use: taken by increasing stride, each
/// dimension's stride reaches past everything the dimensions before it span. Dimensions of one
/// element place nothing twice, and an empty tensor has no elements.
pub(super) fn nests(shape: &[usize], strides: &[usize]) -> bool {
    if shape.contains(&0) {
        return true;
    }
    let mut dims: Vec<(usize, usize)> = strides
        .iter()
        .zip(shape)
        .filter(|&(_, &dim)| dim > 1)
        .map(|(&stride, &dim)| (stride, dim))
        .collect();
    dims.sort_unstable();
    let mut reach = 0usize;
    dims.into_iter().all(|(stride, dim)| {
        let nested = stride > reach;
        reach = reach.saturating_add(stride.saturating_mul(dim - 1));
        nested
    })
}

/// Where element `linear` (row-major over `shape`) lies, in elements: `sum(index * stride)`.
pub(super) fn element_offset(linear: usize, shape: &[usize], strides: &[usize]) -> usize {
    let mut rest = linear;
    let mut offset = 0;
    for (dim, stride) in shape.iter().zip(strides).rev() {
        offset += (rest % dim) * stride;
        rest /= dim;
    }
    offset
}
