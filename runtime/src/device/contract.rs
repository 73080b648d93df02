//! The checks every device makes of the preconditions of its calls, shared so that one broken
//! precondition gives one [`DeviceError::Contract`] on every device.
//!
//! The runtime validates its input before anything reaches a device (`IoError` at the client;
//! ordering, liveness and capture rules in the server), so none of these checks fails under it.
//! They make [`Device`](super::Device) safe to call directly: a range outside its buffer, a
//! buffer or stream of another device, a launch that does not match its kernel, a graph whose
//! buffers were freed, are refused before the device touches memory. Each is a few comparisons
//! on values the call already holds; none reads device state or allocates unless it fails.

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};

use super::{BufferSlice, LaunchCount};
use crate::error::{ContractViolation, DeviceError};
use crate::ids::CommunicatorId;
use crate::kernel::{ElemType, FaultRecord, KernelDef, Scalar};

/// Bindings and indirect counts are addressed in 4-byte words on every device.
pub const WORD_BYTES: u64 = 4;
/// An indirect launch reads three `u32` workgroup counts.
pub const INDIRECT_COUNT_BYTES: u64 = 12;

/// The device a buffer belongs to: a number unique in this process, drawn when the device is
/// made. It only tells devices apart; nothing depends on its value (the simulator's schedule
/// and trace never see it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Owner(u64);

impl Owner {
    /// A new owner, distinct from every other of this process.
    pub fn fresh() -> Self {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        Self(NEXT.fetch_add(1, Ordering::Relaxed))
    }
}

/// What the checks need to know of a device's buffer.
pub trait CheckedBuffer {
    /// The device that allocated it.
    fn owner(&self) -> Owner;
    /// Its size as allocated (what ranges are checked against).
    fn len_bytes(&self) -> u64;
}

fn refused(operation: impl Into<String>, violation: ContractViolation) -> DeviceError {
    DeviceError::Contract {
        operation: operation.into(),
        violation,
    }
}

/// A kernel asked of a device's `compile`: every element type it uses is one the device's
/// [`Features`](crate::Features) support. A kernel that uses another (a half float the device
/// lacks) is refused as [`DeviceError::Compile`], its log the
/// [`KernelError::UnsupportedType`](crate::kernel::KernelError::UnsupportedType) message
/// naming the feature: no compiler can build it for this device.
pub fn compile(
    kernel: &KernelDef,
    properties: &crate::DeviceProperties,
) -> Result<(), DeviceError> {
    crate::kernel::validate_for_device(kernel, properties).map_err(|e| DeviceError::Compile {
        kernel: kernel.name.clone(),
        log: e.to_string(),
    })
}

/// `buffer` belongs to `owner` and holds `len` bytes from `offset` (an end past `u64::MAX`
/// does not fit).
fn fits<B: CheckedBuffer>(
    owner: Owner,
    buffer: &B,
    offset: u64,
    len: u64,
) -> Result<(), ContractViolation> {
    if buffer.owner() != owner {
        return Err(ContractViolation::ForeignBuffer);
    }
    let buffer_bytes = buffer.len_bytes();
    match offset.checked_add(len) {
        Some(end) if end <= buffer_bytes => Ok(()),
        _ => Err(ContractViolation::OutOfBounds {
            offset,
            len,
            buffer_bytes,
        }),
    }
}

/// Whether `buffer` belongs to the device `owner`: a device frees only its own buffers.
pub fn owns<B: CheckedBuffer>(owner: Owner, buffer: &B) -> bool {
    buffer.owner() == owner
}

/// A transfer of `len` bytes at `offset` of `buffer` (a write or a read).
pub fn range<B: CheckedBuffer>(
    owner: Owner,
    operation: &str,
    buffer: &B,
    offset: u64,
    len: u64,
) -> Result<(), DeviceError> {
    fits(owner, buffer, offset, len).map_err(|v| refused(operation, v))
}

/// A slice a transfer or a collective reads or writes.
pub fn slice<B: CheckedBuffer>(
    owner: Owner,
    operation: &str,
    slice: &BufferSlice<'_, B>,
) -> Result<(), DeviceError> {
    range(owner, operation, slice.buffer, slice.offset, slice.len)
}

/// A device-to-device copy of `src` to `dst` at `dst_offset`.
pub fn copy<B: CheckedBuffer>(
    owner: Owner,
    src: &BufferSlice<'_, B>,
    dst: &B,
    dst_offset: u64,
) -> Result<(), DeviceError> {
    slice(owner, "copy source", src)?;
    range(owner, "copy destination", dst, dst_offset, src.len)
}

/// An allocation of `bytes`.
pub fn allocation(bytes: u64) -> Result<(), DeviceError> {
    match bytes {
        0 => Err(refused("allocate", ContractViolation::EmptyAllocation)),
        _ => Ok(()),
    }
}

/// Stream `index` of a device that created `streams` streams; returns the index to use.
pub fn stream(operation: &str, index: u32, streams: usize) -> Result<usize, DeviceError> {
    let at = index as usize;
    if at < streams {
        Ok(at)
    } else {
        Err(refused(
            operation,
            ContractViolation::UnknownStream { index },
        ))
    }
}

