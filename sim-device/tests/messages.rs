//! What a person reads: the runtime's and the simulator's error messages, snapshotted.

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
