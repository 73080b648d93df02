//! Recording a workload on the simulator, then replaying and summarising it: through the
//! library (`lockstep::record`, `lockstep::replay`) and the `lockstep` command.

use std::path::{Path, PathBuf};

use lockstep::kernel::{BindingDecl, ElemType, KernelDef, Scalar};
use lockstep::record::{
    Count, Data, Event, Op, Outcome, Range, ReadData, Reader, RecordTo, Recorder, RecorderConfig,
    data_hash, encode_frame, header,
};
use lockstep::replay::{FloatTolerance, Mismatch, MismatchDetail, ReplayReport, replay};
use lockstep::{Bytes, ComputeClient, CubeCount, KernelArguments, ServerOptions, StreamId};
use lockstep_kernels::elementwise::{KernelKind, fill, overrun};
use lockstep_sim::{SimConfig, SimDevice};

fn temp(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("lockstep-{name}-{}.rec", std::process::id()))
}

fn not_recording() -> ServerOptions {
    ServerOptions {
        record: RecordTo::Off,
        ..ServerOptions::default()
    }
}

/// Records the workload to `path`, keeping data up to `data_bytes_max` bytes: two threads,
/// each on its own pinned stream; creates, writes, launches of three kernels, reads (one of the
/// other stream's buffer), a write refused at the call and a kernel fault returned by a sync.
fn record_workload(path: &Path, data_bytes_max: u64) {
    let recorder = Recorder::open(path, RecorderConfig { data_bytes_max }).expect("opens");
    let options = ServerOptions {
        record: RecordTo::Recorder(recorder),
        ..ServerOptions::default()
    };
    let client = ComputeClient::with_options(SimDevice::new(SimConfig::new(7)), options);
    let first = {
        let mut client = client.clone();
        std::thread::spawn(move || {
            client.set_stream(StreamId(1));
            let values: Vec<u32> = (0..4096).collect();
            let a = client.create(Bytes::from_elems(&values)).unwrap();
            let add = KernelKind::AddConst.kernel();
            let args = KernelArguments::new().binding(&a).param(Scalar::U32(5));
            client
                .launch(&add, CubeCount::Static(512, 1, 1), args)
                .unwrap();
            // Refused at the call: past the handle's end.
            let refused = client.write_at(&a, 16_384, Bytes::from_elems(&[1u32]));
            assert!(refused.is_err());
            let args = KernelArguments::new().binding(&a).param(Scalar::U32(3));
            client
                .launch(&overrun(), CubeCount::Static(1, 1, 1), args)
                .unwrap();
            // The fault is returned by the stream's next sync.
            assert!(client.sync().is_err());
            assert_eq!(client.read_one(a.clone()).unwrap().to_elems::<u32>()[0], 5);
            a
        })
        .join()
        .unwrap()
    };
    let mut client = client.clone();
    std::thread::spawn(move || {
        client.set_stream(StreamId(2));
        let b = client.empty(8192).unwrap();
        let args = KernelArguments::new().binding(&b).param(Scalar::U32(7));
        client
            .launch(&fill(), CubeCount::Static(256, 1, 1), args)
            .unwrap();
        client
            .write_at(&b, 4096, Bytes::from_elems(&[9u32; 1024]))
            .unwrap();
        let both = client.read(vec![b, first]);
        assert_eq!(both[0].to_elems::<u32>()[1024], 9);
        client.sync_all().unwrap();
    })
    .join()
    .unwrap();
    recorder.flush().expect("the recording is written");
}

fn replay_on_simulator(path: &Path) -> ReplayReport {
    let file = std::fs::File::open(path).expect("recorded");
    replay(file, FloatTolerance::EXACT, |_| {
        ComputeClient::inline(SimDevice::new(SimConfig::new(0)), not_recording())
    })
    .expect("the recording reads")
}

fn events(path: &Path) -> Vec<Event> {
    let file = std::fs::File::open(path).expect("recorded");
    Reader::new(file).map(|e| e.expect("whole")).collect()
}

fn write_events(path: &Path, events: &[Event]) {
    let mut bytes = header().to_vec();
    for event in events {
        encode_frame(event, &mut bytes);
    }
    std::fs::write(path, bytes).expect("written");
}

#[test]
fn a_recorded_workload_replays_with_every_read_matching() {
    let path = temp("workload");
    record_workload(&path, 1 << 20);
    let report = replay_on_simulator(&path);
    assert_eq!(report.mismatches, vec![]);
    assert_eq!(report.unchecked, Vec::<String>::new());
    assert_eq!(report.skipped.len(), 0);
    assert_eq!(report.calls_refused, 1);
    // Two reads; the failed sync, the clean sync_all.
    assert_eq!((report.reads_matched, report.outcomes_matched), (2, 2));
    // Two creates, a write, three launches, two reads, two syncs, two releases.
    assert_eq!(report.calls_replayed, 12);
    let _ = std::fs::remove_file(&path);
}

