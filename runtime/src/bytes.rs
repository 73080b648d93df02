//! Host bytes moving to and from a device.

use std::ops::{Deref, DerefMut};

/// An owned, contiguous run of host bytes: what `create` takes and `read` returns.
#[derive(Clone, Default, PartialEq, Eq, Hash)]
pub struct Bytes(Vec<u8>);

impl Bytes {
    pub fn from_bytes_vec(bytes: Vec<u8>) -> Self {
        Self(bytes)
    }

    /// Copies a slice of plain elements (`f32`, `u32`, …) into bytes, little endian.
    pub fn from_elems<T: bytemuck::NoUninit>(elems: &[T]) -> Self {
        Self(bytemuck::cast_slice(elems).to_vec())
    }

    /// Reinterprets the bytes as elements.
    ///
    /// # Panics
    /// If the length is not a multiple of `size_of::<T>()`; read with the element type you wrote.
    pub fn to_elems<T: bytemuck::AnyBitPattern>(&self) -> Vec<T> {
        let size = std::mem::size_of::<T>();
        assert!(
            self.0.len().is_multiple_of(size),
            "{} bytes are not a whole number of {size}-byte elements",
            self.0.len()
        );
        self.0
            .chunks_exact(size)
            .map(bytemuck::pod_read_unaligned)
            .collect()
    }

    pub fn into_vec(self) -> Vec<u8> {
        self.0
    }
}

impl std::fmt::Debug for Bytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        const SHOWN: usize = 16;
        write!(f, "Bytes({} bytes", self.0.len())?;
        if !self.0.is_empty() {
            write!(f, ": {:02x?}", &self.0[..self.0.len().min(SHOWN)])?;
            if self.0.len() > SHOWN {
                f.write_str("…")?;
            }
        }
        f.write_str(")")
    }
}

impl Deref for Bytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.0
    }
}

impl DerefMut for Bytes {
    fn deref_mut(&mut self) -> &mut [u8] {
        &mut self.0
    }
}

impl From<Vec<u8>> for Bytes {
    fn from(v: Vec<u8>) -> Self {
        Self(v)
    }
}

impl From<&[u8]> for Bytes {
    fn from(v: &[u8]) -> Self {
        Self(v.to_vec())
    }
}

/// Bytes at least this large are freed off the thread that is done with them (see
/// [`free_in_background`]).
#[cfg(not(loom))]
const BACKGROUND_FREE_BYTES_MIN: usize = 16 << 20;
/// Large buffers waiting to be freed; past this many, the caller frees its own.
#[cfg(not(loom))]
const BACKGROUND_FREE_QUEUE: usize = 4;

/// Frees `bytes`, handing large buffers to a helper thread. Returning tens of MiB to the OS
/// takes milliseconds (about 15 ms for 256 MiB on a virtualised H200 host), which would
/// otherwise stall the device's actor after every large write, before any later task of any
/// stream runs. The queue is bounded, so memory is never freed much later than it would be.
#[cfg(not(loom))]
pub(crate) fn free_in_background(bytes: Bytes) {
    use std::sync::mpsc::{SyncSender, TrySendError, sync_channel};
    use std::sync::{Mutex, OnceLock};

    static FREER: OnceLock<Option<Mutex<SyncSender<Bytes>>>> = OnceLock::new();
    if bytes.len() < BACKGROUND_FREE_BYTES_MIN {
        return;
    }
    let freer = FREER.get_or_init(|| {
        let (tx, rx) = sync_channel::<Bytes>(BACKGROUND_FREE_QUEUE);
        std::thread::Builder::new()
            .name("lockstep-free".to_owned())
            .spawn(move || rx.into_iter().for_each(drop))
            .ok()
            .map(|_| Mutex::new(tx))
    });
    if let Some(tx) = freer {
        let tx = tx.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        // Full or gone: `bytes` comes back and is freed here.
        if let Err(TrySendError::Full(bytes) | TrySendError::Disconnected(bytes)) =
            tx.try_send(bytes)
        {
            drop(bytes);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// More large frees than the bounded queue holds must neither block forever nor panic: the
    /// sender waits for the freeing thread to catch up.
    #[cfg(not(loom))]
    #[test]
    fn a_full_background_free_queue_applies_backpressure_without_deadlock() {
        for _ in 0..2 * BACKGROUND_FREE_QUEUE {
            free_in_background(Bytes::from(vec![1u8; BACKGROUND_FREE_BYTES_MIN]));
        }
        free_in_background(Bytes::from(vec![1u8; 16]));
    }

    #[test]
    fn elements_round_trip() {
        let b = Bytes::from_elems(&[1.5f32, -2.0]);
        assert_eq!(b.len(), 8);
        assert_eq!(b.to_elems::<f32>(), vec![1.5, -2.0]);
    }

    #[test]
    fn debug_shows_length_and_prefix() {
        assert_eq!(
            format!("{:?}", Bytes::from(vec![1, 2])),
            "Bytes(2 bytes: [01, 02])"
        );
    }
}
