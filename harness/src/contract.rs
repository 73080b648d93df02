//! The `Device` contract's checks, called on a device directly, with no runtime in between.
//!
//! Each case breaks one precondition of a call (a range outside its buffer, a buffer, stream or
//! graph of another device, a launch that does not match its kernel, a graph whose buffer was
//! freed, a kernel the device cannot hold, and on devices with collectives a communicator
//! without this device, a collective on one never created or over unequal ranges) and names
//! the refusal every device must give: the same `DeviceError::Contract` value on every device
//! (`DeviceError::Compile` for the kernel). Together the cases reach every check of
//! `lockstep::device::contract`. Then the device must still work: nothing refused was enqueued, no
//! asynchronous failure is pending, and a write reads back exactly. `conformance/tests/device_contract.rs` runs it on the simulator;
//! `lockstep-wgpu`'s and `lockstep-cuda`'s device tests run it on theirs.

use lockstep::collective::CommunicatorId;
use lockstep::device::{BufferSlice, LaunchCount};
use lockstep::kernel::{
    CompileOptions, ElemType, FaultRecord, KernelChecks, KernelDef, KernelError, Scalar, SharedDecl,
};
use lockstep::{ContractViolation, Device, DeviceError, ReduceOperation};

use lockstep_kernels::elementwise::KernelKind;

/// Bytes of every buffer the cases use.
const BUFFER_BYTES: u64 = 64;

/// What the device reads back after every case: its write of these bytes.
pub const PATTERN: [u8; 8] = [1, 2, 3, 4, 5, 6, 7, 8];

/// One broken precondition: what the device returned and what the contract says it returns.
#[derive(Debug, PartialEq)]
pub struct Case {
    /// The precondition broken, for the report.
    pub name: &'static str,
    /// What the device returned.
    pub got: Result<(), DeviceError>,
    /// What the contract says it returns (a `DeviceError::Contract`).
    pub want: Result<(), DeviceError>,
}

/// Every case, then what the device did afterwards.
#[derive(Debug)]
pub struct Report {
    /// Each case, in the order run.
    pub cases: Vec<Case>,
    /// Asynchronous failures on the stream after every case (none: refusals enqueue nothing).
    pub errors: Vec<DeviceError>,
    /// [`PATTERN`] written after every case and read back.
    pub read_back: Vec<u8>,
}

impl Report {
    /// The cases whose outcome differs from the contract's.
    pub fn wrong(&self) -> Vec<&Case> {
        self.cases.iter().filter(|c| c.got != c.want).collect()
    }

    /// For tests: panics, saying what differs, unless every case was refused as the contract
    /// says and the device then worked.
    pub fn assert_conforms(&self) {
        assert_eq!(self.wrong(), Vec::<&Case>::new(), "refusals that differ");
        assert_eq!(self.errors, vec![], "failures left on the stream");
        assert_eq!(self.read_back, PATTERN, "bytes read back after the cases");
    }
}

fn refused(operation: &str, violation: ContractViolation) -> Result<(), DeviceError> {
    Err(DeviceError::Contract {
        operation: operation.to_owned(),
        violation,
    })
}

fn out_of_bounds(operation: &str, offset: u64, len: u64) -> Result<(), DeviceError> {
    let buffer_bytes = BUFFER_BYTES;
    refused(
        operation,
        ContractViolation::OutOfBounds {
            offset,
            len,
            buffer_bytes,
        },
    )
}

fn at<B>(buffer: &B, offset: u64, len: u64) -> BufferSlice<'_, B> {
    BufferSlice {
        buffer,
        offset,
        len,
    }
}

