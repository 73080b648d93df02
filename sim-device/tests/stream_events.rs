//! The tracing that names the stream of every call (issue 16). A test binary of its own:
//! `tracing` caches whether a call site is enabled across threads, so another test running
//! the same call sites without this subscriber at the same moment could disable them here.

use std::sync::{Arc, Mutex};

use lockstep::{Bytes, ComputeClient, CubeCount, KernelArguments, ServerOptions};
use lockstep_sim::{SimConfig, SimDevice};

#[expect(dead_code, reason = "this test pins no stream")]
mod common;
use common::add_one;

/// Each span's name or event's message, with the value of its `stream` field if it had one.
type Records = Vec<(String, Option<String>)>;

/// A `tracing` subscriber that keeps what it saw.
#[derive(Clone, Default)]
struct Seen(Arc<Mutex<Records>>);

struct StreamField {
    message: String,
    stream: Option<String>,
}

impl tracing::field::Visit for StreamField {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        match field.name() {
            "stream" => self.stream = Some(format!("{value:?}")),
            "message" => self.message = format!("{value:?}"),
            _ => {}
        }
    }
}

impl tracing::Subscriber for Seen {
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, span: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        let mut fields = StreamField {
            message: span.metadata().name().to_owned(),
            stream: None,
        };
        span.record(&mut fields);
        let mut seen = self.0.lock().unwrap();
        seen.push((fields.message, fields.stream));
        tracing::span::Id::from_u64(seen.len() as u64)
    }
    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        let mut fields = StreamField {
            message: String::new(),
            stream: None,
        };
        event.record(&mut fields);
        self.0.lock().unwrap().push((fields.message, fields.stream));
    }
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

#[test]
fn every_call_names_its_stream_and_a_threads_first_call_says_it_opens_one() {
    // Inline: the server's events are emitted on the calling thread, where the subscriber is.
    let c = ComputeClient::inline(SimDevice::new(SimConfig::new(5)), ServerOptions::default());
    let seen = Seen::default();
    let recorder = seen.clone();
    // A fresh thread: its first call opens its default stream.
    let stream = std::thread::spawn(move || {
        tracing::subscriber::with_default(recorder, || {
            let h = c.create(Bytes::from_elems(&[1u32, 2])).unwrap();
            c.write(&h, Bytes::from_elems(&[3u32, 4])).unwrap();
            let args = KernelArguments::new().binding(&h);
            c.launch(&add_one(), CubeCount::Static(1, 1, 1), args)
                .unwrap();
            c.read_one(h).unwrap();
            c.sync().unwrap();
            c.sync_all().unwrap();
            c.stream_id()
        })
    })
    .join()
    .unwrap();
    let seen = seen.0.lock().unwrap().clone();
    let name = stream.to_string();
    assert_eq!(
        seen,
        vec![
            (
                "a thread's first call opens its own default stream".to_owned(),
                Some(name.clone())
            ),
            ("create".to_owned(), Some(name.clone())),
            ("device stream opened".to_owned(), Some(name.clone())),
            ("write".to_owned(), Some(name.clone())),
            ("launch".to_owned(), Some(name.clone())),
            ("read".to_owned(), Some(name.clone())),
            ("sync".to_owned(), Some(name.clone())),
            ("sync_all".to_owned(), Some(name)),
        ]
    );
}
