//! The orders a seed may run a recording's calls in: each recorded thread keeps its own order,
//! and the order between threads is drawn from the seed, within the happens-before the
//! recording shows.
//!
//! A recording holds no host synchronisation (channels, joins, locks), so happens-before is
//! inferred from what threads can only learn through the runtime:
//! - a buffer is used after the call that created it, and released after every call that
//!   used it before its release in the file; a graph likewise from its `stop_capture`;
//! - a waiting call (a read, `sync`, `flush`, …) that returned before another thread's call
//!   was issued (its outcome is earlier in the file) happens before that call, with every
//!   earlier call of its thread: a thread hands work to another after waiting on it.
//!
//! Calls of different threads with no such edge between them are treated as racing: a program
//! whose threads signal each other without first waiting on the runtime (a plain write, then a
//! channel send) has orders explored that it never allows. **Invariant:** the file's own order
//! satisfies every edge (each points forward in the file), so a seed's draw never deadlocks.

use std::collections::BTreeMap;

use lockstep::record::{Count, Op};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::recording::Recording;

/// Separates the draw of thread order from the simulator's, which takes the seed as it is.
const ORDER_SALT: u64 = 0x7e57_0f0e_de25_0b5e;

/// A recording's calls as threads of the explorer, with what each call waits for.
#[derive(Clone, Debug)]
pub struct Plan {
    /// Each thread's calls (indices into [`Recording::calls`]), in its order; threads
    /// ascending by recorded number.
    threads: Vec<Vec<usize>>,
    /// For each call, how many calls of other threads (by index into `threads`) must have
    /// run before it.
    needs: Vec<BTreeMap<usize, usize>>,
}

/// Where a call is: its thread's index in the plan's `threads`, and its index along it.
#[derive(Clone, Copy)]
struct Place {
    thread: usize,
    index: usize,
}

impl Place {
    /// Calls of its thread that have run once it has.
    fn through(self) -> usize {
        self.index + 1
    }
}

/// What the happens-before inference has seen so far, in file order.
#[derive(Default)]
struct Edges {
    /// Per thread, its calls up to its latest waiting call whose outcome has appeared.
    published: Vec<usize>,
    /// The call that made each (device, buffer), and (device, `stop_capture` call)'s graph.
    makers: BTreeMap<(u32, u64, bool), Place>,
    /// Per made thing, per thread, its calls up to its latest that named it.
    users: BTreeMap<(u32, u64, bool), BTreeMap<usize, usize>>,
}

impl Plan {
    /// The plan of `recording`'s calls.
    pub fn of(recording: &Recording) -> Plan {
        let ids = recording.threads();
        let slot = |thread: u32| ids.partition_point(|&t| t < thread);
        let mut threads = vec![Vec::new(); ids.len()];
        let places: Vec<Place> = (recording.calls.iter().enumerate())
            .map(|(i, call)| {
                let thread = slot(call.thread);
                threads[thread].push(i);
                let index = threads[thread].len() - 1;
                Place { thread, index }
            })
            .collect();
        // File order of calls and outcomes: (position, call index, is an outcome).
        let mut events: Vec<(usize, usize, bool)> = (recording.calls.iter().enumerate())
            .flat_map(|(i, c)| {
                let outcome = c.outcome_position.map(|p| (p, i, true));
                std::iter::once((c.position, i, false)).chain(outcome)
            })
            .collect();
        events.sort_unstable();
        let mut edges = Edges {
            published: vec![0; ids.len()],
            ..Edges::default()
        };
        let mut needs = vec![BTreeMap::new(); recording.calls.len()];
        for (_, i, is_outcome) in events {
            let place = places[i];
            if is_outcome {
                let published = &mut edges.published[place.thread];
                *published = (*published).max(place.through());
            } else {
                let call = &recording.calls[i];
                needs[i] = edges.call(call.device, call.call, &call.op, place);
            }
        }
        Plan { threads, needs }
    }