#[test]
fn an_altered_read_hash_names_the_call_stream_thread_and_range() {
    let path = temp("altered");
    record_workload(&path, 1 << 20);
    let mut events = events(&path);
    // The first read: a's 16 KiB, four chunks; change the third chunk's hash.
    let (call, thread, stream, range) = events
        .iter()
        .find_map(|e| match e {
            Event::Call {
                call,
                thread,
                stream,
                op: Op::Read { ranges },
                ..
            } => Some((*call, *thread, *stream, ranges[0])),
            _ => None,
        })
        .expect("a read");
    for event in &mut events {
        if let Event::Outcome {
            call: c,
            outcome: Outcome::Read(hashes),
            ..
        } = event
            && *c == call
        {
            hashes[0].hashes.chunks[2] ^= 1;
        }
    }
    write_events(&path, &events);
    let report = replay_on_simulator(&path);
    let expected = Mismatch {
        call,
        kind: "read".to_owned(),
        stream,
        thread,
        detail: MismatchDetail::Bytes {
            index: 0,
            range,
            start: 8192,
            end: 12_288,
        },
    };
    assert_eq!(report.mismatches, vec![expected]);
    assert_eq!(stream, 1);
    assert_eq!((range.offset, range.len), (0, 16_384));
    assert_eq!(
        report.mismatches[0].to_string(),
        format!(
            "call {call} (read on stream 1, thread {thread}): range 0 (buffer {}, bytes 0..16384) \
             first differs in its bytes 8192..12288",
            range.buffer
        )
    );
    let _ = std::fs::remove_file(&path);
}

#[test]
fn data_recorded_as_a_hash_leaves_what_it_reaches_unchecked() {
    let path = temp("hashed");
    // a's 16 KiB are hashed; b's 4 KiB write is kept.
    record_workload(&path, 8192);
    // a's bytes were hashed by the writer thread, as the recording's reader would.
    let values: Vec<u32> = (0..4096).collect();
    let expected = Data::Hash {
        len: 16_384,
        xxh3: data_hash(&Bytes::from_elems(&values)),
    };
    let created = events(&path).into_iter().find_map(|e| match e {
        Event::Call {
            op: Op::Create { data, .. },
            ..
        } => data,
        _ => None,
    });
    assert_eq!(created, Some(expected));
    let report = replay_on_simulator(&path);
    assert_eq!(report.mismatches, vec![]);
    assert_eq!(report.reads_matched, 0);
    assert_eq!(report.unchecked.len(), 2, "{report}");
    assert!(
        report.unchecked[0].ends_with("wrote 16384 bytes recorded only as a hash"),
        "{}",
        report.unchecked[0]
    );
    let _ = std::fs::remove_file(&path);
}

/// Pinned bytes past the limit are held past the write's drop of them and hashed by the
/// writer thread: the recorded hash is theirs, and the block goes back to its pool after. On
/// the simulator, a read's bytes are such a block of the device's host pool.
#[test]
fn a_large_pinned_write_is_hashed_by_the_writer_thread() {
    let path = temp("pinned");
    let recorder = Recorder::open(&path, RecorderConfig { data_bytes_max: 64 }).expect("opens");
    let options = ServerOptions {
        record: RecordTo::Recorder(recorder),
        ..ServerOptions::default()
    };
    let client = ComputeClient::with_options(SimDevice::new(SimConfig::new(3)), options);
    let values: Vec<u32> = (0..8192).map(|v| v * 7).collect();
    let source = client.create(Bytes::from_elems(&values)).unwrap();
    let data = client.read_one(source).unwrap();
    assert_eq!(data.property(), lockstep::AllocationProperty::Pinned);
    let copy = client.empty(data.len()).unwrap();
    client.write(&copy, data).unwrap();
    client.sync().unwrap();
    recorder.flush().expect("the recording is written");
    let written = events(&path).into_iter().find_map(|e| match e {
        Event::Call {
            op: Op::Write { data, .. },
            ..
        } => Some(data),
        _ => None,
    });
    let expected = Data::Hash {
        len: 4 * values.len() as u64,
        xxh3: data_hash(&Bytes::from_elems(&values)),
    };
    assert_eq!(written, Some(expected));
    let report = client.memory_report().unwrap();
    let pool = report.host_pool.expect("the simulator lends pooled blocks");
    assert_eq!(pool.blocks_lent, 0, "{pool:?}");
    let _ = std::fs::remove_file(&path);
}

