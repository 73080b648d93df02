//! The stream sanitizer: every access to device memory must be ordered (happens-before) after
//! the last conflicting access from another stream — write/write, write/read, read/write. A
//! missing event wait, or memory handed to new work while old work on another stream may still
//! touch it, is reported even when the seed's interleaving happened to produce the right bytes.
//!
//! Happens-before is tracked with vector clocks, one component per stream:
//! - each executed operation ticks its stream's own component;
//! - waiting on an event joins the clock the event was recorded with;
//! - what the host has observed complete (a `synchronize`, a finished read, an event found
//!   complete) joins the host's clock, and every operation enqueued afterwards starts from it.

use std::collections::BTreeMap;

use crate::memory::SanitizerReport;

/// One component per stream, indexed by stream; missing components are zero.
pub(crate) type Clock = Vec<u64>;

fn join(into: &mut Clock, other: &Clock) {
    if into.len() < other.len() {
        into.resize(other.len(), 0);
    }
    for (a, b) in into.iter_mut().zip(other) {
        *a = (*a).max(*b);
    }
}

fn component(clock: &Clock, stream: u32) -> u64 {
    clock.get(stream as usize).copied().unwrap_or(0)
}

#[derive(Clone, Debug)]
struct AccessRecord {
    stream: u32,
    /// The stream's own clock component when the access executed.
    tick: u64,
    write: bool,
    offset: u64,
    len: u64,
    operation: String,
}

impl AccessRecord {
    fn overlaps(&self, offset: u64, len: u64) -> bool {
        self.offset < offset + len && offset < self.offset + self.len
    }

    fn covered_by(&self, offset: u64, len: u64) -> bool {
        offset <= self.offset && self.offset + self.len <= offset + len
    }
}

/// An access an operation makes: a byte range of a buffer, read or written.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Access {
    pub buffer: u64,
    pub offset: u64,
    pub len: u64,
    pub write: bool,
}

#[derive(Debug, Default)]
pub(crate) struct Sanitizer {
    streams: Vec<Clock>,
    host: Clock,
    markers: BTreeMap<u64, Clock>,
    accesses: BTreeMap<u64, Vec<AccessRecord>>,
}

impl Sanitizer {
    /// The clock operations enqueued now start from.
    pub fn host_clock(&self) -> Clock {
        self.host.clone()
    }

    fn stream(&mut self, stream: u32) -> &mut Clock {
        let index = stream as usize;
        if self.streams.len() <= index {
            self.streams.resize(index + 1, Clock::new());
        }
        &mut self.streams[index]
    }

    /// An operation of `stream`, enqueued when the host's clock was `enqueued`, starts
    /// executing: returns the stream's clock for its accesses.
    pub fn begin(&mut self, stream: u32, enqueued: &Clock) -> Clock {
        let clock = self.stream(stream);
        join(clock, enqueued);
        if clock.len() <= stream as usize {
            clock.resize(stream as usize + 1, 0);
        }
        clock[stream as usize] += 1;
        clock.clone()
    }

    /// Checks `access` by `operation` on `stream` (at `clock`) against earlier conflicting
    /// accesses, reports races, and records it.
    pub fn access(
        &mut self,
        stream: u32,
        clock: &Clock,
        access: Access,
        operation: &str,
    ) -> Vec<SanitizerReport> {
        if access.len == 0 {
            return Vec::new();
        }
        let records = self.accesses.entry(access.buffer).or_default();
        let ordered = |r: &AccessRecord| r.stream == stream || component(clock, r.stream) >= r.tick;
        let reports = records
            .iter()
            .filter(|r| {
                (r.write || access.write) && r.overlaps(access.offset, access.len) && !ordered(r)
            })
            .map(|r| SanitizerReport::Race {
                buffer: access.buffer,
                offset: access.offset.max(r.offset),
                len: (access.offset + access.len).min(r.offset + r.len)
                    - access.offset.max(r.offset),
                first: format!("{} on stream {}", r.operation, r.stream),
                second: format!("{operation} on stream {stream}"),
            })
            .collect();
        // Records this access supersedes: covered by it and ordered before it (a write
        // supersedes everything; a read supersedes the same stream's reads).
        records.retain(|r| {
            !(r.covered_by(access.offset, access.len)
                && ordered(r)
                && (access.write || (!r.write && r.stream == stream)))
        });
        records.push(AccessRecord {
            stream,
            tick: component(clock, stream),
            write: access.write,
            offset: access.offset,
            len: access.len,
            operation: operation.to_owned(),
        });
        reports
    }

    /// An event or timestamp marker executes on `stream`.
    pub fn marker(&mut self, id: u64, clock: Clock) {
        self.markers.insert(id, clock);
    }

    /// `stream` waits for marker `id`.
    pub fn wait(&mut self, stream: u32, id: u64) {
        let marker = self.markers.get(&id).cloned().unwrap_or_default();
        join(self.stream(stream), &marker);
    }

    /// The host saw marker `id` complete.
    pub fn host_observed_marker(&mut self, id: u64) {
        if let Some(marker) = self.markers.get(&id) {
            let marker = marker.clone();
            join(&mut self.host, &marker);
        }
    }

    /// The host saw an operation that ran at `clock` complete.
    pub fn host_observed(&mut self, clock: &Clock) {
        join(&mut self.host, clock);
    }

    /// The host saw everything enqueued on `stream` complete.
    pub fn host_observed_stream(&mut self, stream: u32) {
        let clock = self.stream(stream).clone();
        join(&mut self.host, &clock);
    }

    /// A buffer was freed: its history ends (later touches are use-after-free instead).
    pub fn forget(&mut self, buffer: u64) {
        self.accesses.remove(&buffer);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(buffer: u64) -> Access {
        Access {
            buffer,
            offset: 0,
            len: 16,
            write: true,
        }
    }

    #[test]
    fn unordered_writes_from_two_streams_race() {
        let mut s = Sanitizer::default();
        let a = s.begin(0, &Clock::new());
        assert!(s.access(0, &a, write(1), "write").is_empty());
        let b = s.begin(1, &Clock::new());
        let reports = s.access(1, &b, write(1), "launch of `k`");
        assert_eq!(reports.len(), 1);
        assert_eq!(
            reports[0].to_string(),
            "race on buffer 1 bytes 0..16: write on stream 0 and launch of `k` on stream 1 are not ordered"
        );
    }

    #[test]
    fn an_event_wait_or_a_host_sync_orders_streams() {
        let mut s = Sanitizer::default();
        let a = s.begin(0, &Clock::new());
        s.access(0, &a, write(1), "write");
        let m = s.begin(0, &Clock::new());
        s.marker(7, m);
        s.wait(1, 7);
        let b = s.begin(1, &Clock::new());
        assert!(s.access(1, &b, write(1), "write").is_empty());
        // Stream 2 is ordered only through the host, which synchronised stream 1.
        s.host_observed_stream(1);
        let c = s.begin(2, &s.host_clock());
        assert!(s.access(2, &c, write(1), "read").is_empty());
    }
}
