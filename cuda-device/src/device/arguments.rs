//! A launch's arguments as `cuLaunchKernel` takes them: one 8-byte slot per parameter of the
//! entry point, in the order `lower.rs` declares them, and an array of pointers to the slots.
//! The driver reads each parameter's size (4 or 8 bytes) from the start of its slot.

use std::ffi::c_void;

use lockstep::device::BufferSlice;
use lockstep::kernel::Scalar;

use super::{CudaBuffer, CudaKernel, elements};

/// Slots kept on the stack; kernels with more parameters use the heap.
const INLINE_PARAMS: usize = 32;

/// The slots of one launch, filled in declaration order: the first `INLINE_PARAMS` on the
/// stack, the rest in `spilled` (a slot's place does not matter, only its pointer's).
pub(super) struct ArgumentSlots {
    inline: [u64; INLINE_PARAMS],
    spilled: Vec<u64>,
    len: usize,
}

impl ArgumentSlots {
    /// The slots of a launch of `kernel`: per declared binding its device address and its
    /// length in elements, each parameter's bits (a half float's in the low 16 bits: the
    /// driver reads 2 bytes of the slot), in checked mode the fault record's address and the
    /// kernel id, and last the address of a dynamic count (0 for a static one).
    ///
    /// `bindings` holds the declared bindings then, in checked mode, the fault record, as the
    /// contract check before it ensured.
    pub fn of_launch(
        kernel: &CudaKernel,
        bindings: &[BufferSlice<'_, CudaBuffer>],
        params: &[Scalar],
        count_ptr: u64,
    ) -> Self {
        let checked = kernel.options.checks.is_checked();
        let declared = kernel.def.bindings.len();
        let len = 2 * declared + params.len() + 2 * usize::from(checked) + 1;
        let mut slots = ArgumentSlots::with_capacity(len);
        for (slice, decl) in bindings[..declared].iter().zip(&kernel.def.bindings) {
            slots.push(slice.buffer.at(slice.offset));
            slots.push(u64::from(elements(slice.len, decl.elem)));
        }
        params
            .iter()
            .for_each(|p| slots.push(u64::from(p.to_bits())));
        if checked {
            let record = &bindings[declared];
            slots.push(record.buffer.at(record.offset));
            slots.push(u64::from(kernel.options.kernel_id));
        }
        slots.push(count_ptr);
        debug_assert_eq!(slots.len, len, "one slot per parameter of the entry point");
        slots
    }

    fn with_capacity(len: usize) -> Self {
        ArgumentSlots {
            inline: [0; INLINE_PARAMS],
            spilled: Vec::with_capacity(len.saturating_sub(INLINE_PARAMS)),
            len: 0,
        }
    }

    fn push(&mut self, value: u64) {
        match self.inline.get_mut(self.len) {
            Some(slot) => *slot = value,
            None => self.spilled.push(value),
        }
        self.len += 1;
    }

    /// Runs `launch` with a pointer to each slot, in order (the `kernelParams` array); the
    /// pointers are valid for the call only.
    pub fn with_pointers<R>(&mut self, launch: impl FnOnce(&mut [*mut c_void]) -> R) -> R {
        let inline = self.len.min(INLINE_PARAMS);
        let values = self.inline[..inline].iter_mut().chain(&mut self.spilled);
        let mut on_stack = [std::ptr::null_mut::<c_void>(); INLINE_PARAMS];
        let mut on_heap = Vec::new();
        let pointers: &mut [*mut c_void] = if self.len <= INLINE_PARAMS {
            &mut on_stack[..self.len]
        } else {
            on_heap.resize(self.len, std::ptr::null_mut());
            &mut on_heap
        };
        for (pointer, value) in pointers.iter_mut().zip(values) {
            *pointer = (value as *mut u64).cast();
        }
        launch(pointers)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The values the pointers of `with_pointers` point at, in order.
    fn pointed_at(values: &[u64]) -> Vec<u64> {
        let mut slots = ArgumentSlots::with_capacity(values.len());
        values.iter().for_each(|&v| slots.push(v));
        slots.with_pointers(|pointers| {
            let read = |p: &*mut c_void| {
                // SAFETY: each pointer addresses a slot of `slots`, alive for this call.
                unsafe { *p.cast::<u64>() }
            };
            pointers.iter().map(read).collect()
        })
    }

    #[test]
    fn each_pointer_addresses_its_slot_on_the_stack_and_past_it() {
        for len in [
            0,
            1,
            INLINE_PARAMS - 1,
            INLINE_PARAMS,
            INLINE_PARAMS + 1,
            3 * INLINE_PARAMS,
        ] {
            let values: Vec<u64> = (0..len as u64).map(|i| i * 0x1_0000_0001 + 7).collect();
            assert_eq!(pointed_at(&values), values, "{len} slots");
        }
    }
}
