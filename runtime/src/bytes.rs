//! Host bytes moving to and from a device.
//!
//! A [`Bytes`] is one of three things, all read through `Deref<Target = [u8]>`:
//! - heap memory (what `from_elems` and `From<Vec<u8>>` give, and reads on devices without
//!   pooled host memory), shared without a copy while a recorder hashes a large write;
//! - host memory a device lent: page-locked blocks ([`ComputeClient::staging`], which its
//!   transfers read in place), or the pooled block a read landed in
//!   ([`HostPool`](crate::HostPool)), which returns to its pool when the bytes drop;
//! - a device read deferred to first access ([`ComputeClient::read_lazy`]).
//!
//! [`ComputeClient::staging`]: crate::ComputeClient::staging
//! [`ComputeClient::read_lazy`]: crate::ComputeClient::read_lazy

use std::any::Any;
use std::ops::{Deref, DerefMut};
use std::panic::{RefUnwindSafe, UnwindSafe};
use std::sync::{Arc, Mutex, OnceLock};

use crate::error::ServerError;

/// An owned, contiguous run of host bytes: what `create` takes and `read` returns.
///
/// Equality and hashing compare contents (a lazy `Bytes` is read first). Cloning pinned bytes
/// gives heap bytes; cloning lazy bytes shares the one deferred read.
pub struct Bytes(Repr);

enum Repr {
    Host(Vec<u8>),
    /// Heap bytes shared with a recorder's writer thread, which hashes them off the caller's
    /// path (`Bytes::share`).
    #[cfg_attr(
        loom,
        allow(dead_code, reason = "recording is left out of loom builds")
    )]
    Shared(Arc<Vec<u8>>),
    Pinned(Box<dyn PinnedMemory>),
    #[cfg_attr(
        loom,
        allow(
            dead_code,
            reason = "lazy reads come from the client, which loom builds leave out"
        )
    )]
    Lazy(Arc<Lazy>),
}

/// Where the bytes of a [`Bytes`] live.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AllocationProperty {
    /// Ordinary heap memory.
    Native,
    /// Page-locked host memory of a device (see [`PinnedMemory`]).
    Pinned,
    /// Still on the device: a lazy read not yet accessed.
    Device,
}

/// Page-locked host memory that a device allocated for fast transfers; devices implement it
/// and return it from [`Device::alloc_pinned_host`](crate::Device::alloc_pinned_host) wrapped
/// in [`Bytes::from_pinned`]. Its owner frees it when dropped. A device recognises its own
/// memory in [`Device::write_bytes`](crate::Device::write_bytes) by downcasting (`Any`).
pub trait PinnedMemory: Any + Send + Sync + RefUnwindSafe + UnwindSafe {
    /// The memory, read-only.
    fn as_slice(&self) -> &[u8];
    /// The memory, to fill before a write.
    fn as_mut_slice(&mut self) -> &mut [u8];
    /// Keeps the memory from being reused once it is dropped, until the returned
    /// [`HeldBytes`] has read it: how the recorder hashes a large pinned write off the calling
    /// thread. `None` (the default) if it cannot, or is held already.
    fn hold(&mut self) -> Option<Arc<dyn HeldBytes>> {
        None
    }
}

/// Pinned memory held past its drop ([`PinnedMemory::hold`]) for a reader on another thread.
pub trait HeldBytes: Send + Sync {
    /// Waits until the memory's owner dropped it, runs `read` on its bytes (which nothing
    /// writes any more), then lets the memory be reused. Called at most once.
    fn read_released(&self, read: &mut dyn FnMut(&[u8]));
}

/// Produces the bytes of a deferred read; runs once, on the thread of the first access.
pub(crate) type Loader = Box<dyn FnOnce() -> Result<Bytes, ServerError> + Send>;

/// A deferred read. **Invariant:** `loader` runs at most once, inside `value`'s
/// initialisation; `value` then holds its outcome for good, never lazy bytes itself.
struct Lazy {
    len: usize,
    loader: Mutex<Option<Loader>>,
    value: OnceLock<Result<Bytes, ServerError>>,
}

impl Lazy {
    fn get(&self) -> &Result<Bytes, ServerError> {
        self.value.get_or_init(|| {
            let loader = self
                .loader
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .take();
            match loader {
                Some(load) => load(),
                // Only if an earlier first access panicked inside the loader.
                None => Err(ServerError::ActorGone {
                    reason: "an earlier access to this lazy read panicked".to_owned(),
                }),
            }
        })
    }
}