/// Runs every case on `device`; `other`, a second device of the same backend, lends the
/// foreign buffer, stream and graph. A setup call that fails is returned as is.
pub fn run<D: Device>(device: &mut D, other: &mut D) -> Result<Report, DeviceError> {
    let mut cases = transfer_cases(device, other)?;
    cases.extend(launch_cases(device, other)?);
    cases.push(compile_case(device));
    cases.extend(collective_cases(device)?);
    cases.extend(lifetime_cases(device, other)?);
    let stream = device.create_stream()?;
    let buffer = device.allocate(BUFFER_BYTES)?;
    device.write(stream, &buffer, 0, &PATTERN)?;
    let pending = device.read(stream, &buffer, 0, PATTERN.len() as u64)?;
    let read_back = device.wait_read(pending)?.into_vec();
    device.synchronize(stream)?;
    let errors = device.take_errors(stream);
    device.free(buffer);
    Ok(Report {
        cases,
        errors,
        read_back,
    })
}

/// Writes, reads and copies outside their buffers, into another device's buffer, on another
/// device's stream.
fn transfer_cases<D: Device>(device: &mut D, other: &mut D) -> Result<Vec<Case>, DeviceError> {
    let foreign = other.allocate(BUFFER_BYTES)?;
    let buf = device.allocate(BUFFER_BYTES)?;
    let s = device.create_stream()?;
    // The second stream of `other`: an index this device never handed out.
    other.create_stream()?;
    let foreign_stream = other.create_stream()?;
    let cases = vec![
        Case {
            name: "write past the end",
            got: device.write(s, &buf, 60, &[0; 8]),
            want: out_of_bounds("write", 60, 8),
        },
        Case {
            name: "write whose end overflows u64",
            got: device.write(s, &buf, u64::MAX, &[0; 2]),
            want: out_of_bounds("write", u64::MAX, 2),
        },
        Case {
            name: "read past the end",
            got: device.read(s, &buf, 32, 40).map(drop),
            want: out_of_bounds("read", 32, 40),
        },
        Case {
            name: "copy from past the end",
            got: device.copy(s, at(&buf, 48, 32), &buf, 0),
            want: out_of_bounds("copy source", 48, 32),
        },
        Case {
            name: "copy to past the end",
            got: device.copy(s, at(&buf, 0, 32), &buf, 40),
            want: out_of_bounds("copy destination", 40, 32),
        },
        Case {
            name: "write to another device's buffer",
            got: device.write(s, &foreign, 0, &[0; 4]),
            want: refused("write", ContractViolation::ForeignBuffer),
        },
        Case {
            name: "copy from another device's buffer",
            got: device.copy(s, at(&foreign, 0, 4), &buf, 0),
            want: refused("copy source", ContractViolation::ForeignBuffer),
        },
        Case {
            name: "write on a stream of another device",
            got: device.write(foreign_stream, &buf, 0, &[0; 4]),
            want: refused("write", ContractViolation::UnknownStream { index: 1 }),
        },
        Case {
            name: "allocate nothing",
            got: device.allocate(0).map(|b| device.free(b)),
            want: refused("allocate", ContractViolation::EmptyAllocation),
        },
    ];
    other.free(foreign);
    device.free(buf);
    Ok(cases)
}

/// The kernel the launch cases use: one read-write `u32` binding, one `u32` parameter.
fn add_const() -> KernelDef {
    KernelKind::AddConst.kernel().def().clone()
}

/// Compile options for `add_const` without the runtime's guards, so that the cases name the
/// kernel's own bindings only.
#[allow(
    unsafe_code,
    reason = "asks for an unchecked kernel, whose contract add_const keeps"
)]
fn add_const_unchecked() -> CompileOptions {
    CompileOptions {
        // SAFETY: `add_const` (`KernelKind::AddConst`) guards its one access with
        // `i < data.len()`, so no launch of it reaches out of range, checked or not.
        checks: unsafe { KernelChecks::unchecked() },
        kernel_id: 0,
    }
}

