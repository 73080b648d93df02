//! The reference model of an explored run: what every buffer must hold, and which of its bytes
//! an injected fault may have spoiled.
//!
//! **Fault windows.** The operations a stream enqueues between two of its blocking calls form a
//! *window*. A blocking call that returns `Ok` proves its stream's earlier windows clean (a
//! stream's failures surface in order, at its next blocking call). One that returns an injected
//! fault spoils every unresolved window of its stream: the model cannot tell which operation
//! failed, so each buffer that depends on one of them becomes unknown until fully rewritten.
//! A buffer's dependencies flow through kernels (a destination depends on its source), so data
//! spoiled on one stream is never held against another. A read whose bytes differ from the
//! model while it depends on a window that is still unresolved is judged once that window is:
//! a failure if it turns out clean.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fmt;
use std::ops::Deref;

use lockstep::{DeviceError, ServerError, StreamId};
use lockstep_sim::InjectedFault;

use super::coverage::Method;
use super::failure::{Check, Difference, ErrorKind, Side, Violation};
use super::view::View;
use super::workload::Drawn;

/// A window: a stream and its window number.
type Window = (StreamId, u64);

/// A buffer's `u32` elements: those of a fill, shared with the `Drawn` they came from (a
/// copy for each created buffer was 4% of the explorer's instructions), until first changed.
#[derive(Clone, Debug)]
pub enum Values {
    /// A fill's elements, as drawn: never changed since.
    Drawn(Drawn),
    /// Elements of the buffer's own, changed since they were drawn (or never drawn).
    Own(Vec<u32>),
}

impl Values {
    /// The elements, to change: a copy of them from here on if they were shared.
    fn to_mut(&mut self) -> &mut [u32] {
        if let Values::Drawn(drawn) = self {
            *self = Values::Own(drawn.to_vec());
        }
        match self {
            Values::Own(values) => values,
            Values::Drawn(_) => unreachable!("made its own above"),
        }
    }
}

impl Deref for Values {
    type Target = [u32];

    fn deref(&self) -> &[u32] {
        match self {
            Values::Drawn(drawn) => drawn,
            Values::Own(values) => values,
        }
    }
}

impl From<Drawn> for Values {
    fn from(drawn: Drawn) -> Self {
        Values::Drawn(drawn)
    }
}

impl From<Vec<u32>> for Values {
    fn from(values: Vec<u32>) -> Self {
        Values::Own(values)
    }
}

/// What a buffer must hold.
#[derive(Clone, Debug)]
pub struct Buf {
    /// The buffer's `u32` elements, as the model predicts them.
    pub values: Values,
    /// Unresolved or spoiled windows whose operations produced `values`.
    deps: BTreeSet<Window>,
    /// An operation that produced it is known to have been spoiled.
    spoiled: bool,
}

#[derive(Debug, Default)]
struct StreamModel {
    window: u64,
    /// Windows below this one are resolved: clean unless in `spoiled`.
    resolved_below: u64,
    spoiled: BTreeSet<u64>,
    /// The checked-kernel faults the stream's next blocking calls must return, oldest first
    /// (fault-free worlds). The stream's fault record keeps the first fault since it was last
    /// read, so a new fault joins the last one here unless `sealed`.
    expected_faults: VecDeque<ServerError>,
    /// The fault record was read since the last expected fault: the runtime queued that fault,
    /// and the next one is a failure of its own.
    sealed: bool,
}

impl StreamModel {
    /// A blocking call of the stream, or a `sync_all`, read its fault record.
    fn record_read(&mut self) {
        self.sealed = true;
    }

    /// A failure surfaced: any unresolved window may hold the operation that failed.
    fn spoil_unresolved(&mut self) {
        self.spoiled.extend(self.resolved_below..=self.window);
        self.window += 1;
        self.resolved_below = self.window;
    }
}