impl Bytes {
    /// Takes ownership of heap bytes (no copy).
    pub fn from_bytes_vec(bytes: Vec<u8>) -> Self {
        Self(Repr::Host(bytes))
    }

    /// Copies a slice of plain elements (`f32`, `u32`, …) into bytes, little endian.
    pub fn from_elems<T: bytemuck::NoUninit>(elems: &[T]) -> Self {
        Self::from_bytes_vec(bytemuck::cast_slice(elems).to_vec())
    }

    /// Wraps device-pinned host memory (for device implementations).
    pub fn from_pinned(memory: Box<dyn PinnedMemory>) -> Self {
        Self(Repr::Pinned(memory))
    }

    /// Bytes of length `len` that `loader` produces on first access.
    #[cfg_attr(
        loom,
        allow(
            dead_code,
            reason = "lazy reads come from the client, which loom builds leave out"
        )
    )]
    pub(crate) fn lazy(len: usize, loader: Loader) -> Self {
        Self(Repr::Lazy(Arc::new(Lazy {
            len,
            loader: Mutex::new(Some(loader)),
            value: OnceLock::new(),
        })))
    }

    /// Where the bytes live now. A lazy read, once accessed, reports where its read landed
    /// (`Native` if it failed).
    pub fn property(&self) -> AllocationProperty {
        match &self.0 {
            Repr::Host(_) | Repr::Shared(_) => AllocationProperty::Native,
            Repr::Pinned(_) => AllocationProperty::Pinned,
            Repr::Lazy(lazy) => match lazy.value.get() {
                None => AllocationProperty::Device,
                Some(Ok(bytes)) => bytes.property(),
                Some(Err(_)) => AllocationProperty::Native,
            },
        }
    }

    /// The device-pinned memory behind these bytes, if they are pinned.
    pub fn pinned(&self) -> Option<&dyn PinnedMemory> {
        match &self.0 {
            Repr::Pinned(memory) => Some(&**memory),
            _ => None,
        }
    }

    /// Mutable access to the device-pinned memory behind these bytes, if they are pinned.
    pub fn pinned_mut(&mut self) -> Option<&mut dyn PinnedMemory> {
        match &mut self.0 {
            Repr::Pinned(memory) => Some(&mut **memory),
            _ => None,
        }
    }

    /// Length in bytes, known without performing a deferred read.
    pub fn len(&self) -> usize {
        match &self.0 {
            Repr::Host(v) => v.len(),
            Repr::Shared(v) => v.len(),
            Repr::Pinned(memory) => memory.as_slice().len(),
            Repr::Lazy(lazy) => lazy.len,
        }
    }

    /// Whether there are no bytes (known without performing a deferred read).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The bytes, performing a deferred read now if it has not run yet.
    ///
    /// # Errors
    /// The deferred read's failure (the one `read_tensor_async` would have returned); every
    /// later call returns it again.
    pub fn materialize(&self) -> Result<&[u8], ServerError> {
        match &self.0 {
            Repr::Host(v) => Ok(v),
            Repr::Shared(v) => Ok(v),
            Repr::Pinned(memory) => Ok(memory.as_slice()),
            Repr::Lazy(lazy) => lazy.get().as_deref().map_err(Clone::clone),
        }
    }

    /// Reinterprets the bytes as elements.
    ///
    /// # Panics
    /// If the length is not a multiple of `size_of::<T>()`; read with the element type you wrote.
    pub fn to_elems<T: bytemuck::AnyBitPattern>(&self) -> Vec<T> {
        let size = std::mem::size_of::<T>();
        assert!(
            self.len().is_multiple_of(size),
            "{} bytes are not a whole number of {size}-byte elements",
            self.len()
        );
        self.chunks_exact(size)
            .map(bytemuck::pod_read_unaligned)
            .collect()
    }

    /// The bytes as a `Vec`, moved for heap bytes and copied otherwise; a deferred read is
    /// performed now.
    ///
    /// # Panics
    /// If a deferred read fails (as `Deref` does): call [`materialize`](Self::materialize) first to
    /// get the error instead.
    pub fn into_vec(self) -> Vec<u8> {
        match self.0 {
            Repr::Host(v) => v,
            Repr::Shared(v) => Arc::try_unwrap(v).unwrap_or_else(|shared| (*shared).clone()),
            Repr::Pinned(memory) => memory.as_slice().to_vec(),
            Repr::Lazy(_) => self.to_vec(),
        }
    }

    /// Heap bytes shared without a copy, turning these into shared bytes; `None` for pinned
    /// or lazy bytes. The recorder hashes a large write's bytes on its own thread so.
    #[cfg_attr(
        loom,
        allow(dead_code, reason = "recording is left out of loom builds")
    )]
    pub(crate) fn share(&mut self) -> Option<Arc<Vec<u8>>> {
        if let Repr::Host(v) = &mut self.0 {
            self.0 = Repr::Shared(Arc::new(std::mem::take(v)));
        }
        match &self.0 {
            Repr::Shared(v) => Some(v.clone()),
            _ => None,
        }
    }

    /// The bytes of a lazy read, performed now on this thread (its own if no clone shares
    /// them, else a heap copy); other bytes as they are.
    ///
    /// # Errors
    /// The deferred read's failure, the same on every access.
    #[cfg_attr(
        loom,
        allow(
            dead_code,
            reason = "lazy reads come from the client, which loom builds leave out"
        )
    )]
    pub(crate) fn into_resident(self) -> Result<Self, ServerError> {
        let Repr::Lazy(lazy) = self.0 else {
            return Ok(self);
        };
        lazy.get().as_ref().map_err(Clone::clone)?;
        Ok(match Arc::try_unwrap(lazy) {
            Ok(only) => match only.value.into_inner() {
                Some(Ok(bytes)) => bytes,
                _ => unreachable!("the read ran and succeeded: checked above"),
            },
            Err(shared) => Self::from_bytes_vec(lazy_bytes(&shared).to_vec()),
        })
    }

    /// Drops the bytes; large heap buffers and all pinned memory are freed on a helper thread
    /// (see the module's background free), so the caller does not stall on the OS or the driver.
    pub fn free_in_background(self) {
        free_in_background(self);
    }
}

