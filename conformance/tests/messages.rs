//! What a person reads: error messages and the `lockstep` command's report, snapshotted.

use lockstep::kernel::{Access, ElemType, KernelBuilder};
use lockstep::{
    CaptureError, CollectiveError, ContractViolation, CubeCount, DeviceError, DeviceId, IoError,
    ServerError, StreamId,
};
use lockstep_sim::{FaultKind, ScriptedFault};

#[test]
fn error_messages_say_what_went_wrong() {
    let device = DeviceId {
        type_id: 0,
        index: 3,
    };
    let other = DeviceId {
        type_id: 0,
        index: 4,
    };
    let mut bad = KernelBuilder::new("bad", [1, 1, 1]);
    let input = bad.binding(ElemType::F32, Access::Read);
    bad.store(input, 0u32, 1.0f32);
    let errors: Vec<ServerError> = vec![
        ServerError::KernelFault {
            kernel: "overrun".into(),
            binding: 0,
            index: 17,
            stream: StreamId(1),
        },
        ServerError::KernelFault {
            kernel: "tiles".into(),
            binding: lockstep::kernel::FaultRecord::SHARED_ARRAY | 1,
            index: 256,
            stream: StreamId(1),
        },
        ServerError::DeviceLost {
            reason: "injected device loss".into(),
        },
        ServerError::device(
            StreamId(1),
            DeviceError::OutOfMemory {
                requested_bytes: 4096,
                available_bytes: 1024,
            },
        ),
        ServerError::device(
            StreamId(1),
            DeviceError::AllocationTooLarge {
                requested_bytes: 1 << 30,
                max_bytes: 128 << 20,
            },
        ),
        ServerError::device(
            StreamId(1),
            DeviceError::TransferFailed {
                reason: "injected failure writing 4 bytes to buffer 2".into(),
            },
        ),
        ServerError::device(
            StreamId(1),
            DeviceError::Compile {
                kernel: "k".into(),
                log: "error: expected ';'".into(),
            },
        ),
        ServerError::TaskPanicked {
            stream: StreamId(2),
            message: "boom".into(),
        },
        IoError::OutOfRange {
            offset: 12,
            len: 8,
            size: 16,
        }
        .into(),
        IoError::SizeMismatch {
            what: "tensor data",
            expected: 24,
            actual: 20,
        }
        .into(),
        IoError::WrongDevice {
            expected: device,
            actual: other,
        }
        .into(),
        IoError::InvalidLaunch {
            kernel: "add".into(),
            reason: "1 bindings given, 2 declared".into(),
        }
        .into(),
        bad.build().unwrap_err().into(),
    ];
    let rendered: Vec<String> = errors.iter().map(|e| e.to_string()).collect();
    insta::assert_snapshot!(rendered.join("\n"));
}

/// The messages of the calls a newcomer meets first: a grid, `sync_all`, a collective's
/// failure naming its stream, a scripted fault that cannot be aimed, a stream labelled twice.
#[test]
fn stream_grid_and_fault_plan_messages_say_what_went_wrong() {
    let errors: Vec<lockstep::Error> = vec![
        CubeCount::covering(10, 0).unwrap_err().into(),
        CubeCount::covering(u64::MAX, 2).unwrap_err().into(),
        ServerError::from(CaptureError::Refused {
            operation: "sync_all",
            stream: StreamId(3),
        })
        .into(),
        ServerError::Collective {
            stream: StreamId((1 << 32) + 2),
            error: CollectiveError::Mismatch {
                reason:
                    "all_reduce #0 got rank 0: 4 bytes of u32, sum; rank 1: 8 bytes of u32, sum"
                        .into(),
            },
        }
        .into(),
        DeviceError::Contract {
            operation: "label_stream".into(),
            violation: ContractViolation::StreamLabelledTwice { index: 1 },
        }
        .into(),
    ];
    let mut rendered: Vec<String> = errors.iter().map(|e| e.to_string()).collect();
    let aimed = ScriptedFault::at(FaultKind::AllocationFailure, 1).on_stream(StreamId(2));
    rendered.push(aimed.unwrap_err().to_string());
    insta::assert_snapshot!(rendered.join("\n"));
}

#[test]
fn check_report_lists_every_property_and_ends_with_the_summary() {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_lockstep"))
        .args(["check", "--device", "sim", "--cases", "4", "--seed", "7"])
        .output()
        .expect("the lockstep binary runs");
    assert!(output.status.success());
    insta::assert_snapshot!(String::from_utf8_lossy(&output.stdout));
}

#[test]
fn replay_prints_the_trace_hash_last() {
    let run = || {
        std::process::Command::new(env!("CARGO_BIN_EXE_lockstep"))
            .args(["replay", "--seed", "3"])
            .output()
            .expect("the lockstep binary runs")
    };
    let (first, second) = (run(), run());
    assert!(first.status.success());
    let last_line = |o: &std::process::Output| {
        String::from_utf8_lossy(&o.stdout)
            .lines()
            .last()
            .unwrap_or_default()
            .to_owned()
    };
    assert!(last_line(&first).starts_with("trace-hash: "));
    assert_eq!(last_line(&first).len(), "trace-hash: ".len() + 16);
    assert_eq!(last_line(&first), last_line(&second));
}

#[test]
fn replay_writes_a_valid_perfetto_trace() {
    let path = std::env::temp_dir().join(format!("lockstep-trace-{}.json", std::process::id()));
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_lockstep"))
        .args(["replay", "--seed", "3", "--trace"])
        .arg(&path)
        .output()
        .expect("the lockstep binary runs");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stdout)
    );
    let text = std::fs::read_to_string(&path).expect("the trace was written");
    let _ = std::fs::remove_file(&path);
    let trace: serde_json::Value = serde_json::from_str(&text).expect("valid JSON");
    let events = trace["traceEvents"]
        .as_array()
        .expect("a traceEvents array");
    let phase = |ph: &str| events.iter().filter(|e| e["ph"] == ph).count();
    // Slices on per-stream tracks, named tracks, a memory counter, and flows from each
    // recorded event to the waits on it (seed 3's world uses several streams).
    assert!(phase("X") > 0 && phase("M") >= 2 && phase("C") > 0);
    assert!(phase("s") > 0 && phase("f") > 0);
    for slice in events.iter().filter(|e| e["ph"] == "X") {
        assert!(slice["ts"].is_number() && slice["dur"].as_f64().is_some_and(|d| d > 0.0));
        assert!(slice["tid"].is_u64() && slice["name"].is_string());
    }
    // Every flow end has its start.
    let ids = |ph: &str| -> Vec<u64> {
        events
            .iter()
            .filter(|e| e["ph"] == ph)
            .filter_map(|e| e["id"].as_u64())
            .collect()
    };
    let starts = ids("s");
    assert!(ids("f").iter().all(|id| starts.contains(id)));
}