/// A launch of `kernel`, compiled `checked` or not: one binding per declared binding (then the
/// fault record, of at least [`FaultRecord::BYTES`], when checked), each inside its buffer and
/// starting on a word; parameters of the declared types; indirect counts of three words.
pub fn launch<B: CheckedBuffer>(
    owner: Owner,
    kernel: &KernelDef,
    checked: bool,
    count: &LaunchCount<'_, B>,
    bindings: &[BufferSlice<'_, B>],
    params: &[Scalar],
) -> Result<(), DeviceError> {
    let refuse =
        |part: &str, violation| refused(format!("launch of `{}`{part}", kernel.name), violation);
    let declared = kernel.bindings.len();
    let expected = declared + usize::from(checked);
    if bindings.len() != expected {
        let given = bindings.len();
        return Err(refuse(
            "",
            ContractViolation::BindingCount { given, expected },
        ));
    }
    if !params
        .iter()
        .map(|p| p.elem_type())
        .eq(kernel.params.iter().copied())
    {
        let given = params.iter().map(|p| p.elem_type()).collect();
        let declared = kernel.params.clone();
        return Err(refuse(
            "",
            ContractViolation::ParamTypes { given, declared },
        ));
    }
    for (index, binding) in bindings.iter().enumerate() {
        words(owner, binding, 0).map_err(|v| refuse(&format!(" binding {index}"), v))?;
    }
    if checked {
        let record = &bindings[declared];
        words(owner, record, FaultRecord::BYTES as u64).map_err(|v| refuse(" fault record", v))?;
    }
    if let LaunchCount::Dynamic(counts) = count {
        words(owner, counts, INDIRECT_COUNT_BYTES).map_err(|v| refuse(" workgroup counts", v))?;
    }
    Ok(())
}

/// A slice read as words: inside its buffer, starting on a word, at least `min_bytes` long.
fn words<B: CheckedBuffer>(
    owner: Owner,
    slice: &BufferSlice<'_, B>,
    min_bytes: u64,
) -> Result<(), ContractViolation> {
    fits(owner, slice.buffer, slice.offset, slice.len)?;
    if !slice.offset.is_multiple_of(WORD_BYTES) {
        return Err(ContractViolation::Misaligned {
            offset: slice.offset,
            alignment_bytes: WORD_BYTES,
        });
    }
    if slice.len < min_bytes {
        return Err(ContractViolation::TooShort {
            len: slice.len,
            min_bytes,
        });
    }
    Ok(())
}

/// An all-reduce of `elem`s from `src` into `dst`: both inside this device's buffers, of equal
/// length in whole elements, the same range or disjoint.
pub fn all_reduce<B: CheckedBuffer>(
    owner: Owner,
    src: &BufferSlice<'_, B>,
    dst: &BufferSlice<'_, B>,
    elem: ElemType,
) -> Result<(), DeviceError> {
    slice(owner, "all_reduce source", src)?;
    slice(owner, "all_reduce destination", dst)?;
    let elem_bytes = elem.size_bytes() as u64;
    let same = std::ptr::eq(src.buffer, dst.buffer);
    let overlap = same && src.offset < dst.offset + dst.len && dst.offset < src.offset + src.len;
    let identical = same && src.offset == dst.offset;
    if src.len != dst.len || !src.len.is_multiple_of(elem_bytes) || (overlap && !identical) {
        return Err(refused(
            "all_reduce",
            ContractViolation::ReduceRanges {
                src_offset: src.offset,
                src_bytes: src.len,
                dst_offset: dst.offset,
                dst_bytes: dst.len,
                elem_bytes,
            },
        ));
    }
    Ok(())
}

/// A communicator over `peers` created on device `ordinal` of `device_count`: every peer exists
/// and this device is one of them. Returns this device's rank.
pub fn communicator_peers(
    ordinal: u32,
    device_count: u32,
    peers: &[u32],
) -> Result<usize, DeviceError> {
    let rank = peers.iter().position(|&p| p == ordinal);
    match rank {
        Some(rank) if peers.iter().all(|&p| p < device_count) => Ok(rank),
        _ => Err(refused(
            "create_communicator",
            ContractViolation::Peers {
                ordinal,
                peers: peers.to_vec(),
                device_count,
            },
        )),
    }
}

/// A collective on communicator `id`, which this device did not create.
pub fn unknown_communicator(operation: &str, id: CommunicatorId) -> DeviceError {
    refused(
        operation,
        ContractViolation::UnknownCommunicator { id: id.0 },
    )
}

/// Ids of the buffers a device holds, so that a graph replayed after one of its buffers was
/// freed is refused ([`LiveBuffers::replay`]) instead of reaching freed memory.
#[derive(Debug, Default)]
pub struct LiveBuffers(HashSet<u64>);

impl LiveBuffers {
    /// Records buffer `id` as allocated.
    pub fn allocated(&mut self, id: u64) {
        self.0.insert(id);
    }

    /// Records buffer `id` as freed: graphs that use it can no longer replay.
    pub fn freed(&mut self, id: u64) {
        self.0.remove(&id);
    }

    /// A replay of a graph captured on device `captured_on` that uses the buffers `ids`.
    pub fn replay(
        &self,
        owner: Owner,
        captured_on: Owner,
        ids: impl IntoIterator<Item = u64>,
    ) -> Result<(), DeviceError> {
        replay(owner, captured_on, || {
            ids.into_iter().all(|id| self.0.contains(&id))
        })
    }
}

/// A replay of a graph captured on device `captured_on`, whose buffers are all live when
/// `all_live` says so (asked only of this device's graphs).
pub fn replay(
    owner: Owner,
    captured_on: Owner,
    all_live: impl FnOnce() -> bool,
) -> Result<(), DeviceError> {
    if captured_on != owner {
        return Err(refused("replay", ContractViolation::ForeignGraph));
    }
    match all_live() {
        true => Ok(()),
        false => Err(refused("replay", ContractViolation::FreedBuffer)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct Buf(Owner, u64);

    impl CheckedBuffer for Buf {
        fn owner(&self) -> Owner {
            self.0
        }
        fn len_bytes(&self) -> u64 {
            self.1
        }
    }

    fn out_of_bounds(offset: u64, len: u64) -> Result<(), DeviceError> {
        Err(refused(
            "write",
            ContractViolation::OutOfBounds {
                offset,
                len,
                buffer_bytes: 64,
            },
        ))
    }

    #[test]
    fn ranges_fit_up_to_the_last_byte_and_never_overflow() {
        let owner = Owner::fresh();
        let buf = Buf(owner, 64);
        assert_eq!(range(owner, "write", &buf, 0, 64), Ok(()));
        assert_eq!(range(owner, "write", &buf, 64, 0), Ok(()));
        assert_eq!(range(owner, "write", &buf, 60, 5), out_of_bounds(60, 5));
        assert_eq!(range(owner, "write", &buf, 65, 0), out_of_bounds(65, 0));
        assert_eq!(
            range(owner, "write", &buf, u64::MAX, 2),
            out_of_bounds(u64::MAX, 2)
        );
        assert_eq!(
            range(Owner::fresh(), "write", &buf, 0, 4),
            Err(refused("write", ContractViolation::ForeignBuffer))
        );
    }

    #[test]
    fn all_reduce_takes_the_same_range_or_disjoint_ones_of_whole_elements() {
        let owner = Owner::fresh();
        let (a, b) = (Buf(owner, 64), Buf(owner, 64));
        let at = |buffer, offset, len| BufferSlice {
            buffer,
            offset,
            len,
        };
        let f32 = ElemType::F32;
        assert_eq!(
            all_reduce(owner, &at(&a, 0, 32), &at(&a, 0, 32), f32),
            Ok(())
        );
        assert_eq!(
            all_reduce(owner, &at(&a, 0, 32), &at(&a, 32, 32), f32),
            Ok(())
        );
        assert_eq!(
            all_reduce(owner, &at(&a, 0, 32), &at(&b, 16, 32), f32),
            Ok(())
        );
        let refused_ranges = |src: BufferSlice<'_, Buf>, dst: BufferSlice<'_, Buf>| {
            matches!(
                all_reduce(owner, &src, &dst, f32),
                Err(DeviceError::Contract {
                    violation: ContractViolation::ReduceRanges { .. },
                    ..
                })
            )
        };
        assert!(refused_ranges(at(&a, 0, 32), at(&a, 16, 32)), "overlap");
        assert!(refused_ranges(at(&a, 0, 32), at(&b, 0, 28)), "lengths");
        assert!(
            refused_ranges(at(&a, 0, 30), at(&b, 0, 30)),
            "partial element"
        );
    }

    #[test]
    fn communicators_include_this_device_and_only_existing_ones() {
        assert_eq!(communicator_peers(1, 2, &[0, 1]), Ok(1));
        let refused = |peers: &[u32]| {
            Err(refused(
                "create_communicator",
                ContractViolation::Peers {
                    ordinal: 1,
                    peers: peers.to_vec(),
                    device_count: 2,
                },
            ))
        };
        assert_eq!(communicator_peers(1, 2, &[0]), refused(&[0]));
        assert_eq!(communicator_peers(1, 2, &[1, 2]), refused(&[1, 2]));
    }

    #[test]
    fn a_replay_needs_every_buffer_of_its_graph_live() {
        let owner = Owner::fresh();
        let mut live = LiveBuffers::default();
        live.allocated(1);
        live.allocated(2);
        assert_eq!(live.replay(owner, owner, [1, 2]), Ok(()));
        assert_eq!(
            live.replay(owner, Owner::fresh(), [1, 2]),
            Err(refused("replay", ContractViolation::ForeignGraph))
        );
        live.freed(2);
        assert_eq!(
            live.replay(owner, owner, [1, 2]),
            Err(refused("replay", ContractViolation::FreedBuffer))
        );
    }
}