/// A read that differed from the model while depending on unresolved windows.
#[derive(Debug)]
struct Suspect {
    /// The failure it is, should every window in `deps` prove clean.
    wrong: Violation,
    deps: BTreeSet<Window>,
}

/// Which read returned the bytes [`Model::check_read`] judges.
#[derive(Clone, Copy, Debug)]
pub enum ReadOf {
    /// A read by `call` on the explored device's stream `stream`.
    Stream {
        /// The read call (`read_one`, `read_async`, a lazy read's first access, ...).
        call: Method,
        /// The stream it read on.
        stream: StreamId,
    },
    /// A peer's read of a `to_client` copy of an explored buffer.
    Peer,
}

impl ReadOf {
    /// The call that returned the bytes.
    fn call(self) -> Method {
        match self {
            ReadOf::Stream { call, .. } => call,
            ReadOf::Peer => Method::ToClient,
        }
    }

    /// The violation `check` of this read: on its stream, after what the read was.
    fn violation(self, check: Check, detail: String) -> Violation {
        let violation = Violation::new(check, detail).context(self);
        match self {
            ReadOf::Stream { stream, .. } => violation.on(stream),
            ReadOf::Peer => violation,
        }
    }
}

impl fmt::Display for ReadOf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReadOf::Stream { stream, .. } => write!(f, "read on {stream}"),
            ReadOf::Peer => f.write_str("to_client, read on the peer"),
        }
    }
}

/// Buffers are keyed by ids the driver assigns; they outlive their handles, since a graph may
/// still use them.
#[derive(Debug, Default)]
pub struct Model {
    bufs: BTreeMap<u64, Buf>,
    next_buf: u64,
    streams: BTreeMap<StreamId, StreamModel>,
    suspects: Vec<Suspect>,
    /// Set once a call reported the device lost; every later call must fail.
    pub lost: bool,
    /// The device may refuse allocations (the world injects allocation failures): also the
    /// runtime's own, e.g. a stream's fault record, which then fails that stream's work.
    allocations_may_fail: bool,
    /// Injected faults surfaced so far: id → the stream that returned it.
    pub surfaced: BTreeMap<u64, StreamId>,
    /// Allocations refused with out-of-memory.
    pub refused_allocations: u64,
    /// Allocations an installed pool's cap or the world's budget refused (legal, not
    /// injected).
    pub capped_refusals: u64,
    /// Reads compared with the model and found equal.
    pub reads_checked: u64,
    /// Injected faults returned by some call.
    pub faults_surfaced: u64,
    /// Checked-kernel faults returned where expected.
    pub kernel_faults: u64,
    /// Peer calls that returned their wait for the explored device timing out: legal only if
    /// that device was lost by the run's end.
    pub peer_timeouts: u64,
}

/// How a dependency stands.
#[derive(PartialEq, Eq)]
enum Status {
    Clean,
    Spoiled,
    Pending,
}

impl Model {
    /// An empty model; `allocations_may_fail` says whether the device may refuse allocations.
    pub fn new(allocations_may_fail: bool) -> Self {
        Self {
            allocations_may_fail,
            ..Self::default()
        }
    }

    fn stream(&mut self, s: StreamId) -> &mut StreamModel {
        self.streams.entry(s).or_default()
    }

    /// Notes that `s` may hold work (e.g. the runtime's own, for a capture) that no model
    /// operation names: the final drain syncs it too.
    pub fn uses(&mut self, s: StreamId) {
        self.stream(s);
    }

    /// Every stream the workload used.
    pub fn streams(&self) -> Vec<StreamId> {
        self.streams.keys().copied().collect()
    }

    fn window(&mut self, s: StreamId) -> Window {
        (s, self.stream(s).window)
    }

    fn status(&self, (s, w): Window) -> Status {
        let stream = &self.streams[&s];
        if stream.spoiled.contains(&w) {
            Status::Spoiled
        } else if w < stream.resolved_below {
            Status::Clean
        } else {
            Status::Pending
        }
    }