/// Launches whose bindings, parameters, fault record or counts do not match the kernel.
fn launch_cases<D: Device>(device: &mut D, other: &mut D) -> Result<Vec<Case>, DeviceError> {
    let def = add_const();
    let unchecked = add_const_unchecked();
    let checked = CompileOptions::checked(1);
    let kernel = device.compile(&def, unchecked)?;
    let checked_kernel = device.compile(&def, checked)?;
    let foreign = other.allocate(BUFFER_BYTES)?;
    let buf = device.allocate(BUFFER_BYTES)?;
    let s = device.create_stream()?;
    let k = [Scalar::U32(1)];
    let mut launch = |bindings: &[BufferSlice<'_, D::Buffer>], params: &[Scalar]| {
        device.launch(s, &kernel, LaunchCount::Static([1, 1, 1]), bindings, params)
    };
    let binding = "launch of `add_const` binding 0";
    let mut cases = vec![
        Case {
            name: "launch with a binding past the end",
            got: launch(&[at(&buf, 32, 64)], &k),
            want: out_of_bounds(binding, 32, 64),
        },
        Case {
            name: "launch with a binding off a word",
            got: launch(&[at(&buf, 2, 8)], &k),
            want: refused(
                binding,
                ContractViolation::Misaligned {
                    offset: 2,
                    alignment_bytes: 4,
                },
            ),
        },
        Case {
            name: "launch with another device's buffer",
            got: launch(&[at(&foreign, 0, 64)], &k),
            want: refused(binding, ContractViolation::ForeignBuffer),
        },
        Case {
            name: "launch without its binding",
            got: launch(&[], &k),
            want: refused(
                "launch of `add_const`",
                ContractViolation::BindingCount {
                    given: 0,
                    expected: 1,
                },
            ),
        },
        Case {
            name: "launch with a mistyped parameter",
            got: launch(&[at(&buf, 0, 64)], &[Scalar::F32(1.0)]),
            want: refused(
                "launch of `add_const`",
                ContractViolation::ParamTypes {
                    given: vec![ElemType::F32],
                    declared: vec![ElemType::U32],
                },
            ),
        },
    ];
    cases.push(Case {
        name: "indirect launch with short counts",
        got: device.launch(
            s,
            &kernel,
            LaunchCount::Dynamic(at(&buf, 0, 8)),
            &[at(&buf, 0, 64)],
            &k,
        ),
        want: refused(
            "launch of `add_const` workgroup counts",
            ContractViolation::TooShort {
                len: 8,
                min_bytes: 12,
            },
        ),
    });
    cases.push(Case {
        name: "checked launch with a short fault record",
        got: device.launch(
            s,
            &checked_kernel,
            LaunchCount::Static([1, 1, 1]),
            &[at(&buf, 0, 32), at(&buf, 32, 8)],
            &k,
        ),
        want: refused(
            "launch of `add_const` fault record",
            ContractViolation::TooShort {
                len: 8,
                min_bytes: FaultRecord::BYTES as u64,
            },
        ),
    });
    other.free(foreign);
    device.free(buf);
    Ok(cases)
}

/// A kernel that needs more workgroup-shared memory than the device has: no compiler can build
/// it, so `compile` refuses it with the validator's message.
fn compile_case<D: Device>(device: &mut D) -> Case {
    let mut def = add_const();
    let limit = device.properties().max_shared_memory_bytes;
    let words = u32::try_from(limit / 4 + 1).expect("shared memory of fewer than 2^32 words");
    def.shared.push(SharedDecl {
        elem: ElemType::U32,
        len: words,
    });
    let too_large = KernelError::SharedMemoryTooLarge {
        kernel: def.name.clone(),
        bytes: u64::from(words) * 4,
        limit,
    };
    let options = CompileOptions::checked(0);
    Case {
        name: "compile a kernel with more shared memory than the device has",
        got: device.compile(&def, options).map(drop),
        want: Err(DeviceError::Compile {
            kernel: def.name.clone(),
            log: too_large.to_string(),
        }),
    }
}

