//! Simulated device memory: poisoned when allocated and retired (a tombstone) when freed, with a
//! shadow map of which bytes were ever written, so reads of garbage and touches of freed memory
//! are reported.
//! It models what the runtime's memory layer manages.

use std::collections::BTreeMap;

use lockstep::DeviceError;

/// Fresh memory holds this byte; a read that returns it where nothing was written is a bug.
pub const POISON_FRESH: u8 = 0xA5;

/// A problem the sanitizer found. Each names the operation and the byte range involved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SanitizerReport {
    /// Bytes read (by a copy to the host, a device copy or a kernel) that were never written.
    UninitializedRead {
        /// The operation that read, for the message.
        operation: String,
        /// The device's id of the buffer.
        buffer: u64,
        /// Byte offset of the unwritten range in the buffer.
        offset: u64,
        /// Length of the unwritten range, in bytes.
        len: u64,
    },
    /// An operation touched an allocation that had already been freed.
    UseAfterFree {
        /// The operation, for the message.
        operation: String,
        /// The device's id of the freed buffer.
        buffer: u64,
    },
    /// The runtime freed an allocation while queued work still used it.
    FreeWhileInUse {
        /// The device's id of the buffer.
        buffer: u64,
    },
    /// Two operations on different streams touched overlapping bytes, at least one writing,
    /// with no happens-before edge between them (see `sanitizer`).
    Race {
        /// The device's id of the buffer.
        buffer: u64,
        /// Byte offset of the overlap in the buffer.
        offset: u64,
        /// Length of the overlap, in bytes.
        len: u64,
        /// The earlier access, for the message.
        first: String,
        /// The later access, for the message.
        second: String,
    },
    /// A call that broke the `Device` contract, refused with this `DeviceError::Contract`
    /// (the runtime validates first, so under it this is a runtime bug).
    ContractViolation(DeviceError),
    /// Something inside one launch that the kernel memory model forbids (see
    /// `lockstep::kernel`); `detail` names the invocations, the location and the statements.
    Kernel {
        /// The launch, for the message.
        operation: String,
        /// What the kernel sanitizer found.
        finding: KernelFinding,
        /// The invocations, array, index and statements involved, for a person to read.
        detail: String,
        /// The launch's enqueue number on its device ([`InjectedFault::op`]'s numbering), so
        /// that a caller can tell which of its launches the finding is about.
        ///
        /// [`InjectedFault::op`]: crate::InjectedFault::op
        op: u64,
    },
}

/// What the kernel sanitizer found inside a launch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KernelFinding {
    /// Two invocations accessed one word, at least one writing, not both atomically, with no
    /// barrier between them (or in different workgroups).
    Race,
    /// A workgroup's invocations reached different barriers, or some a barrier and some the end.
    DivergentBarrier,
    /// A read of a shared array's word that no invocation of the workgroup had written.
    UnwrittenShared,
}

impl std::fmt::Display for KernelFinding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            KernelFinding::Race => "race",
            KernelFinding::DivergentBarrier => "barrier in divergent control flow",
            KernelFinding::UnwrittenShared => "read of unwritten shared memory",
        })
    }
}

impl std::fmt::Display for SanitizerReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SanitizerReport::UninitializedRead {
                operation,
                buffer,
                offset,
                len,
            } => write!(
                f,
                "{operation} read never-written bytes {offset}..{} of buffer {buffer}",
                offset + len
            ),
            SanitizerReport::UseAfterFree { operation, buffer } => {
                write!(f, "{operation} used buffer {buffer} after it was freed")
            }
            SanitizerReport::FreeWhileInUse { buffer } => {
                write!(
                    f,
                    "buffer {buffer} was freed while queued work still used it"
                )
            }
            SanitizerReport::Race {
                buffer,
                offset,
                len,
                first,
                second,
            } => write!(
                f,
                "race on buffer {buffer} bytes {offset}..{}: {first} and {second} are not ordered",
                offset + len
            ),
            SanitizerReport::ContractViolation(err) => write!(f, "{err}"),
            SanitizerReport::Kernel {
                operation,
                finding,
                detail,
                ..
            } => write!(f, "{operation}: {finding}: {detail}"),
        }
    }
}