    /// A new buffer holding `values`, written on `s`.
    pub fn create(&mut self, s: StreamId, values: impl Into<Values>) -> u64 {
        let id = self.next_buf;
        self.next_buf += 1;
        let deps = BTreeSet::from([self.window(s)]);
        self.bufs.insert(
            id,
            Buf {
                values: values.into(),
                deps,
                spoiled: false,
            },
        );
        id
    }

    /// Number of elements of model buffer `buf`.
    pub fn len(&self, buf: u64) -> usize {
        self.bufs[&buf].values.len()
    }

    /// What `buf` must hold (meaningless if an injected fault spoiled it).
    pub fn values(&self, buf: u64) -> &[u32] {
        &self.bufs[&buf].values
    }

    /// A write of `data` at element `offset` on `s`.
    pub fn write(&mut self, s: StreamId, buf: u64, offset: usize, data: &[u32]) {
        let window = self.window(s);
        let b = self.bufs.get_mut(&buf).expect("a live buffer");
        if offset == 0 && data.len() == b.values.len() {
            b.deps.clear();
            b.spoiled = false;
        }
        b.values.to_mut()[offset..offset + data.len()].copy_from_slice(data);
        b.deps.insert(window);
    }

    /// A kernel on `s` computing `dst` from itself and `src` with `apply`.
    pub fn launch(
        &mut self,
        s: StreamId,
        dst: u64,
        src: u64,
        apply: impl FnOnce(&mut [u32], &[u32]),
    ) {
        let window = self.window(s);
        // The destination leaves the map while it is computed, so the source is read in place
        // (a copy of it was 1% of the explorer's instructions); a kernel that reads its
        // destination reads it from a copy made before.
        let mut d = self.bufs.remove(&dst).expect("a live buffer");
        let own;
        let src = if src == dst {
            own = d.clone();
            &own
        } else {
            &self.bufs[&src]
        };
        let (deps, spoiled) = (src.deps.clone(), src.spoiled);
        apply(d.values.to_mut(), &src.values);
        d.deps.extend(deps);
        d.deps.insert(window);
        d.spoiled |= spoiled;
        self.bufs.insert(dst, d);
    }

    /// Expects the next blocking call on `s` to return `fault` (the first since the last one).
    pub fn expect_fault(&mut self, s: StreamId, fault: ServerError) {
        let stream = self.stream(s);
        if stream.expected_faults.is_empty() || stream.sealed {
            stream.expected_faults.push_back(fault);
            stream.sealed = false;
        }
    }

    /// The checked-kernel fault the next blocking call on `s` must return, if one is expected.
    pub fn expected_fault(&self, s: StreamId) -> Option<&ServerError> {
        self.streams.get(&s)?.expected_faults.front()
    }

    /// Whether `s` may be in an error state now.
    pub fn may_have_failed(&self, s: StreamId, faults_injected: bool) -> bool {
        faults_injected
            || self
                .streams
                .get(&s)
                .is_some_and(|m| !m.expected_faults.is_empty())
    }

    /// Judges the result of `call`, a blocking call on `s`. `waited` says whether the call
    /// waited for all earlier work of the stream (read, sync), so that `Ok` proves it clean;
    /// `flush` does not wait.
    pub fn blocking(
        &mut self,
        s: StreamId,
        call: Method,
        result: Result<(), &ServerError>,
        waited: bool,
    ) -> Result<(), Violation> {
        let stream = self.streams.entry(s).or_default();
        if waited {
            stream.record_read();
        }
        let verdict = match result {
            Ok(()) if self.lost => Err(Violation::new(
                Check::SucceededAfterLoss(call),
                "the device was lost, yet a blocking call succeeded",
            )),
            Ok(()) if !waited => Ok(()),
            Ok(()) => match stream.expected_faults.pop_front() {
                Some(expected) => Err(Violation::new(
                    Check::KernelFaultMissing(call),
                    format!("expected {expected}, the call succeeded"),
                )),
                None => {
                    stream.window += 1;
                    stream.resolved_below = stream.window;
                    Ok(())
                }
            },
            Err(err) => self.failed(s, call, err),
        };
        verdict.map_err(|violation| violation.on(s))
    }