    /// The order seed `seed` runs the calls in (indices into [`Recording::calls`]): at each
    /// turn, a thread drawn among those whose next call has all it needs.
    pub fn order(&self, seed: u64) -> Vec<usize> {
        let mut rng = ChaCha8Rng::seed_from_u64(seed ^ ORDER_SALT);
        let mut done = vec![0; self.threads.len()];
        let mut order = Vec::with_capacity(self.needs.len());
        loop {
            let ready: Vec<usize> = (0..self.threads.len())
                .filter(|&t| {
                    self.threads[t].get(done[t]).is_some_and(|&next| {
                        self.needs[next].iter().all(|(&other, &n)| done[other] >= n)
                    })
                })
                .collect();
            if ready.is_empty() {
                // Every call ran: each edge points forward in the file, so the file's order
                // always leaves a thread ready until then.
                return order;
            }
            let t = ready[rng.random_range(0..ready.len())];
            order.push(self.threads[t][done[t]]);
            done[t] += 1;
        }
    }
}

impl Edges {
    /// What the call at `place` (number `call`, making `op` on `device`) needs, noting what
    /// it makes and uses.
    fn call(&mut self, device: u32, call: u64, op: &Op, place: Place) -> BTreeMap<usize, usize> {
        let mut needs: BTreeMap<usize, usize> = (self.published.iter().enumerate())
            .filter(|&(t, &n)| t != place.thread && n > 0)
            .map(|(t, &n)| (t, n))
            .collect();
        match op {
            Op::Create { buffer, .. } => {
                self.makers.insert((device, *buffer, false), place);
            }
            Op::StopCapture => {
                self.makers.insert((device, call, true), place);
            }
            Op::Release { buffer } => self.release(&mut needs, place, (device, *buffer, false)),
            Op::GraphRelease { graph } => self.release(&mut needs, place, (device, *graph, true)),
            _ => {}
        }
        for thing in named(device, op) {
            if let Some(maker) = self.makers.get(&thing) {
                need(&mut needs, place, *maker);
            }
            let used = self.users.entry(thing).or_default();
            let through = used.entry(place.thread).or_default();
            *through = (*through).max(place.through());
        }
        needs
    }

    /// A release of `thing` needs its maker and every call that used it.
    fn release(&self, needs: &mut BTreeMap<usize, usize>, at: Place, thing: (u32, u64, bool)) {
        if let Some(&maker) = self.makers.get(&thing) {
            need(needs, at, maker);
        }
        for (&thread, &n) in self.users.get(&thing).into_iter().flatten() {
            need(
                needs,
                at,
                Place {
                    thread,
                    index: n - 1,
                },
            );
        }
    }
}

/// Adds to `needs`, of the call at `at`, that the call at `before` runs first (unless it is
/// of the same thread, whose order already says so).
fn need(needs: &mut BTreeMap<usize, usize>, at: Place, before: Place) {
    if before.thread != at.thread {
        let at_least = needs.entry(before.thread).or_default();
        *at_least = (*at_least).max(before.through());
    }
}

/// The buffers (and graphs) a call uses, made before it: (device, number, is a graph).
fn named(device: u32, op: &Op) -> Vec<(u32, u64, bool)> {
    let buffers: Vec<u64> = match op {
        Op::Write { range, .. } => vec![range.buffer],
        Op::Launch {
            bindings, count, ..
        } => {
            let dynamic = match count {
                Count::Dynamic(range) => Some(range.buffer),
                Count::Static(_) => None,
            };
            bindings.iter().map(|r| r.buffer).chain(dynamic).collect()
        }
        Op::Read { ranges } => ranges.iter().map(|r| r.buffer).collect(),
        Op::Other { writes, .. } => writes.iter().map(|r| r.buffer).collect(),
        Op::GraphReplay { graph } => return vec![(device, *graph, true)],
        _ => Vec::new(),
    };
    buffers.into_iter().map(|b| (device, b, false)).collect()
}