/// Bytes per chunk of simulated memory. A chunk is materialised at its first write, so an
/// allocation costs nothing until it is used: pools reserve pages of up to hundreds of MiB and
/// use a few KiB of them, and filling whole pages with poison cost more than the simulated work.
const CHUNK_BYTES: usize = 4096;

/// One materialised chunk: its bytes (poisoned until written) and which of them were written.
/// The bytes are an allocation of their own, so that a chunk written whole is made by one copy
/// of what is written (see [`Chunk::written`]).
#[derive(Debug)]
struct Chunk {
    bytes: Box<[u8; CHUNK_BYTES]>,
    written: Written,
}

/// Which bytes of a chunk were written: every one (a chunk made of a whole chunk's write,
/// most of them, needs no bits), or one bit per byte.
#[derive(Debug)]
enum Written {
    /// Every byte.
    All,
    /// Bit `i` (of `u64` `i / 64`, from its least significant) set when byte `i` was.
    Bits(Box<[u64; CHUNK_BYTES / 64]>),
}

impl Chunk {
    fn fresh() -> Chunk {
        Chunk {
            bytes: chunk_bytes(vec![POISON_FRESH; CHUNK_BYTES].into_boxed_slice()),
            written: Written::Bits(Box::new([0; CHUNK_BYTES / 64])),
        }
    }

    /// A chunk of `bytes`, every one written: copied once, never poisoned first (a fresh
    /// chunk poisoned and then overwritten cost 4% of the explorer's instructions).
    fn written(bytes: &[u8; CHUNK_BYTES]) -> Chunk {
        Chunk {
            bytes: chunk_bytes(Box::from(&bytes[..])),
            written: Written::All,
        }
    }
}

impl Written {
    /// Marks bytes `from..from + n` written.
    fn set(&mut self, from: usize, n: usize) {
        if let Written::Bits(words) = self {
            set_bits(&mut words[..], from, n);
        }
    }

    /// Whether bytes `from..from + n` were all written.
    fn all(&self, from: usize, n: usize) -> bool {
        match self {
            Written::All => true,
            Written::Bits(words) => all_bits(&words[..], from, n),
        }
    }

    /// For each 4-byte word of bytes `from..from + n`, whether it was all written, appended to
    /// `out` (see [`words_written_in`]).
    fn words(&self, from: usize, n: usize, out: &mut Vec<bool>) {
        // A launch reads bindings a chunk at a time, mostly written whole.
        if self.all(from, n) {
            return out.extend(std::iter::repeat_n(true, n / 4));
        }
        if let Written::Bits(words) = self {
            words_written_in(&words[..], from, n, out);
        }
    }
}

/// `bytes`, a chunk's worth, as a chunk's bytes (the same allocation).
fn chunk_bytes(bytes: Box<[u8]>) -> Box<[u8; CHUNK_BYTES]> {
    bytes.try_into().expect("a chunk's worth of bytes")
}

/// One device allocation. Bytes never written read as [`POISON_FRESH`], whether or not their
/// chunk is materialised; the written-bit of a byte is set exactly when a write covered it.
#[derive(Debug)]
pub(crate) struct Allocation {
    size: usize,
    /// The chunks by index, `None` where not materialised; chunks past its end are not
    /// materialised either. It grows to the last chunk written (a pool's page of hundreds of
    /// MiB had a slot per chunk, made and dropped whole, though a few KiB of it were used).
    chunks: Vec<Option<Chunk>>,
    pub freed: bool,
}