    /// Judges what `sync_all`, called on `calling`, returned. It read every stream's fault
    /// record and waited for every stream: `Ok` proves every stream's windows clean; an error
    /// of stream `t` proves clean the streams before `t` in id order (theirs would have come
    /// first) and leaves the others' failures queued for their next blocking calls.
    pub fn sync_all(
        &mut self,
        calling: StreamId,
        result: Result<(), &ServerError>,
    ) -> Result<(), Violation> {
        let failed = match result {
            Ok(()) if self.lost => {
                let what = "the device was lost, yet sync_all succeeded";
                let violation = Violation::new(Check::SucceededAfterLoss(Method::SyncAll), what);
                return Err(violation.on(calling));
            }
            Ok(()) => None,
            Err(err) => Some((err.stream().unwrap_or(calling), err)),
        };
        self.streams.values_mut().for_each(StreamModel::record_read);
        let clean: Vec<StreamId> = (self.streams.keys().copied())
            .filter(|&t| failed.is_none_or(|(s, _)| t < s))
            .collect();
        for t in clean {
            let stream = self.stream(t);
            if let Some(expected) = stream.expected_faults.pop_front() {
                let what =
                    format!("expected {expected} on {t} first, sync_all returned {result:?}");
                return Err(Violation::new(Check::KernelFaultMissing(Method::SyncAll), what).on(t));
            }
            stream.window += 1;
            stream.resolved_below = stream.window;
        }
        match failed {
            Some((s, err)) => self.failed(s, Method::SyncAll, err).map_err(|v| v.on(s)),
            None => Ok(()),
        }
    }

    fn failed(&mut self, s: StreamId, call: Method, err: &ServerError) -> Result<(), Violation> {
        if let ServerError::DeviceLost { .. } = err {
            self.lost = true;
            return Ok(());
        }
        let stream = self.streams.entry(s).or_default();
        if let ServerError::Device {
            error: DeviceError::OutOfMemory { .. },
            ..
        } = err
            && self.allocations_may_fail
        {
            self.refused_allocations += 1;
            stream.spoil_unresolved();
            return Ok(());
        }
        if let Some(id) = injected_fault(err) {
            if let Some(earlier) = self.surfaced.insert(id, s) {
                return Err(Violation::new(
                    Check::FaultSurfacedTwice(call),
                    format!(
                        "injected fault #{id} surfaced twice (on {earlier}, then on {s}): {err}"
                    ),
                ));
            }
            self.faults_surfaced += 1;
            stream.spoil_unresolved();
            return Ok(());
        }
        match stream.expected_faults.pop_front() {
            Some(expected) if &expected == err => {
                self.kernel_faults += 1;
                stream.window += 1;
                stream.resolved_below = stream.window;
                Ok(())
            }
            expected => Err(Violation::new(
                Check::UnexpectedError {
                    call,
                    error: ErrorKind::of(err),
                },
                format!(
                    "unexpected error on {s}: {err} (expected {})",
                    expected.map_or("none".to_owned(), |e| e.to_string())
                ),
            )),
        }
    }

    /// Checks bytes that `read` returned of `buf` against the model, after the read's own
    /// stream resolved.
    pub fn check_read(&mut self, read: ReadOf, buf: u64, actual: &[u32]) -> Result<(), Violation> {
        self.check_read_as(read, buf, None, actual)
    }

