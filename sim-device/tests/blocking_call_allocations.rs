//! A blocking call on a threaded client allocates nothing on the heap once warm: its task and
//! reply travel in the calling thread's reusable slot (the runtime's `actor/reply.rs`), not in
//! a boxed task and an `Arc`'d channel. A counting global allocator (this test binary only)
//! counts every thread's allocations, the device's actor included.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use lockstep::{ComputeClient, ServerOptions, StreamId};
use lockstep_sim::{SimConfig, SimDevice};

struct Counting;

static ALLOCATIONS: AtomicUsize = AtomicUsize::new(0);

// SAFETY: forwards to the system allocator unchanged; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: the caller's contract, forwarded.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract, forwarded.
        unsafe { System.dealloc(ptr, layout) };
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

#[test]
fn a_warm_blocking_call_allocates_nothing() {
    // The simulator's invariant check after every task builds a vector of the live slices:
    // turned off, what is left is the hand-off and `memory_usage` itself.
    let options = ServerOptions {
        invariant_checks_every_task: false,
        ..ServerOptions::default()
    };
    let mut client = ComputeClient::with_options(SimDevice::new(SimConfig::new(1)), options);
    client.set_stream(StreamId(0));
    let _held = client.empty(1024).unwrap();
    for _ in 0..100 {
        client.memory_usage().unwrap();
    }
    let before = ALLOCATIONS.load(Ordering::Relaxed);
    for _ in 0..1000 {
        client.memory_usage().unwrap();
    }
    let allocations = ALLOCATIONS.load(Ordering::Relaxed) - before;
    assert_eq!(allocations, 0, "allocations over 1000 memory_usage calls");
}