/// The pieces of `offset..offset + len` that fall in each chunk: (chunk, start in chunk, length).
fn pieces(offset: usize, len: usize) -> impl Iterator<Item = (usize, usize, usize)> {
    let end = offset + len;
    let mut at = offset;
    std::iter::from_fn(move || {
        (at < end).then(|| {
            let (chunk, within) = (at / CHUNK_BYTES, at % CHUNK_BYTES);
            let n = (CHUNK_BYTES - within).min(end - at);
            at += n;
            (chunk, within, n)
        })
    })
}

/// Sets bits `from..from + n` of `words`.
fn set_bits(words: &mut [u64], from: usize, n: usize) {
    let mut bit = from;
    while bit < from + n {
        let take = (64 - bit % 64).min(from + n - bit);
        words[bit / 64] |= mask(bit % 64, take);
        bit += take;
    }
}

/// Whether bits `from..from + n` of `words` are all set. The `u64`s the range covers whole are
/// tested together (a transfer or a launch tests whole chunks, 64 `u64`s each, and a mask
/// per `u64` was 2% of the explorer's instructions); a partial one at either end is masked.
fn all_bits(words: &[u64], from: usize, n: usize) -> bool {
    let end = from + n;
    let (first_whole, end_whole) = (from.div_ceil(64), end / 64);
    if first_whole >= end_whole {
        return partial_bits(words, from, end);
    }
    let whole = &words[first_whole..end_whole];
    whole.iter().fold(u64::MAX, |all, &w| all & w) == u64::MAX
        && partial_bits(words, from, 64 * first_whole)
        && partial_bits(words, 64 * end_whole, end)
}

/// Whether bits `from..end` of `words` are all set, a `u64` at a time.
fn partial_bits(words: &[u64], from: usize, end: usize) -> bool {
    let mut bit = from;
    while bit < end {
        let take = (64 - bit % 64).min(end - bit);
        let m = mask(bit % 64, take);
        if words[bit / 64] & m != m {
            return false;
        }
        bit += take;
    }
    true
}

/// For each 4-byte word of bytes `from..from + n` (`from` and `n` multiples of 4): whether all
/// four of its bits in `written` are set, appended to `out`. Runs of 16 written words (one full
/// `u64` of bits) are appended at once.
fn words_written_in(written: &[u64], from: usize, n: usize, out: &mut Vec<bool>) {
    let mut bit = from;
    while bit < from + n {
        let shift = bit % 64;
        let bits = written[bit / 64] >> shift;
        // Words of the range in this `u64`.
        let take = ((64 - shift) / 4).min((from + n - bit) / 4);
        if bits == u64::MAX >> shift {
            out.extend(std::iter::repeat_n(true, take));
        } else {
            out.extend((0..take).map(|k| bits >> (4 * k) & 0xF == 0xF));
        }
        bit += 4 * take;
    }
}

/// Little-endian elements of `elem_bytes` (2 or 4) each, one per `u32` (a 2-byte element in
/// the low half), as the interpreter and the collectives hold them. Each size has its own
/// loop: a copy of a length known only at run time is a `memcpy` call per element.
pub(crate) fn elements_of(bytes: &[u8], elem_bytes: usize) -> Vec<u32> {
    match elem_bytes {
        2 => (bytes.as_chunks::<2>().0.iter())
            .map(|&e| u16::from_le_bytes(e) as u32)
            .collect(),
        4 => (bytes.as_chunks::<4>().0.iter())
            .map(|&e| u32::from_le_bytes(e))
            .collect(),
        other => unreachable!("elements are 2 or 4 bytes, not {other}"),
    }
}

/// The inverse of [`elements_of`]: each word's low `elem_bytes` bytes, little-endian.
pub(crate) fn bytes_of(words: &[u32], elem_bytes: usize) -> Vec<u8> {
    if elem_bytes == 4 && cfg!(target_endian = "little") {
        // The words' own bytes: one copy, into memory not zeroed first (a collective's result
        // was zeroed and then overwritten).
        return bytemuck::cast_slice(words).to_vec();
    }
    let mut bytes = vec![0; elem_bytes * words.len()];
    store_elements(words, &mut bytes, elem_bytes);
    bytes
}