#[test]
fn a_kernel_the_simulator_cannot_run_is_named() {
    let path = temp("unrunnable");
    let def = KernelDef {
        name: "zero_workgroup".to_owned(),
        workgroup_size: [0, 1, 1],
        bindings: vec![BindingDecl {
            elem: ElemType::U32,
            access: lockstep::kernel::Access::ReadWrite,
        }],
        params: vec![],
        locals: vec![],
        shared: vec![],
        local_arrays: vec![],
        body: vec![],
    };
    let range = Range {
        buffer: 1,
        offset: 0,
        len: 16,
    };
    let call = |call, op| Event::Call {
        call,
        device: 0,
        thread: 0,
        stream: 1,
        op,
        at_ns: 0,
    };
    write_events(
        &path,
        &[
            Event::Device(lockstep::record::DeviceRecord {
                device: 0,
                name: "a GPU".to_owned(),
                backend: 2,
                index: Some(0),
            }),
            Event::Kernel { hash: 42, def },
            call(
                0,
                Op::Create {
                    buffer: 1,
                    bytes: 16,
                    data: None,
                },
            ),
            call(
                1,
                Op::Launch {
                    kernel: 42,
                    count: Count::Static([1, 1, 1]),
                    bindings: vec![range].into(),
                    params: vec![].into(),
                    dry_run: false,
                },
            ),
            call(
                2,
                Op::Read {
                    ranges: vec![range],
                },
            ),
            Event::Outcome {
                call: 2,
                outcome: Outcome::Read(vec![ReadData {
                    hashes: lockstep::record::chunk_hashes(&[0; 16]),
                    bytes: None,
                }]),
                at_ns: 0,
            },
        ],
    );
    let report = replay_on_simulator(&path);
    let reasons: Vec<&String> = report.skipped.keys().collect();
    assert_eq!(reasons.len(), 1);
    assert!(
        reasons[0].starts_with("kernel zero_workgroup does not validate: "),
        "{}",
        reasons[0]
    );
    assert_eq!(report.unchecked.len(), 1);
    assert!(report.unchecked[0].starts_with("call 2 (read): call 1 was not replayed"));
    let _ = std::fs::remove_file(&path);
}

fn lockstep(args: &[&std::ffi::OsStr]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_lockstep"))
        .args(args)
        .output()
        .expect("the lockstep binary runs")
}

#[test]
fn the_summary_counts_calls_streams_threads_bytes_kernels_and_errors() {
    let path = temp("summary");
    record_workload(&path, 8192);
    let output = lockstep(&["recording".as_ref(), path.as_os_str()]);
    assert!(output.status.success(), "{output:?}");
    let pid = format!("process {}", std::process::id());
    let text = String::from_utf8_lossy(&output.stdout).replace(&pid, "process PID");
    insta::assert_snapshot!(text);
    let _ = std::fs::remove_file(&path);
}

/// `lockstep recording --perfetto` draws the recorded run on its own clock: every call a
/// slice on its thread's track and on its stream's, a waiting call's from issue to return.
#[test]
fn the_perfetto_trace_draws_every_call_on_its_thread_and_its_stream() {
    let path = temp("perfetto");
    let out = path.with_extension("json");
    record_workload(&path, 8192);
    let output = lockstep(&[
        "recording".as_ref(),
        path.as_os_str(),
        "--perfetto".as_ref(),
        out.as_os_str(),
    ]);
    assert!(output.status.success(), "{output:?}");
    let trace: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&out).expect("the trace is written")).unwrap();
    let trace = trace["traceEvents"].as_array().expect("trace events");
    let calls = events(&path)
        .iter()
        .filter(|e| matches!(e, Event::Call { .. }))
        .count();
    let slices: Vec<&serde_json::Value> = trace.iter().filter(|e| e["ph"] == "X").collect();
    assert_eq!(
        slices.len(),
        2 * calls,
        "one slice per call on each of two tracks"
    );
    let names = |key: &str| -> Vec<String> {
        let mut names: Vec<String> = (trace.iter())
            .filter(|e| e["name"] == key)
            .map(|e| e["args"]["name"].as_str().unwrap().to_owned())
            .collect();
        names.sort();
        names
    };
    assert_eq!(names("process_name"), ["device 0: lockstep simulator"]);
    // Two threads (numbered process-wide, so by whichever test called first), each on its own
    // stream.
    let tracks = names("thread_name");
    assert_eq!(tracks[..2], ["stream 1", "stream 2"]);
    assert_eq!(tracks.len(), 4);
    assert!(
        tracks[2..].iter().all(|t| t.starts_with("thread ")),
        "{tracks:?}"
    );
    // A read waits for its bytes: its slice lasts until its outcome, after its issue.
    let read = slices
        .iter()
        .find(|e| e["name"] == "read")
        .expect("a read slice");
    assert!(read["dur"].as_f64().unwrap() > 0.1, "{read}");
    let issued: Vec<f64> = slices.iter().map(|e| e["ts"].as_f64().unwrap()).collect();
    assert!(issued.iter().all(|ts| *ts >= 0.0));
    let _ = std::fs::remove_file(&path);
    let _ = std::fs::remove_file(&out);
}