/// The bytes of a lazy read, read now if needed.
///
/// # Panics
/// If the deferred read fails, with the error: call [`Bytes::materialize`] first to handle it.
fn lazy_bytes(lazy: &Lazy) -> &[u8] {
    match lazy.get() {
        Ok(bytes) => bytes,
        Err(err) => panic!(
            "lazy read failed at first access: {err}; call Bytes::materialize to handle read errors"
        ),
    }
}

impl Default for Bytes {
    fn default() -> Self {
        Self::from_bytes_vec(Vec::new())
    }
}

impl Clone for Bytes {
    fn clone(&self) -> Self {
        match &self.0 {
            Repr::Host(v) => Self::from_bytes_vec(v.clone()),
            Repr::Shared(v) => Self(Repr::Shared(v.clone())),
            Repr::Pinned(memory) => Self::from_bytes_vec(memory.as_slice().to_vec()),
            Repr::Lazy(lazy) => Self(Repr::Lazy(lazy.clone())),
        }
    }
}

impl PartialEq for Bytes {
    fn eq(&self, other: &Self) -> bool {
        **self == **other
    }
}

impl Eq for Bytes {}

impl std::hash::Hash for Bytes {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        (**self).hash(state);
    }
}

impl std::fmt::Debug for Bytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        const SHOWN: usize = 16;
        write!(f, "Bytes({} bytes", self.len())?;
        let shown: &[u8] = match &self.0 {
            Repr::Lazy(lazy) => match lazy.value.get() {
                Some(Ok(bytes)) => &bytes[..],
                Some(Err(_)) => return f.write_str(", lazy read failed)"),
                None => return f.write_str(", lazy)"),
            },
            Repr::Pinned(memory) => {
                f.write_str(", pinned")?;
                memory.as_slice()
            }
            Repr::Host(v) => v,
            Repr::Shared(v) => v,
        };
        if !shown.is_empty() {
            write!(f, ": {:02x?}", &shown[..shown.len().min(SHOWN)])?;
            if shown.len() > SHOWN {
                f.write_str("…")?;
            }
        }
        f.write_str(")")
    }
}

/// Reads lazy bytes on first access.
///
/// # Panics
/// If the deferred read fails, with its error: call [`Bytes::materialize`] first to handle it.
impl Deref for Bytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match &self.0 {
            Repr::Host(v) => v,
            Repr::Shared(v) => v,
            Repr::Pinned(memory) => memory.as_slice(),
            Repr::Lazy(lazy) => lazy_bytes(lazy),
        }
    }
}