/// [`bytes_of`] into `out`, which holds `elem_bytes` bytes per word of `words` (the extra
/// words are not stored).
fn store_elements(words: &[u32], out: &mut [u8], elem_bytes: usize) {
    match elem_bytes {
        2 => {
            for (to, &w) in out.as_chunks_mut::<2>().0.iter_mut().zip(words) {
                *to = (w as u16).to_le_bytes();
            }
        }
        4 => {
            for (to, &w) in out.as_chunks_mut::<4>().0.iter_mut().zip(words) {
                *to = w.to_le_bytes();
            }
        }
        other => unreachable!("elements are 2 or 4 bytes, not {other}"),
    }
}

/// `n` set bits from bit `shift` (`shift + n <= 64`).
fn mask(shift: usize, n: usize) -> u64 {
    (u64::MAX >> (64 - n)) << shift
}

impl Allocation {
    fn new(size: usize) -> Self {
        Self {
            size,
            chunks: Vec::new(),
            freed: false,
        }
    }

    /// Chunk `index` (of those the allocation spans), if materialised.
    fn chunk(&self, index: usize) -> Option<&Chunk> {
        assert!(
            index < self.size.div_ceil(CHUNK_BYTES),
            "chunk {index} lies past the allocation"
        );
        self.chunks.get(index)?.as_ref()
    }

    /// Copies `data` in at `offset` and marks those bytes written.
    pub fn write(&mut self, offset: usize, data: &[u8]) {
        self.write_pieces(offset, data.len(), Some(data), |at, piece| {
            piece.copy_from_slice(&data[at..at + piece.len()]);
        });
    }

    /// Stores `words` as elements of `elem_bytes` each (see [`bytes_of`]) at `offset` and marks
    /// those bytes written: the same as writing `bytes_of(words, elem_bytes)`, without making
    /// those bytes first (a launch's write-back of a 64 Ki-element binding made 256 KiB).
    pub fn write_elements(&mut self, offset: usize, words: &[u32], elem_bytes: usize) {
        if !offset.is_multiple_of(elem_bytes) {
            // An element may straddle two chunks; none of the runtime's bindings is placed so.
            return self.write(offset, &bytes_of(words, elem_bytes));
        }
        // Chunks hold whole elements when `offset` is aligned (CHUNK_BYTES is a multiple of 4).
        self.write_pieces(offset, elem_bytes * words.len(), None, |at, piece| {
            store_elements(&words[at / elem_bytes..], piece, elem_bytes);
        });
    }

    /// Marks bytes `offset..offset + len` written, after `fill(at, piece)` stored in each
    /// chunk's `piece` of them the bytes from `at` on (`at` counted from `offset`). `bytes`,
    /// where the caller has them, are those bytes: a chunk not yet materialised that they
    /// cover whole is made of them (see [`Chunk::written`]) instead.
    fn write_pieces(
        &mut self,
        offset: usize,
        len: usize,
        bytes: Option<&[u8]>,
        mut fill: impl FnMut(usize, &mut [u8]),
    ) {
        assert!(
            offset + len <= self.size,
            "the runtime writes inside its buffers"
        );
        let end_chunk = (offset + len).div_ceil(CHUNK_BYTES);
        if len > 0 && self.chunks.len() < end_chunk {
            self.chunks.resize_with(end_chunk, || None);
        }
        for (index, within, n) in pieces(offset, len) {
            let at = index * CHUNK_BYTES + within - offset;
            let slot = &mut self.chunks[index];
            if slot.is_none()
                && n == CHUNK_BYTES
                && let Some(whole) = bytes.and_then(|b| b[at..].first_chunk())
            {
                *slot = Some(Chunk::written(whole));
                continue;
            }
            let chunk = slot.get_or_insert_with(Chunk::fresh);
            fill(at, &mut chunk.bytes[within..within + n]);
            chunk.written.set(within, n);
        }
    }