#[test]
fn replay_recording_runs_on_a_printed_seed_and_fails_on_a_mismatch() {
    let path = temp("command");
    record_workload(&path, 1 << 20);
    let output = lockstep(&["replay".as_ref(), "--recording".as_ref(), path.as_os_str()]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}");
    assert!(
        stdout.starts_with(
            "seed: 0; floats that kernels computed match within 0.001 relative, 0.00001 absolute\n"
        ),
        "{stdout}"
    );
    assert!(
        stdout.contains("2 reads and 2 outcomes matched, 0 mismatches"),
        "{stdout}"
    );
    // A truncated recording: the replay stops with the offset.
    let bytes = std::fs::read(&path).unwrap();
    std::fs::write(&path, &bytes[..bytes.len() - 3]).unwrap();
    let output = lockstep(&["replay".as_ref(), "--recording".as_ref(), path.as_os_str()]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(!output.status.success());
    assert!(
        stdout.contains("error: recording truncated: the frame at byte "),
        "{stdout}"
    );
    let _ = std::fs::remove_file(&path);
}

#[test]
fn the_summary_of_a_foreign_file_names_the_offset() {
    let path = temp("foreign");
    std::fs::write(&path, b"LKSTPRXC and then something else").unwrap();
    let output = lockstep(&["recording".as_ref(), path.as_os_str()]);
    assert!(!output.status.success());
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.ends_with(
            "error: not a Lockstep recording: byte 6 differs from the magic \"LKSTPREC\"\n"
        ),
        "{stdout}"
    );
    let _ = std::fs::remove_file(&path);
}

#[test]
fn lockstep_record_records_a_process_that_starts_clients_with_default_options() {
    let path = temp("env");
    // The explorer's clients take the default options, so they record.
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_lockstep"))
        .args(["replay", "--seed", "3"])
        .env("LOCKSTEP_RECORD", &path)
        .env("LOCKSTEP_RECORD_DATA_MAX", "64")
        .output()
        .expect("the lockstep binary runs");
    assert!(output.status.success());
    let events = events(&path);
    assert!(matches!(events[0], Event::Process { pid, data_bytes_max: 64 } if pid > 0));
    assert!(events.iter().any(|e| matches!(e, Event::Device(_))));
    assert!(events.iter().any(|e| matches!(e, Event::Call { .. })));
    let _ = std::fs::remove_file(&path);
}

#[test]
fn a_captured_graph_and_its_replays_replay() {
    let path = temp("graph");
    let recorder = Recorder::open(&path, RecorderConfig::default()).expect("opens");
    let options = ServerOptions {
        record: RecordTo::Recorder(recorder),
        ..ServerOptions::default()
    };
    let mut client = ComputeClient::with_options(SimDevice::new(SimConfig::new(3)), options);
    client.set_stream(StreamId(1));
    let data = client.create(Bytes::from_elems(&[1u32; 64])).unwrap();
    let add = KernelKind::AddConst.kernel();
    client.graph_prepare().unwrap();
    client.start_capture().unwrap();
    let args = KernelArguments::new().binding(&data).param(Scalar::U32(2));
    client
        .launch(&add, CubeCount::Static(8, 1, 1), args)
        .unwrap();
    let graph = client.stop_capture().unwrap();
    graph.replay();
    graph.replay();
    assert_eq!(
        client.read_one(data).unwrap().to_elems::<u32>(),
        vec![5u32; 64]
    );
    drop((graph, client));
    recorder.flush().unwrap();
    let report = replay_on_simulator(&path);
    assert_eq!(report.mismatches, vec![]);
    assert_eq!(report.skipped.len(), 0, "{report}");
    // graph_prepare, start_capture, stop_capture; the read.
    assert_eq!((report.outcomes_matched, report.reads_matched), (3, 1));
    let _ = std::fs::remove_file(&path);
}

