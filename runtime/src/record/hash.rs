//! The hashes a recording keeps of data: xxh3-64 of whole writes past the recorder's limit, and
//! of each fixed-size chunk of a read, so that a replay names the first chunk that differs.

use super::format::ReadHashes;

/// Reads are hashed per chunk of this many bytes (the last may be shorter).
pub const CHUNK_BYTES: usize = 4096;

/// The per-chunk hashes of `bytes`.
pub fn chunk_hashes(bytes: &[u8]) -> ReadHashes {
    ReadHashes {
        len: bytes.len() as u64,
        chunks: bytes
            .chunks(CHUNK_BYTES)
            .map(twox_hash::XxHash3_64::oneshot)
            .collect(),
    }
}

/// The byte range `[start, end)` of the first chunk where `actual` differs from `expected`,
/// counting a length difference as a difference from the shorter one's end; `None` if equal.
pub fn first_differing_chunk(expected: &ReadHashes, actual: &ReadHashes) -> Option<(u64, u64)> {
    let chunk = CHUNK_BYTES as u64;
    let index = expected
        .chunks
        .iter()
        .zip(&actual.chunks)
        .position(|(e, a)| e != a)
        .map(|i| i as u64)
        .or_else(|| (expected.len != actual.len).then(|| expected.len.min(actual.len) / chunk))?;
    let start = index * chunk;
    let end = (start + chunk).min(expected.len.max(actual.len));
    Some((start, end))
}

/// xxh3-64 of `bytes`, as [`Data::Hash`](super::Data::Hash) keeps it.
pub fn whole(bytes: &[u8]) -> u64 {
    twox_hash::XxHash3_64::oneshot(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_differing_chunk_is_named_by_its_bytes() {
        let expected = chunk_hashes(&[7u8; 10_000]);
        let mut bytes = vec![7u8; 10_000];
        bytes[9_000] = 8;
        assert_eq!(
            first_differing_chunk(&expected, &chunk_hashes(&bytes)),
            Some((8192, 10_000))
        );
        assert_eq!(first_differing_chunk(&expected, &expected), None);
        assert_eq!(expected.chunks.len(), 3);
    }

    #[test]
    fn a_shorter_read_differs_where_it_ends() {
        let expected = chunk_hashes(&[1u8; 8192]);
        let actual = chunk_hashes(&[1u8; 4096]);
        assert_eq!(
            first_differing_chunk(&expected, &actual),
            Some((4096, 8192))
        );
    }
}