    /// [`check_read`](Self::check_read) of bytes that must be what `buf` holds, or with a
    /// `view`, its elements the view gathers.
    pub fn check_read_as(
        &mut self,
        read: ReadOf,
        buf: u64,
        view: Option<&View>,
        actual: &[u32],
    ) -> Result<(), Violation> {
        if self.lost {
            let lost = "returned data after the device was lost".to_owned();
            return Err(read.violation(Check::SucceededAfterLoss(read.call()), lost));
        }
        let b = &self.bufs[&buf];
        let statuses: Vec<(Window, Status)> = b.deps.iter().map(|&w| (w, self.status(w))).collect();
        if b.spoiled || statuses.iter().any(|(_, s)| *s == Status::Spoiled) {
            return Ok(());
        }
        let expected = match view {
            Some(view) => Cow::Owned(view.gather(&b.values)),
            None => Cow::Borrowed(&b.values[..]),
        };
        if actual == &expected[..] {
            self.reads_checked += 1;
            return Ok(());
        }
        let first = actual
            .iter()
            .zip(expected.iter())
            .position(|(a, e)| a != e)
            .unwrap_or(actual.len().min(expected.len()));
        let check = Check::WrongRead {
            on: match read {
                ReadOf::Stream { .. } => Side::Explored,
                ReadOf::Peer => Side::Peer,
            },
            differs: Difference::of(actual, &expected),
        };
        let detail = format!(
            "read {} elements, model holds {}; first difference at element {first}: {:?} vs {:?}",
            actual.len(),
            expected.len(),
            actual.get(first),
            expected.get(first)
        );
        let wrong = read.violation(check, detail);
        let pending: BTreeSet<Window> = statuses
            .into_iter()
            .filter(|(_, s)| *s == Status::Pending)
            .map(|(w, _)| w)
            .collect();
        if pending.is_empty() {
            return Err(wrong);
        }
        self.suspects.push(Suspect {
            wrong,
            deps: pending,
        });
        Ok(())
    }

    /// Once every stream is resolved: a suspect read whose windows all proved clean was wrong.
    pub fn judge_suspects(&self) -> Result<(), Violation> {
        for suspect in &self.suspects {
            let statuses: Vec<Status> = suspect.deps.iter().map(|&w| self.status(w)).collect();
            if statuses.contains(&Status::Spoiled) || self.lost {
                continue;
            }
            let mut wrong = suspect.wrong.clone();
            wrong.detail += " (every window it depended on proved clean)";
            return Err(wrong);
        }
        Ok(())
    }

    /// Whether every stream's fault expectation was met.
    pub fn expected_faults_met(&self) -> Result<(), Violation> {
        match self
            .streams
            .iter()
            .find_map(|(s, m)| m.expected_faults.front().map(|f| (s, f)))
        {
            Some((&s, f)) if !self.lost => Err(Violation::new(
                Check::KernelFaultNeverSurfaced,
                format!("{f} never surfaced on {s}"),
            )
            .on(s)),
            _ => Ok(()),
        }
    }
}

