//! A recording held in memory for exploring: its declarations (process, devices, kernels) and
//! its calls in file order, each with its outcome and its place in the file.
//!
//! **Invariant:** `calls` keeps file order, and every call's `position` and `outcome_position`
//! are the places its events have in the file (for a shrunk recording, the one it writes), so
//! the happens-before `order.rs` infers from them is the file's.

use std::io::{Read, Write};
use std::path::Path;

use lockstep::record::{Event, Op, Outcome, Reader, encode_frame, header};

/// Why a recording could not be loaded: the file could not be opened.
#[derive(Debug, thiserror::Error)]
#[error("{path}: {source}")]
pub struct LoadError {
    /// The path given.
    pub path: String,
    /// Why.
    pub source: std::io::Error,
}

/// One recorded call, with what it returned.
#[derive(Clone, Debug, PartialEq)]
pub struct RecordedCall {
    /// Its number in the recording.
    pub call: u64,
    /// The recorded device it went to.
    pub device: u32,
    /// The recorded thread that made it.
    pub thread: u32,
    /// The stream it went to.
    pub stream: u64,
    /// What it was.
    pub op: Op,
    /// What it returned, for a waiting call whose outcome was recorded.
    pub outcome: Option<Outcome>,
    /// The index of its [`Event::Call`] among the file's events.
    pub position: usize,
    /// The index of its [`Event::Outcome`], if it has one.
    pub outcome_position: Option<usize>,
    /// When it was issued and, with an outcome, when it returned (the recording's clock).
    pub at_ns: (u64, Option<u64>),
}

impl RecordedCall {
    /// Its [`Event::Call`].
    pub fn event(&self) -> Event {
        Event::Call {
            call: self.call,
            device: self.device,
            thread: self.thread,
            stream: self.stream,
            op: self.op.clone(),
            at_ns: self.at_ns.0,
        }
    }

    /// Its [`Event::Outcome`], if it has one.
    pub fn outcome_event(&self) -> Option<Event> {
        self.outcome.clone().map(|outcome| Event::Outcome {
            call: self.call,
            outcome,
            at_ns: self.at_ns.1.unwrap_or(self.at_ns.0),
        })
    }
}

/// A recording: what it declares, then its calls in file order.
#[derive(Clone, Debug, PartialEq)]
pub struct Recording {
    /// [`Event::Process`], [`Event::Device`] and [`Event::Kernel`], in file order.
    pub declarations: Vec<Event>,
    /// Every call, in file order.
    pub calls: Vec<RecordedCall>,
    /// Why the file could not be read past a point (a crash while recording leaves a
    /// truncated frame): the calls before it are explored, those cut short have no outcome.
    pub unread: Option<String>,
}

impl Recording {
    /// Loads the recording at `path`.
    ///
    /// # Errors
    /// [`LoadError`] if the file cannot be opened.
    pub fn open(path: &Path) -> Result<Recording, LoadError> {
        let file = std::fs::File::open(path).map_err(|source| LoadError {
            path: path.display().to_string(),
            source,
        })?;
        Ok(Recording::read(std::io::BufReader::new(file)))
    }

    /// Reads `input` up to its end, or up to its first byte that is not part of a whole frame
    /// ([`unread`](Self::unread) says which).
    pub fn read(input: impl Read) -> Recording {
        let mut recording = Recording {
            declarations: Vec::new(),
            calls: Vec::new(),
            unread: None,
        };
        for (position, event) in Reader::new(input).enumerate() {
            match event {
                Ok(event) => recording.add(position, event),
                Err(err) => recording.unread = Some(err.to_string()),
            }
        }
        recording
    }

    fn add(&mut self, position: usize, event: Event) {
        match event {
            Event::Call {
                call,
                device,
                thread,
                stream,
                op,
                at_ns,
            } => self.calls.push(RecordedCall {
                call,
                device,
                thread,
                stream,
                op,
                outcome: None,
                position,
                outcome_position: None,
                at_ns: (at_ns, None),
            }),
            Event::Outcome {
                call,
                outcome,
                at_ns,
            } => {
                // Outcomes name calls made before them: the latest call of that number.
                if let Some(made) = self.calls.iter_mut().rev().find(|c| c.call == call) {
                    made.outcome = Some(outcome);
                    made.outcome_position = Some(position);
                    made.at_ns.1 = Some(at_ns);
                }
            }
            declaration => self.declarations.push(declaration),
        }
    }

    /// The recorded threads, ascending.
    pub fn threads(&self) -> Vec<u32> {
        let mut threads: Vec<u32> = self.calls.iter().map(|c| c.thread).collect();
        threads.sort_unstable();
        threads.dedup();
        threads
    }

    /// Writes the recording in the format `lockstep::record` reads: declarations first, then
    /// each call followed by its outcome.
    ///
    /// # Errors
    /// The writer's.
    pub fn write_to(&self, mut out: impl Write) -> std::io::Result<()> {
        let mut bytes = header().to_vec();
        let calls = self.calls.iter().flat_map(|c| {
            let outcome = c.outcome_event();
            std::iter::once(c.event()).chain(outcome)
        });
        for event in self.declarations.iter().cloned().chain(calls) {
            encode_frame(&event, &mut bytes);
        }
        out.write_all(&bytes)
    }
}
