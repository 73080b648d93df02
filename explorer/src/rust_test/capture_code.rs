//! Graph capture as the client calls the driver makes for it (`driver.rs`'s `begin_capture`,
//! `end_capture`, `in_capture` and `capture_out_of_order`): the capture window that stays open
//! while other threads act, and capture calls out of order. Fault-free, every call the driver
//! may see fail with a stream's pending failure succeeds.

use lockstep::{CaptureError, StreamId};

use super::{Captured, Printer, refusal_code};
use crate::driver::{InCapture, OpenCapture, Refused, capture_launches, may_capture_beside};
use crate::workload::LaunchSpec;

impl Printer<'_> {
    /// `graph_prepare`, a warm-up run of the launches that run, then `start_capture` and their
    /// capture, which stays open.
    pub(super) fn begin_capture(&mut self, c: &str, s: StreamId, launches: &[LaunchSpec]) {
        let launches = capture_launches(launches, |slot| self.slots[slot].is_some());
        let graph_streams = self.graphs.iter().map(|g| g.stream);
        if !may_capture_beside(graph_streams, &self.captures, s) || launches.is_empty() {
            return;
        }
        self.model.uses(s);
        self.code.line(format!("{c}.graph_prepare().unwrap();"));
        for l in &launches {
            self.launch(c, s, l, true);
        }
        self.code.line(format!("{c}.start_capture().unwrap();"));
        let launches: Vec<_> = launches
            .iter()
            .filter_map(|l| {
                let (dst, src) = self.launch(c, s, l, false)?;
                Some((l.kernel, dst, src, l.k))
            })
            .collect();
        self.captures.open = Some(OpenCapture {
            stream: s,
            launches,
            refused_write: false,
        });
    }

    /// `stop_capture` of the open capture on its stream's client: the graph, or the refusal
    /// of a window that held a write.
    pub(super) fn end_capture(&mut self) {
        let Some(open) = self.captures.open.take() else {
            return;
        };
        let c = self.clients[&open.stream].clone();
        if open.refused_write {
            let refused = CaptureError::WriteInCapture {
                stream: open.stream,
            };
            let expected = refusal_code(&mut self.code, &refused);
            self.code
                .line(format!("assert_eq!({c}.stop_capture().err(), {expected});"));
            return;
        }
        let var = self.var("graph");
        self.code
            .line(format!("let {var} = {c}.stop_capture().unwrap();"));
        self.graphs.push(Captured {
            var,
            stream: open.stream,
            launches: open.launches,
        });
    }

    /// A step on the capturing stream `s` that does not act as usual ([`in_capture`]).
    ///
    /// [`in_capture`]: crate::driver::in_capture
    pub(super) fn in_capture(&mut self, c: &str, s: StreamId, step: InCapture<'_>) {
        let handle = |slots: &[Option<super::Slot>], slot: usize| {
            slots[slot].as_ref().map(|slot| slot.var.clone())
        };
        match step {
            InCapture::Recorded(spec) => {
                if let Some((dst, src)) = self.launch(c, s, spec, false) {
                    let open = self.captures.open.as_mut().expect("a capture is open");
                    open.launches.push((spec.kernel, dst, src, spec.k));
                }
            }
            InCapture::WrittenInWindow { slot } => {
                let Some(var) = handle(&self.slots, slot) else {
                    return;
                };
                // A buffer of no elements takes no element: the driver skips it.
                let buf = self.slots[slot].as_ref().map(|slot| slot.buf);
                if buf.is_some_and(|buf| self.model.len(buf) == 0) {
                    return;
                }
                let zero = super::bytes(&mut self.code, &[0]);
                self.code
                    .line(format!("{c}.write_at(&{var}, 0, {zero}).unwrap();"));
                let open = self.captures.open.as_mut().expect("a capture is open");
                open.refused_write = true;
            }
            InCapture::Refused(call) => {
                let call_code = match call {
                    Refused::Read { slot } => match handle(&self.slots, slot) {
                        Some(var) => format!("{c}.read_one({var}.clone())"),
                        None => return,
                    },
                    Refused::Flush => format!("{c}.flush()"),
                    Refused::Sync => format!("{c}.sync()"),
                    Refused::Prepare => format!("{c}.graph_prepare()"),
                };
                let expected = refusal_code(&mut self.code, &call.expected(s));
                self.code
                    .line(format!("assert_eq!({call_code}.err(), {expected});"));
            }
            InCapture::AsUsual | InCapture::OwnRules | InCapture::Skipped => {}
        }
    }

    /// `stop_capture` on a stream that is not capturing, then `start_capture` (after
    /// `graph_prepare` if `prepare`): each refused or accepted as the stream's state says.
    pub(super) fn capture_out_of_order(&mut self, c: &str, s: StreamId, prepare: bool) {
        self.model.uses(s);
        if prepare {
            self.code.line(format!("{c}.graph_prepare().unwrap();"));
            self.captures.prepared.insert(s);
        }
        let not_capturing = refusal_code(&mut self.code, &CaptureError::NotCapturing { stream: s });
        self.code.line(format!(
            "assert_eq!({c}.stop_capture().err(), {not_capturing});"
        ));
        if !self.captures.prepared.contains(&s) {
            let refused = CaptureError::NotPrepared { stream: s };
            let not_prepared = refusal_code(&mut self.code, &refused);
            self.code.line(format!(
                "assert_eq!({c}.start_capture().err(), {not_prepared});"
            ));
            return;
        }
        self.code.line(format!("{c}.start_capture().unwrap();"));
        self.captures.prepared.remove(&s);
        self.code.line(format!("{c}.stop_capture().unwrap();"));
    }
}
