//! A copy into memory the CPU will not read again: the pinned blocks a write is staged in, which
//! the copy engine reads next.
//!
//! An ordinary copy (`copy_from_slice`, glibc's `memcpy` below its non-temporal threshold of
//! tens of MiB) first reads each destination cache line for ownership, then writes it back:
//! three bytes of memory traffic per byte staged, on a host whose memory also feeds the copy
//! engine. Non-temporal stores write whole lines without reading them and leave the caches to
//! the source, so staging takes two thirds of the traffic and more of it overlaps the transfers
//! of earlier chunks. On x86-64 (SSE2 is part of the base instruction set) the aligned body goes
//! through `movntdq`, closed by an `sfence` so every store is visible before the transfer is
//! enqueued; elsewhere, and for the unaligned ends, it is an ordinary copy.

/// Copies `from` into `to` (of the same length) with non-temporal stores where the platform has
/// them.
///
/// # Panics
/// If the lengths differ, as `copy_from_slice` does: a bug in the caller's chunking.
pub(crate) fn copy_streaming(to: &mut [u8], from: &[u8]) {
    assert_eq!(
        to.len(),
        from.len(),
        "a staged chunk and its source differ in length"
    );
    #[cfg(target_arch = "x86_64")]
    {
        const LINE: usize = 64;
        let head = to.as_ptr().align_offset(16).min(to.len());
        let lines = (to.len() - head) / LINE;
        let tail = head + lines * LINE;
        to[..head].copy_from_slice(&from[..head]);
        // SAFETY: `to[head..tail]` and `from[head..tail]` are `lines` whole 64-byte lines inside
        // the two slices (checked equal in length above), `to` + `head` is 16-byte aligned
        // (`align_offset`) as `movntdq` requires, and `&mut` excludes any overlap.
        unsafe {
            stream_lines(
                to[head..tail].as_mut_ptr(),
                from[head..tail].as_ptr(),
                lines,
            )
        };
        to[tail..].copy_from_slice(&from[tail..]);
    }
    #[cfg(not(target_arch = "x86_64"))]
    to.copy_from_slice(from);
}

/// Copies `lines` 64-byte lines from `from` to the 16-byte aligned `to` with `movntdq`, then
/// fences.
///
/// # Safety
/// `to` must be valid for writes and `from` for reads of `lines * 64` bytes, not overlapping,
/// and `to` 16-byte aligned.
#[cfg(target_arch = "x86_64")]
unsafe fn stream_lines(to: *mut u8, from: *const u8, lines: usize) {
    use std::arch::x86_64::{__m128i, _mm_loadu_si128, _mm_sfence, _mm_stream_si128};
    for line in 0..lines {
        for part in 0..4 {
            let at = line * 64 + part * 16;
            // SAFETY: `at + 16 <= lines * 64`, inside both ranges (the caller's contract);
            // `from` needs no alignment for `loadu`, and `to + at` stays 16-byte aligned.
            unsafe {
                let value = _mm_loadu_si128(from.add(at).cast::<__m128i>());
                _mm_stream_si128(to.add(at).cast::<__m128i>(), value);
            }
        }
    }
    // Non-temporal stores are weakly ordered: fence them before the driver is told to read.
    // SAFETY: SSE is part of x86-64's base instruction set; `sfence` touches no memory.
    unsafe { _mm_sfence() };
}

#[cfg(test)]
mod tests {
    use super::copy_streaming;

    /// Every length around a line and every misalignment of both ends copy exactly.
    #[test]
    fn copies_every_length_and_alignment_exactly() {
        let source: Vec<u8> = (0..1024u32).map(|i| (i * 7 + 3) as u8).collect();
        for len in [0, 1, 15, 16, 17, 63, 64, 65, 127, 128, 129, 300, 777] {
            for to_skew in 0..17 {
                for from_skew in [0, 1, 5, 16] {
                    let mut target = vec![0xAAu8; len + to_skew + 8];
                    let from = &source[from_skew..from_skew + len];
                    copy_streaming(&mut target[to_skew..to_skew + len], from);
                    assert_eq!(&target[to_skew..to_skew + len], from, "len {len}");
                    assert!(target[..to_skew].iter().all(|&b| b == 0xAA));
                    assert!(target[to_skew + len..].iter().all(|&b| b == 0xAA));
                }
            }
        }
    }
}