/// Lazy bytes are read first and become heap bytes of their own.
impl DerefMut for Bytes {
    fn deref_mut(&mut self) -> &mut [u8] {
        if let Repr::Lazy(lazy) = &self.0 {
            let bytes = lazy_bytes(lazy).to_vec();
            self.0 = Repr::Host(bytes);
        }
        match &mut self.0 {
            Repr::Host(v) => v,
            // Copied first if the recorder still holds them.
            Repr::Shared(v) => Arc::make_mut(v).as_mut_slice(),
            Repr::Pinned(memory) => memory.as_mut_slice(),
            Repr::Lazy(_) => unreachable!("lazy bytes were replaced above"),
        }
    }
}

impl From<Vec<u8>> for Bytes {
    fn from(v: Vec<u8>) -> Self {
        Self::from_bytes_vec(v)
    }
}

impl From<&[u8]> for Bytes {
    fn from(v: &[u8]) -> Self {
        Self::from_bytes_vec(v.to_vec())
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

    static FREER: OnceLock<Option<Mutex<SyncSender<Bytes>>>> = OnceLock::new();
    // Pinned memory always goes: its owner may wait for the copy that reads it.
    if bytes.len() < BACKGROUND_FREE_BYTES_MIN && bytes.pinned().is_none() {
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

/// Under loom, no helper thread: the bytes are dropped here.
#[cfg(loom)]
pub(crate) fn free_in_background(bytes: Bytes) {
    drop(bytes);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Which pinned bytes were dropped, on which thread, in order; and whether the thread
    /// dropping the blocker may go on.
    #[cfg(not(loom))]
    #[derive(Default)]
    struct Drops {
        seen: Vec<(usize, std::thread::ThreadId, Option<String>)>,
        gate_open: bool,
    }

    /// Shared by the test and the bytes it watches.
    #[cfg(not(loom))]
    type Watch = Arc<(Mutex<Drops>, std::sync::Condvar)>;

    /// Pinned bytes whose drop is recorded in `watch`; the blocker's drop then waits there
    /// until the test opens the gate.
    #[cfg(not(loom))]
    struct Watched {
        byte: [u8; 1],
        id: usize,
        blocks: bool,
        watch: Watch,
    }

    #[cfg(not(loom))]
    impl PinnedMemory for Watched {
        fn as_slice(&self) -> &[u8] {
            &self.byte
        }
        fn as_mut_slice(&mut self) -> &mut [u8] {
            &mut self.byte
        }
    }

    #[cfg(not(loom))]
    impl Drop for Watched {
        fn drop(&mut self) {
            let (drops, changed) = &*self.watch;
            let mut drops = drops.lock().unwrap();
            let thread = std::thread::current();
            let name = thread.name().map(str::to_owned);
            drops.seen.push((self.id, thread.id(), name));
            changed.notify_all();
            while self.blocks && !drops.gate_open {
                drops = changed.wait(drops).unwrap();
            }
        }
    }

    /// Waits until `ready` holds of the drops (a minute only bounds a hang) and returns them.
    #[cfg(not(loom))]
    fn drops_once(
        watch: &Watch,
        ready: impl Fn(&Drops) -> bool,
    ) -> Vec<(usize, std::thread::ThreadId, Option<String>)> {
        let (drops, changed) = &**watch;
        let timeout = std::time::Duration::from_secs(60);
        let (drops, _) = changed
            .wait_timeout_while(drops.lock().unwrap(), timeout, |d| !ready(d))
            .unwrap();
        assert!(
            ready(&drops),
            "still waiting after a minute: {:?}",
            drops.seen
        );
        drops.seen.clone()
    }

    /// The queue to the freeing thread holds `BACKGROUND_FREE_QUEUE` bytes; past it the caller
    /// frees its own at once instead of waiting, so no call blocks however far behind the
    /// freeing thread is, and every byte handed over is freed once. (No other test of this
    /// crate frees in the background: none drives a device, so the queue is this test's.)
    #[cfg(not(loom))]
    #[test]
    fn past_a_full_background_queue_the_caller_frees_its_own() {
        let watch = Watch::default();
        let bytes = |id, blocks| {
            let watch = watch.clone();
            let byte = [0];
            Bytes::from_pinned(Box::new(Watched {
                byte,
                id,
                blocks,
                watch,
            }))
        };
        // The freeing thread takes the blocker off the queue and waits in its drop.
        free_in_background(bytes(0, true));
        let blocked = drops_once(&watch, |d| d.seen.len() == 1);
        let (_, freer, name) = &blocked[0];
        assert_eq!(name.as_deref(), Some("lockstep-free"));
        // With nothing draining it, the queue takes exactly its capacity, freeing nothing...
        for id in 1..=BACKGROUND_FREE_QUEUE {
            free_in_background(bytes(id, false));
        }
        assert_eq!(watch.0.lock().unwrap().seen.len(), 1, "queued, not freed");
        // ...and the next bytes are freed by the caller, before the call returns.
        free_in_background(bytes(99, false));
        let here = std::thread::current().id();
        let (id, thread, _) = watch.0.lock().unwrap().seen[1].clone();
        assert_eq!(
            (id, thread),
            (99, here),
            "the caller freed the bytes past the queue"
        );
        // Once the freeing thread goes on, it frees the queued bytes, in order.
        watch.0.lock().unwrap().gate_open = true;
        watch.1.notify_all();
        let all = drops_once(&watch, |d| d.seen.len() == BACKGROUND_FREE_QUEUE + 2);
        let queued: Vec<_> = all[2..]
            .iter()
            .map(|(id, thread, _)| (*id, *thread))
            .collect();
        let expected: Vec<_> = (1..=BACKGROUND_FREE_QUEUE).map(|id| (id, *freer)).collect();
        assert_eq!(queued, expected);
        assert_ne!(*freer, here);
    }

    /// Heap memory standing in for a device's pinned memory.
    struct FakePinned(Vec<u8>);

    impl PinnedMemory for FakePinned {
        fn as_slice(&self) -> &[u8] {
            &self.0
        }
        fn as_mut_slice(&mut self) -> &mut [u8] {
            &mut self.0
        }
    }

    #[test]
    fn pinned_bytes_read_like_heap_bytes_and_clone_to_heap() {
        let mut pinned = Bytes::from_pinned(Box::new(FakePinned(vec![1, 2, 3])));
        assert_eq!(pinned.property(), AllocationProperty::Pinned);
        pinned[0] = 9;
        assert_eq!(*pinned, [9, 2, 3]);
        assert_eq!(
            format!("{pinned:?}"),
            "Bytes(3 bytes, pinned: [09, 02, 03])"
        );
        let memory: &dyn Any = pinned.pinned().expect("pinned");
        assert!(memory.downcast_ref::<FakePinned>().is_some());
        let copy = pinned.clone();
        assert_eq!(copy.property(), AllocationProperty::Native);
        assert_eq!(copy, pinned);
        assert_eq!(pinned.into_vec(), vec![9, 2, 3]);
    }

    #[test]
    fn lazy_bytes_load_once_on_first_access_and_keep_failures() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        static LOADS: AtomicUsize = AtomicUsize::new(0);
        let lazy = Bytes::lazy(
            2,
            Box::new(|| {
                LOADS.fetch_add(1, Ordering::Relaxed);
                Ok(Bytes::from(vec![4, 5]))
            }),
        );
        let shared = lazy.clone();
        assert_eq!((lazy.len(), LOADS.load(Ordering::Relaxed)), (2, 0));
        assert_eq!(lazy.property(), AllocationProperty::Device);
        assert_eq!(*shared, [4, 5]);
        assert_eq!(lazy.materialize().unwrap(), [4, 5]);
        assert_eq!(LOADS.load(Ordering::Relaxed), 1, "clones share one read");
        let mut owned = lazy;
        owned[1] = 6;
        assert_eq!((&owned[..], &shared[..]), (&[4, 6][..], &[4, 5][..]));

        let failed = Bytes::lazy(
            1,
            Box::new(|| {
                Err(ServerError::DeviceLost {
                    reason: "gone".into(),
                })
            }),
        );
        assert_eq!(format!("{failed:?}"), "Bytes(1 bytes, lazy)");
        let err = ServerError::DeviceLost {
            reason: "gone".into(),
        };
        assert_eq!(failed.materialize(), Err(err.clone()));
        assert_eq!(failed.materialize(), Err(err), "returned again, not lost");
        assert_eq!(format!("{failed:?}"), "Bytes(1 bytes, lazy read failed)");
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
