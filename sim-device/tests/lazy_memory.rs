//! `read_lazy` bounds peak host memory: serialising many device tensors one after another holds
//! only about one of them on the host at a time. A counting global allocator (this test binary
//! only) measures every thread's heap, the device's actor included.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use lockstep::{Bytes, ComputeClient, CopyDescriptor};
use lockstep_sim::{SimConfig, SimDevice};

struct Counting;

static LIVE_BYTES: AtomicUsize = AtomicUsize::new(0);
static PEAK_BYTES: AtomicUsize = AtomicUsize::new(0);

// SAFETY: forwards to the system allocator unchanged; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract, forwarded.
        let ptr = unsafe { System.alloc(layout) };
        if !ptr.is_null() {
            let live = LIVE_BYTES.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
            PEAK_BYTES.fetch_max(live, Ordering::Relaxed);
        }
        ptr
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract, forwarded.
        unsafe { System.dealloc(ptr, layout) };
        LIVE_BYTES.fetch_sub(layout.size(), Ordering::Relaxed);
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

const TENSORS: usize = 64;
const TENSOR_BYTES: usize = 4 << 20;

#[test]
fn serialising_lazy_reads_one_by_one_keeps_about_one_tensor_on_the_host() {
    let config = SimConfig::new(11).with_memory(1 << 30, 1 << 30);
    let client = ComputeClient::new(SimDevice::new(config));
    let shape = vec![TENSOR_BYTES / 4];
    let layouts: Vec<_> = (0..TENSORS)
        .map(|i| {
            let data = Bytes::from(vec![i as u8; TENSOR_BYTES]);
            client.create_tensor(data, &shape, 4).unwrap()
        })
        .collect();
    client.sync().unwrap();
    let lazy: Vec<Bytes> = layouts
        .iter()
        .map(|l| {
            client.read_lazy(CopyDescriptor::new(
                l.memory.clone(),
                shape.clone(),
                l.strides.clone(),
                4,
            ))
        })
        .collect();
    drop(layouts);

    let mut expected = vec![0u8; TENSOR_BYTES];
    let baseline = LIVE_BYTES.load(Ordering::Relaxed);
    PEAK_BYTES.store(baseline, Ordering::Relaxed);
    let mut serialised = 0usize;
    for (i, bytes) in lazy.into_iter().enumerate() {
        // A serialiser's sink: look at every byte, keep none.
        let data = bytes.materialize().unwrap();
        expected.fill(i as u8);
        assert!(data == expected, "tensor {i}");
        serialised += data.len();
    }
    let peak_above_baseline = PEAK_BYTES.load(Ordering::Relaxed) - baseline;
    eprintln!("peak host memory above the baseline: {peak_above_baseline} bytes");
    assert_eq!(serialised, TENSORS * TENSOR_BYTES);
    assert!(
        peak_above_baseline < 3 * TENSOR_BYTES,
        "peak host memory rose {peak_above_baseline} bytes above the baseline while \
         serialising {TENSORS} tensors of {TENSOR_BYTES} bytes"
    );
    // Materialising everything at once would have needed all of them.
    assert!(TENSORS * TENSOR_BYTES > 20 * peak_above_baseline.max(1));
}