    /// The bytes at `offset..offset + len`, poison where never written.
    pub fn read(&self, offset: usize, len: usize) -> Vec<u8> {
        let mut out = Vec::with_capacity(len);
        self.read_pieces(offset, len, |piece, n| match piece {
            Some(bytes) => out.extend_from_slice(bytes),
            None => out.resize(out.len() + n, POISON_FRESH),
        });
        out
    }

    /// [`read`](Self::read) of `out.len()` bytes from `offset`, into `out`.
    pub fn read_into(&self, offset: usize, out: &mut [u8]) {
        let mut at = 0;
        self.read_pieces(offset, out.len(), |piece, n| {
            let to = &mut out[at..at + n];
            match piece {
                Some(bytes) => to.copy_from_slice(bytes),
                None => to.fill(POISON_FRESH),
            }
            at += n;
        });
    }

    /// Calls `take(piece, n)` on the `n` bytes from `offset` on in each chunk, in order, until
    /// `len` bytes: `piece` is those bytes, or `None` where the chunk is not materialised
    /// (all poison).
    fn read_pieces(&self, offset: usize, len: usize, mut take: impl FnMut(Option<&[u8]>, usize)) {
        assert!(
            offset + len <= self.size,
            "the runtime reads inside its buffers"
        );
        for (index, within, n) in pieces(offset, len) {
            let piece = (self.chunk(index)).map(|chunk| &chunk.bytes[within..within + n]);
            take(piece, n);
        }
    }

    /// The little-endian word at `offset`.
    pub fn read_word(&self, offset: usize) -> u32 {
        let bytes = self.read(offset, 4);
        u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]])
    }

    /// The `words` little-endian words from `offset`, poison where never written. The same as
    /// [`read`](Self::read) a word at a time, a chunk at a time.
    pub fn read_words(&self, offset: usize, words: usize) -> Vec<u32> {
        if !offset.is_multiple_of(4) {
            return self
                .read(offset, 4 * words)
                .chunks_exact(4)
                .map(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]]))
                .collect();
        }
        let poison = u32::from_le_bytes([POISON_FRESH; 4]);
        let mut out = Vec::with_capacity(words);
        // Chunks hold whole words when `offset` is 4-aligned (CHUNK_BYTES is a multiple of 4).
        for (index, within, n) in pieces(offset, 4 * words) {
            match self.chunk(index) {
                None => out.extend(std::iter::repeat_n(poison, n / 4)),
                Some(chunk) => out.extend(
                    chunk.bytes[within..within + n]
                        .chunks_exact(4)
                        .map(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]])),
                ),
            }
        }
        out
    }

    /// For each of the `words` 4-byte words from `offset`: whether all its bytes were written.
    /// The same as [`all_written`](Self::all_written) per word, a chunk at a time.
    pub fn words_written(&self, offset: usize, words: usize) -> Vec<bool> {
        if !offset.is_multiple_of(4) {
            return (0..words)
                .map(|i| self.all_written(offset + 4 * i, 4))
                .collect();
        }
        let mut out = Vec::with_capacity(words);
        // Chunks hold whole words when `offset` is 4-aligned (CHUNK_BYTES is a multiple of 4).
        for (index, within, n) in pieces(offset, 4 * words) {
            match self.chunk(index) {
                None => out.extend(std::iter::repeat_n(false, n / 4)),
                Some(chunk) => chunk.written.words(within, n, &mut out),
            }
        }
        out
    }

    /// Whether every byte of the range was written at some point.
    pub fn all_written(&self, offset: usize, len: usize) -> bool {
        pieces(offset, len).all(|(index, within, n)| {
            self.chunk(index)
                .is_some_and(|chunk| chunk.written.all(within, n))
        })
    }
}

/// All allocations of one device, live and freed. Freed ones are kept as tombstones (without
/// their bytes) so that a late access is recognised as use-after-free rather than as an unknown
/// id.
#[derive(Debug, Default)]
pub(crate) struct SimMemory {
    allocations: BTreeMap<u64, Allocation>,
    next_id: u64,
    pub bytes_live: u64,
}

