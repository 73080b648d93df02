//! Stream identities. A stream is an ordered queue of device work; each OS thread has its own
//! current stream unless a client is pinned with
//! [`ComputeClient::set_stream`](crate::ComputeClient::set_stream).

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};

/// Identifies a stream of one device. Work on one stream executes in submission order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct StreamId(pub u64);

/// Thread streams are numbered from here, far above the small ids tests and programs pin by
/// hand, so that a pinned stream never aliases a thread's stream by accident.
const FIRST_THREAD_STREAM: u64 = 1 << 32;

static NEXT_THREAD_STREAM: AtomicU64 = AtomicU64::new(FIRST_THREAD_STREAM);

thread_local! {
    static CURRENT: Cell<Option<StreamId>> = const { Cell::new(None) };
}

impl StreamId {
    /// The calling thread's stream, assigned on first use (a `debug` event says so) and stable
    /// for the thread's life.
    pub fn current() -> StreamId {
        CURRENT.with(|current| {
            current.get().unwrap_or_else(|| {
                let id = StreamId(NEXT_THREAD_STREAM.fetch_add(1, Ordering::Relaxed));
                current.set(Some(id));
                // The one visible sign that this thread's work goes somewhere new: its syncs
                // will not wait for, nor return the failures of, other threads' streams.
                tracing::debug!(
                    stream = %id,
                    thread = ?std::thread::current().id(),
                    "a thread's first call opens its own default stream"
                );
                id
            })
        })
    }
}

impl std::fmt::Display for StreamId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.0 >= FIRST_THREAD_STREAM {
            write!(f, "thread-stream-{}", self.0 - FIRST_THREAD_STREAM)
        } else {
            write!(f, "stream-{}", self.0)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_thread_has_its_own_stable_stream() {
        let here = StreamId::current();
        assert_eq!(here, StreamId::current());
        let there = std::thread::spawn(StreamId::current).join().unwrap();
        assert_ne!(here, there);
    }
}