/// On a device with collectives: a communicator without this device (over one that does not
/// exist), an all-reduce over ranges of unequal length, and one on a communicator never
/// created. None without collectives (their methods are refused as unsupported there).
fn collective_cases<D: Device>(device: &mut D) -> Result<Vec<Case>, DeviceError> {
    if !device.supports_collectives() {
        return Ok(Vec::new());
    }
    let (ordinal, device_count) = (device.ordinal(), device.device_count());
    let buf = device.allocate(BUFFER_BYTES)?;
    let s = device.create_stream()?;
    let never_created = CommunicatorId(u64::MAX);
    let (u32s, sum) = (ElemType::U32, ReduceOperation::Sum);
    let cases = vec![
        Case {
            name: "create a communicator without this device",
            got: device.create_communicator(never_created, &[device_count]),
            want: refused(
                "create_communicator",
                ContractViolation::Peers {
                    ordinal,
                    peers: vec![device_count],
                    device_count,
                },
            ),
        },
        Case {
            name: "all-reduce into a range of another length",
            got: device.all_reduce(s, never_created, at(&buf, 0, 8), at(&buf, 32, 4), u32s, sum),
            want: refused(
                "all_reduce",
                ContractViolation::ReduceRanges {
                    src_offset: 0,
                    src_bytes: 8,
                    dst_offset: 32,
                    dst_bytes: 4,
                    elem_bytes: 4,
                },
            ),
        },
        Case {
            name: "all-reduce on a communicator never created",
            got: device.all_reduce(s, never_created, at(&buf, 0, 8), at(&buf, 32, 8), u32s, sum),
            want: refused(
                "all_reduce",
                ContractViolation::UnknownCommunicator { id: u64::MAX },
            ),
        },
    ];
    device.free(buf);
    Ok(cases)
}

/// Replays of a graph whose buffer was freed, or that another device captured; a free of
/// another device's buffer (which must leave this device's memory alone: the final read
/// checks it).
fn lifetime_cases<D: Device>(device: &mut D, other: &mut D) -> Result<Vec<Case>, DeviceError> {
    let def = add_const();
    let options = add_const_unchecked();
    let s = device.create_stream()?;
    let (graph, buffer) = capture_one_launch(device, s, &def, options)?;
    device.free(buffer);
    let other_stream = other.create_stream()?;
    let (foreign_graph, foreign_buffer) = capture_one_launch(other, other_stream, &def, options)?;
    let cases = vec![
        Case {
            name: "replay after a buffer of the graph was freed",
            got: device.replay(s, &graph),
            want: refused("replay", ContractViolation::FreedBuffer),
        },
        Case {
            name: "replay of another device's graph",
            got: device.replay(s, &foreign_graph),
            want: refused("replay", ContractViolation::ForeignGraph),
        },
    ];
    device.destroy_graph(graph);
    other.destroy_graph(foreign_graph);
    other.free(foreign_buffer);
    // This device's first buffers and `other`'s share ids on the simulator: freeing the
    // foreign one here must not free this device's.
    let foreign = other.allocate(BUFFER_BYTES)?;
    device.free(foreign);
    Ok(cases)
}

/// Captures one launch of `def` on a fresh buffer of `device`: the graph and its buffer.
fn capture_one_launch<D: Device>(
    device: &mut D,
    stream: D::Stream,
    def: &KernelDef,
    options: CompileOptions,
) -> Result<(D::Graph, D::Buffer), DeviceError> {
    let kernel = device.compile(def, options)?;
    let buffer = device.allocate(BUFFER_BYTES)?;
    device.write(stream, &buffer, 0, &[0; BUFFER_BYTES as usize])?;
    device.synchronize(stream)?;
    device.begin_capture(stream)?;
    let bindings = [at(&buffer, 0, BUFFER_BYTES)];
    let count = LaunchCount::Static([1, 1, 1]);
    let launched = device.launch(stream, &kernel, count, &bindings, &[Scalar::U32(1)]);
    let graph = device.end_capture(stream);
    launched?;
    Ok((graph?, buffer))
}