impl SimMemory {
    pub fn allocate(&mut self, size: u64) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        self.allocations.insert(id, Allocation::new(size as usize));
        self.bytes_live += size;
        id
    }

    pub fn free(&mut self, id: u64) {
        let alloc = self
            .allocations
            .get_mut(&id)
            .expect("the runtime frees only buffers this device allocated");
        assert!(!alloc.freed, "buffer {id} freed twice");
        alloc.freed = true;
        self.bytes_live -= alloc.size as u64;
        // Retire the storage; keep the tombstone for use-after-free detection.
        alloc.chunks = Vec::new();
    }

    /// Whether `id` is allocated and not yet freed.
    pub fn is_live(&self, id: u64) -> bool {
        self.allocations.get(&id).is_some_and(|alloc| !alloc.freed)
    }

    /// The live allocation `id`.
    ///
    /// # Panics
    /// If `id` is freed or unknown: call it only where a check said it is live.
    pub fn live(&self, id: u64) -> &Allocation {
        match self.allocations.get(&id) {
            Some(alloc) if !alloc.freed => alloc,
            _ => panic!("buffer {id} was checked live"),
        }
    }

    /// The live allocation `id`, or a use-after-free report naming `operation`.
    pub fn get_mut(
        &mut self,
        id: u64,
        operation: &str,
    ) -> Result<&mut Allocation, SanitizerReport> {
        match self.allocations.get_mut(&id) {
            Some(alloc) if !alloc.freed => Ok(alloc),
            _ => Err(SanitizerReport::UseAfterFree {
                operation: operation.to_owned(),
                buffer: id,
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_of_undoes_elements_of_for_both_element_sizes() {
        let bytes: Vec<u8> = (1..=12).collect();
        assert_eq!(elements_of(&bytes, 4)[..2], [0x0403_0201, 0x0807_0605]);
        assert_eq!(elements_of(&bytes, 2)[..2], [0x0201, 0x0403]);
        for size in [2, 4] {
            assert_eq!(
                bytes_of(&elements_of(&bytes, size), size),
                bytes,
                "{size}-byte elements"
            );
        }
    }

    #[test]
    fn unwritten_bytes_read_as_poison_and_writes_across_chunks_read_back() {
        let mut alloc = Allocation::new(3 * CHUNK_BYTES + 10);
        assert_eq!(alloc.read(0, 8), vec![POISON_FRESH; 8]);
        assert!(!alloc.all_written(0, 1));
        // A write straddling two chunk boundaries, starting at an odd offset.
        let at = CHUNK_BYTES - 3;
        let data: Vec<u8> = (0..CHUNK_BYTES as u32 + 7).map(|i| i as u8).collect();
        alloc.write(at, &data);
        assert_eq!(alloc.read(at, data.len()), data);
        assert!(alloc.all_written(at, data.len()));
        assert!(
            !alloc.all_written(at - 1, 2),
            "the byte before was never written"
        );
        assert!(!alloc.all_written(at, data.len() + 1), "nor the byte after");
        let mut around = vec![POISON_FRESH];
        around.extend_from_slice(&data);
        around.push(POISON_FRESH);
        assert_eq!(alloc.read(at - 1, data.len() + 2), around);
        // The last, partial chunk.
        alloc.write(3 * CHUNK_BYTES + 6, &7u32.to_le_bytes());
        assert_eq!(alloc.read_word(3 * CHUNK_BYTES + 6), 7);
        assert!(alloc.all_written(3 * CHUNK_BYTES + 6, 4));
        // Word by word, aligned and not, across the chunk boundary written above.
        for start in [CHUNK_BYTES - 8, CHUNK_BYTES - 7] {
            let expected: Vec<bool> = (0..8)
                .map(|i| alloc.all_written(start + 4 * i, 4))
                .collect();
            assert_eq!(alloc.words_written(start, 8), expected);
        }
        // The write began 3 bytes before the boundary: the word before it is partly unwritten.
        assert_eq!(
            alloc.words_written(CHUNK_BYTES - 8, 4),
            vec![false, false, true, true]
        );
    }

    #[test]
    fn words_read_and_written_match_the_bytes_a_word_at_a_time() {
        let mut alloc = Allocation::new(3 * CHUNK_BYTES);
        // Written: a run across a chunk boundary, with one half-written word inside.
        let data: Vec<u8> = (0..1000u32).map(|i| i as u8).collect();
        alloc.write(CHUNK_BYTES - 500, &data);
        alloc.write(CHUNK_BYTES - 502, &[1, 2]);
        alloc.write(CHUNK_BYTES + 100, &[9, 9]);
        // Spans starting in, before and after the run, aligned and not, unmaterialised chunks too.
        for start in [
            0,
            CHUNK_BYTES - 640,
            CHUNK_BYTES - 504,
            CHUNK_BYTES - 3,
            CHUNK_BYTES + 96,
        ] {
            for words in [0, 1, 15, 16, 17, 300, (3 * CHUNK_BYTES - start) / 4] {
                let written: Vec<bool> = (0..words)
                    .map(|i| alloc.all_written(start + 4 * i, 4))
                    .collect();
                assert_eq!(
                    alloc.words_written(start, words),
                    written,
                    "{start}+{words}"
                );
                let read: Vec<u32> = (0..words).map(|i| alloc.read_word(start + 4 * i)).collect();
                assert_eq!(alloc.read_words(start, words), read, "{start}+{words}");
            }
        }
    }

    #[test]
    fn chunks_written_whole_or_piece_by_piece_read_back_alike() {
        // Chunk 0 made of a whole chunk's write, then written into; chunk 1 written whole a
        // piece at a time (elements carry no bytes to make it of); chunk 2 never written.
        let mut alloc = Allocation::new(3 * CHUNK_BYTES);
        alloc.write(0, &[3; CHUNK_BYTES]);
        alloc.write(10, &[4; 6]);
        alloc.write_elements(CHUNK_BYTES, &[0x0102_0304; CHUNK_BYTES / 4], 4);
        for (offset, len) in [(0, 2 * CHUNK_BYTES), (8, 8), (CHUNK_BYTES - 4, 8)] {
            assert!(alloc.all_written(offset, len), "{offset}+{len}");
            assert_eq!(alloc.words_written(offset, len / 4), vec![true; len / 4]);
        }
        assert!(!alloc.all_written(2 * CHUNK_BYTES - 4, 8));
        let mut expected = vec![3; CHUNK_BYTES];
        expected[10..16].fill(4);
        expected.extend([4, 3, 2, 1].repeat(CHUNK_BYTES / 4));
        expected.resize(3 * CHUNK_BYTES, POISON_FRESH);
        assert_eq!(alloc.read(0, 3 * CHUNK_BYTES), expected);
    }

    #[test]
    fn bit_ranges_cover_exactly_what_was_set() {
        let mut words = [0u64; 4];
        set_bits(&mut words, 60, 70);
        assert!(all_bits(&words, 60, 70));
        assert!(!all_bits(&words, 59, 2));
        assert!(!all_bits(&words, 129, 2));
        assert_eq!(words, [0xF << 60, u64::MAX, 0x3, 0]);
        set_bits(&mut words, 192, 64);
        assert_eq!(words[3], u64::MAX);
    }

    #[test]
    fn all_bits_tests_every_bit_of_the_range() {
        // Set: bits 3..200 but bit 130; then also 250..256.
        let mut words = [0u64; 4];
        set_bits(&mut words, 3, 197);
        words[2] &= !(1 << 2);
        set_bits(&mut words, 250, 6);
        let bit = |b: usize| words[b / 64] >> (b % 64) & 1 == 1;
        for from in 0..256 {
            for n in 0..=256 - from {
                let expected = (from..from + n).all(bit);
                assert_eq!(all_bits(&words, from, n), expected, "{from}+{n}");
            }
        }
    }
}