/// The id of the injected fault an error reports, if it reports one.
pub fn injected_fault(err: &ServerError) -> Option<u64> {
    match err {
        ServerError::Device { error, .. } => InjectedFault::id_in(&error.to_string()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use lockstep::DeviceError;

    use super::*;
    use crate::failure::DeviceErrorKind;

    const A: StreamId = StreamId(0);
    const B: StreamId = StreamId(1);
    const READ: ReadOf = ReadOf::Stream {
        call: Method::ReadOne,
        stream: A,
    };

    fn injected(id: u64) -> ServerError {
        ServerError::Device {
            stream: A,
            error: DeviceError::TransferFailed {
                reason: format!("injected failure [injected fault #{id}]"),
            },
        }
    }

    #[test]
    fn a_clean_read_must_match_and_a_spoiled_one_is_not_checked() {
        let mut model = Model::new(false);
        let buf = model.create(A, vec![1, 2, 3]);
        model.blocking(A, Method::Sync, Ok(()), true).unwrap();
        let wrong = model.check_read(READ, buf, &[1, 2, 4]).unwrap_err();
        let values = Check::WrongRead {
            on: Side::Explored,
            differs: Difference::Values,
        };
        assert_eq!((wrong.check, wrong.stream), (values, Some(A)));
        assert_eq!(
            wrong.detail,
            "read on stream-0: read 3 elements, model holds 3; first difference at element 2: Some(4) vs Some(3)"
        );
        model.write(A, buf, 1, &[9]);
        model
            .blocking(A, Method::Sync, Err(&injected(0)), true)
            .unwrap();
        // The write may have failed: any content is accepted until the buffer is rewritten.
        model.check_read(READ, buf, &[1, 2, 3]).unwrap();
        model.write(A, buf, 0, &[5, 6, 7]);
        model.blocking(A, Method::Sync, Ok(()), true).unwrap();
        assert!(model.check_read(READ, buf, &[1, 2, 3]).is_err());
        assert_eq!(model.surfaced.get(&0), Some(&A));
    }

    #[test]
    fn a_read_depending_on_another_streams_pending_window_is_judged_when_it_resolves() {
        let mut model = Model::new(false);
        let src = model.create(A, vec![1]);
        let dst = model.create(B, vec![0]);
        model.launch(B, dst, src, |d, s| d[0] = s[0] + 1);
        model.blocking(B, Method::Sync, Ok(()), true).unwrap();
        // A's create is unresolved: a wrong value is suspect, not yet a failure.
        model.check_read(READ, dst, &[7]).unwrap();
        model.blocking(A, Method::Sync, Ok(()), true).unwrap();
        assert!(
            model.judge_suspects().is_err(),
            "A proved clean: the read was wrong"
        );

        let mut model = Model::new(false);
        let src = model.create(A, vec![1]);
        let dst = model.create(B, vec![0]);
        model.launch(B, dst, src, |d, s| d[0] = s[0] + 1);
        model.blocking(B, Method::Sync, Ok(()), true).unwrap();
        model.check_read(READ, dst, &[7]).unwrap();
        model
            .blocking(A, Method::Sync, Err(&injected(3)), true)
            .unwrap();
        model.judge_suspects().unwrap();
    }

    #[test]
    fn a_fault_surfacing_twice_or_an_unexpected_error_fails() {
        let mut model = Model::new(false);
        model
            .blocking(A, Method::Sync, Err(&injected(1)), true)
            .unwrap();
        let twice = model.blocking(B, Method::ReadOne, Err(&injected(1)), true);
        let twice = twice.unwrap_err();
        assert_eq!(twice.check, Check::FaultSurfacedTwice(Method::ReadOne));
        assert_eq!(twice.stream, Some(B));
        let oom = ServerError::Device {
            stream: A,
            error: DeviceError::OutOfMemory {
                requested_bytes: 16,
                available_bytes: 0,
            },
        };
        let unexpected = Model::new(false).blocking(A, Method::Sync, Err(&oom), true);
        assert_eq!(
            unexpected.unwrap_err().check,
            Check::UnexpectedError {
                call: Method::Sync,
                error: ErrorKind::Device(DeviceErrorKind::OutOfMemory),
            }
        );
        Model::new(true)
            .blocking(A, Method::Sync, Err(&oom), true)
            .unwrap();
    }

    #[test]
    fn an_expected_kernel_fault_must_surface() {
        let fault = ServerError::KernelFault {
            kernel: "overrun".into(),
            binding: 0,
            index: 9,
            stream: A,
        };
        let mut model = Model::new(false);
        model.expect_fault(A, fault.clone());
        let owed = model.expected_faults_met().unwrap_err();
        assert_eq!(owed.check, Check::KernelFaultNeverSurfaced);
        model.blocking(A, Method::Sync, Ok(()), false).unwrap();
        model.blocking(A, Method::Sync, Err(&fault), true).unwrap();
        model.expected_faults_met().unwrap();
        let mut model = Model::new(false);
        model.expect_fault(A, fault);
        let missing = model.blocking(A, Method::Sync, Ok(()), true).unwrap_err();
        assert_eq!(missing.check, Check::KernelFaultMissing(Method::Sync));
    }
}