/// A call that panics inside `exclusive` (it would wait for the paused actor) was recorded
/// before it panicked, so its replay ran a sync the recorded run never made (found by `explore`
/// recorded and replayed in coverage.sh). Now only calls that were made are recorded.
#[test]
fn calls_refused_inside_exclusive_are_not_recorded() {
    let path = temp("exclusive");
    let recorder = Recorder::open(&path, RecorderConfig::default()).expect("opens");
    let options = ServerOptions {
        record: RecordTo::Recorder(recorder),
        ..ServerOptions::default()
    };
    let device = |seed| SimDevice::new(SimConfig::new(seed));
    for (client, on_actor) in [
        (ComputeClient::with_options(device(1), options), true),
        (ComputeClient::inline(device(2), options), false),
    ] {
        let a = client.create(Bytes::from_elems(&[1u32; 4])).unwrap();
        let inside = client.exclusive(|| client.sync());
        assert!(matches!(
            inside,
            Err(lockstep::ServerError::TaskPanicked { .. })
        ));
        let inside = client.exclusive(|| client.read_one(a.clone()));
        assert!(matches!(
            inside,
            Err(lockstep::ServerError::TaskPanicked { .. })
        ));
        // Only enqueued on an actor thread, so made there; inline it would wait for itself.
        let written = client.exclusive(|| client.write_at(&a, 0, Bytes::from_elems(&[2u32])));
        assert_eq!(matches!(written, Ok(Ok(()))), on_actor, "{written:?}");
        client.sync().unwrap();
    }
    recorder.flush().unwrap();
    let syncs = events(&path)
        .iter()
        .filter(|e| matches!(e, Event::Call { op: Op::Sync, .. }))
        .count();
    let writes = events(&path)
        .iter()
        .filter(|e| {
            matches!(
                e,
                Event::Call {
                    op: Op::Write { .. },
                    ..
                }
            )
        })
        .count();
    // One sync per client after exclusive; the write made on the actor's client only.
    assert_eq!((syncs, writes), (2, 1));
    let report = replay_on_simulator(&path);
    assert_eq!(report.mismatches, vec![], "{report}");
    let _ = std::fs::remove_file(&path);
}

#[test]
fn processes_of_one_world_record_one_file_each() {
    let dir = std::env::temp_dir().join(format!("lockstep-world-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("run.rec");
    let children: Vec<std::process::Child> = (0..2)
        .map(|_| {
            std::process::Command::new(env!("CARGO_BIN_EXE_lockstep"))
                .args(["replay", "--seed", "5"])
                .env("LOCKSTEP_RECORD", &path)
                .env("WORLD_SIZE", "2")
                .stdout(std::process::Stdio::null())
                .spawn()
                .expect("the lockstep binary runs")
        })
        .collect();
    for mut child in children {
        let pid = child.id();
        assert!(child.wait().unwrap().success());
        let events = events(&dir.join(format!("run.rec.{pid}")));
        assert_eq!(
            events[0],
            Event::Process {
                pid,
                data_bytes_max: 1 << 20
            }
        );
    }
    assert!(!path.exists());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn data_that_contradicts_its_size_is_skipped_as_malformed_not_allocated() {
    let path = temp("malformed");
    let call = |call, op| Event::Call {
        call,
        device: 0,
        thread: 0,
        stream: 1,
        op,
        at_ns: 0,
    };
    let huge = lockstep::record::Data::Hash {
        len: u64::MAX,
        xxh3: 0,
    };
    write_events(
        &path,
        &[
            Event::Device(lockstep::record::DeviceRecord {
                device: 0,
                name: "a GPU".to_owned(),
                backend: 2,
                index: None,
            }),
            call(
                0,
                Op::Create {
                    buffer: 1,
                    bytes: 16,
                    data: Some(huge.clone()),
                },
            ),
            call(
                1,
                Op::Create {
                    buffer: 2,
                    bytes: 16,
                    data: None,
                },
            ),
            call(
                2,
                Op::Write {
                    range: Range {
                        buffer: 2,
                        offset: 0,
                        len: 16,
                    },
                    data: huge,
                },
            ),
        ],
    );
    let report = replay_on_simulator(&path);
    let malformed = |kind: &str| {
        format!("a {kind} whose data is not as long as its range (a malformed recording)")
    };
    let expected = [(malformed("create"), 1), (malformed("write"), 1)];
    assert_eq!(report.skipped, expected.into_iter().collect());
    assert_eq!(report.calls_replayed, 1);
    let _ = std::fs::remove_file(&path);
}
