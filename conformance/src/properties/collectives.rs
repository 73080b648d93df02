//! Several devices: all-reduce against a host reference reduction, and copies between clients.

use lockstep::kernel::ElemType;
use lockstep::{
    Bytes, CollectiveError, ComputeClient, CopyDescriptor, Device, DeviceId, Handle,
    ReduceOperation, ServerError, StreamId,
};
use proptest::prelude::*;
use proptest::sample::select;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::{Failure, RunConfig, err, expect_clean, run_cases};
use crate::factory::{DeviceFactory, Session};

/// The most devices a case opens (the simulator draws 1..=4; real backends have what they have).
const WORLD_SIZE_MAX: usize = 4;

#[derive(Clone, Debug)]
struct AllReduceCase {
    devices: usize,
    elem: ElemType,
    op: ReduceOperation,
    elems: usize,
    in_place: bool,
    /// Write the input on stream 1, all-reduce on stream 2, read on stream 3 (else all on the
    /// thread's stream): the runtime must order the collective after the write, the read after
    /// the collective.
    other_streams: bool,
    /// Drop the source right after the call: its memory must outlive the collective.
    release_source: bool,
    /// A device list each device first passes, refused at the call before the valid one.
    refused: Option<BadList>,
    data_seed: u64,
    sim_seed: u64,
}

/// A device list an all-reduce must refuse at the call, naming the calling stream, with
/// nothing enqueued (so no peer is left waiting): the boundary classes of a communicator's ranks.
#[derive(Clone, Copy, Debug)]
enum BadList {
    /// No device: zero ranks, the caller absent (`NotInCommunicator`).
    Empty,
    /// The world without the caller (`NotInCommunicator`; empty for a world of one).
    WithoutCaller,
    /// The world with the caller twice: one rank more than devices (`InvalidDevices`).
    CallerTwice,
    /// The world and the device of index `u32::MAX`, which does not exist (`InvalidDevices`).
    Absent,
    /// The world and a device of another backend (`InvalidDevices`).
    OtherBackend,
}

impl BadList {
    /// The list `self` makes of `world` for caller `own`, and whether the refusal is
    /// `NotInCommunicator` (else `InvalidDevices`).
    fn of(self, world: &[DeviceId], own: DeviceId) -> (Vec<DeviceId>, bool) {
        let with = |extra: DeviceId| world.iter().copied().chain([extra]).collect();
        match self {
            BadList::Empty => (Vec::new(), true),
            BadList::WithoutCaller => (world.iter().copied().filter(|&d| d != own).collect(), true),
            BadList::CallerTwice => (with(own), false),
            BadList::Absent => (
                with(DeviceId {
                    index: u32::MAX,
                    ..own
                }),
                false,
            ),
            BadList::OtherBackend => (
                with(DeviceId {
                    type_id: own.type_id.wrapping_add(1),
                    index: 0,
                }),
                false,
            ),
        }
    }
}

fn bad_list() -> impl Strategy<Value = Option<BadList>> {
    prop::option::of(select(vec![
        BadList::Empty,
        BadList::WithoutCaller,
        BadList::CallerTwice,
        BadList::Absent,
        BadList::OtherBackend,
    ]))
}

/// Element values for `op`: ranges in which integer sums and products of up to four devices do
/// not overflow, so a device may wrap or not, and floats far from overflow and underflow.
pub fn values(elem: ElemType, op: ReduceOperation, count: usize, rng: &mut ChaCha8Rng) -> Bytes {
    use ReduceOperation::*;
    match elem {
        ElemType::U32 => {
            let v: Vec<u32> = (0..count)
                .map(|_| match op {
                    Sum | Mean => rng.random_range(0..1 << 20),
                    Prod => rng.random_range(0..=5),
                    Min | Max => rng.random(),
                })
                .collect();
            Bytes::from_elems(&v)
        }
        ElemType::I32 => {
            let v: Vec<i32> = (0..count)
                .map(|_| match op {
                    Sum | Mean => rng.random_range(-(1 << 20)..1 << 20),
                    Prod => rng.random_range(-4..=4),
                    Min | Max => rng.random(),
                })
                .collect();
            Bytes::from_elems(&v)
        }
        ElemType::F32 => {
            let v: Vec<f32> = (0..count)
                .map(|_| match op {
                    Sum | Mean => rng.random_range(-1000.0..1000.0),
                    Prod => rng.random_range(-2.0..2.0),
                    Min | Max => rng.random_range(-1e6..1e6),
                })
                .collect();
            Bytes::from_elems(&v)
        }
        ElemType::F16 | ElemType::BF16 => {
            unreachable!("the property draws 32-bit element types only (see `case`)")
        }
    }
}

/// The reduction of `inputs` (one per device, in rank order), folded in rank order: the order
/// the simulator promises.
pub fn reference(inputs: &[Bytes], elem: ElemType, op: ReduceOperation) -> Vec<u32> {
    let n = inputs.len();
    let count = inputs[0].len() / 4;
    let column = |i: usize| inputs.iter().map(move |b| b.to_elems::<u32>()[i]);
    (0..count)
        .map(|i| match elem {
            ElemType::U32 => {
                let mut it = column(i);
                let first = it.next().expect("at least one device");
                let folded = it.fold(first, |a, b| match op {
                    ReduceOperation::Sum | ReduceOperation::Mean => a.wrapping_add(b),
                    ReduceOperation::Prod => a.wrapping_mul(b),
                    ReduceOperation::Min => a.min(b),
                    ReduceOperation::Max => a.max(b),
                });
                if op == ReduceOperation::Mean {
                    folded / n as u32
                } else {
                    folded
                }
            }
            ElemType::I32 => {
                let mut it = column(i).map(|b| b as i32);
                let first = it.next().expect("at least one device");
                let folded = it.fold(first, |a, b| match op {
                    ReduceOperation::Sum | ReduceOperation::Mean => a.wrapping_add(b),
                    ReduceOperation::Prod => a.wrapping_mul(b),
                    ReduceOperation::Min => a.min(b),
                    ReduceOperation::Max => a.max(b),
                });
                (if op == ReduceOperation::Mean {
                    folded / n as i32
                } else {
                    folded
                }) as u32
            }
            ElemType::F32 => {
                let mut it = column(i).map(f32::from_bits);
                let first = it.next().expect("at least one device");
                let folded = it.fold(first, |a, b| match op {
                    ReduceOperation::Sum | ReduceOperation::Mean => a + b,
                    ReduceOperation::Prod => a * b,
                    ReduceOperation::Min => a.min(b),
                    ReduceOperation::Max => a.max(b),
                });
                (if op == ReduceOperation::Mean {
                    folded / n as f32
                } else {
                    folded
                })
                .to_bits()
            }
            ElemType::F16 | ElemType::BF16 => {
                unreachable!("the property draws 32-bit element types only (see `case`)")
            }
        })
        .collect()
}

/// How far a device that sums floats in its own order may land from the rank-order result.
///
/// Any order of summing `n` terms is within `(n - 1) * eps * sum(|x|)` of the exact sum
/// (Higham, *Accuracy and Stability of Numerical Algorithms*, 4.2), so two orders differ by at
/// most twice that; NCCL's average scales each term by `1/n` before summing (one more rounding
/// per term), and its ring order is not rank order. A product of `n` terms carries `n - 1`
/// roundings in any order. `2 * n * eps` times the magnitude covers all three.
fn tolerance(inputs: &[Bytes], i: usize, op: ReduceOperation) -> f32 {
    let n = inputs.len() as f32;
    let terms = inputs
        .iter()
        .map(|b| f32::from_bits(b.to_elems::<u32>()[i]).abs());
    let magnitude = match op {
        ReduceOperation::Sum => terms.sum::<f32>(),
        ReduceOperation::Mean => terms.sum::<f32>() / n,
        ReduceOperation::Prod => terms.product::<f32>(),
        ReduceOperation::Min | ReduceOperation::Max => 0.0,
    };
    2.0 * n * f32::EPSILON * magnitude
}

fn all_reduce_case(world_size_max: usize) -> impl Strategy<Value = AllReduceCase> {
    use ReduceOperation::*;
    (
        1..=world_size_max.clamp(1, WORLD_SIZE_MAX),
        select(vec![ElemType::U32, ElemType::I32, ElemType::F32]),
        select(vec![Sum, Prod, Min, Max, Mean]),
        prop_oneof![3 => 1..=16usize, 1 => 1..=4096usize],
        (any::<bool>(), any::<bool>(), any::<bool>()),
        bad_list(),
        any::<u64>(),
        any::<u64>(),
    )
        .prop_map(
            |(devices, elem, op, elems, flags, refused, data_seed, sim_seed)| AllReduceCase {
                devices,
                elem,
                op,
                elems,
                in_place: flags.0,
                other_streams: flags.1,
                release_source: flags.2,
                refused,
                data_seed,
                sim_seed,
            },
        )
}

/// A device is among the devices its client enumerates, listed once, with its backend's id;
/// counts agree with the lists; another backend's id lists nothing.
fn check_enumeration<D: Device>(client: &ComputeClient<D>) -> Result<(), String> {
    let own = client.peer_id();
    let all = client.enumerate_all_devices();
    let listed = all.iter().filter(|d| **d == own).count();
    let foreign = D::TYPE_ID.wrapping_add(1);
    ensure!(
        listed == 1
            && all == client.enumerate_devices(D::TYPE_ID)
            && all.iter().all(|d| d.type_id == D::TYPE_ID)
            && client.device_count(D::TYPE_ID) == all.len()
            && client.device_count_total() == all.len()
            && client.device_count(foreign) == 0,
        "device {own} enumerates {all:?}"
    );
    Ok(())
}

fn open_world<F: DeviceFactory>(
    factory: &F,
    seed: u64,
    count: usize,
) -> Result<Vec<Session<F::Device>>, String> {
    factory
        .open_world(seed, count)
        .ok_or_else(|| format!("the factory cannot open {count} devices of one world"))
}

/// Every device of a world all-reduces its own random input; each result must equal the
/// reference reduction, element for element and in length. Runs only on devices with
/// collectives (the property's `applies`): any refusal here fails it.
pub(super) fn all_reduce<F: DeviceFactory>(factory: &F, config: RunConfig) -> Result<(), Failure> {
    let strategy = all_reduce_case(factory.world_size_max());
    run_cases(config, "all_reduce", strategy, |case| {
        let sessions = open_world(factory, case.sim_seed, case.devices)?;
        for session in &sessions {
            check_enumeration(&session.client)?;
        }
        let ids: Vec<DeviceId> = sessions.iter().map(|s| s.client.peer_id()).collect();
        let mut rng = ChaCha8Rng::seed_from_u64(case.data_seed);
        let inputs: Vec<Bytes> = (0..case.devices)
            .map(|_| values(case.elem, case.op, case.elems, &mut rng))
            .collect();
        let mut outputs = Vec::with_capacity(case.devices);
        for (session, input) in sessions.iter().zip(&inputs) {
            let (writer, c) = (
                on_stream(&session.client, &case, 1),
                on_stream(&session.client, &case, 2),
            );
            let src = writer
                .create(Bytes::from(vec![0u8; input.len()]))
                .map_err(|e| format!("create: {e}"))?;
            // Enqueued, not executed: the all-reduce must see it.
            writer
                .write(&src, input.clone())
                .map_err(|e| format!("write: {e}"))?;
            let dst = if case.in_place {
                src.clone()
            } else {
                c.empty(input.len()).map_err(|e| format!("empty: {e}"))?
            };
            let kept = (!case.release_source).then(|| src.clone());
            if let Some(bad) = case.refused {
                refuse_list(&c, bad, (&src, &dst), &ids, &case)?;
            }
            c.all_reduce(src, dst.clone(), case.elem, ids.clone(), case.op)
                .map_err(|e| format!("all_reduce on {}: {e}", c.peer_id()))?;
            outputs.push((dst, kept));
        }
        let expected = reference(&inputs, case.elem, case.op);
        let exact = factory.deterministic()
            || case.elem != ElemType::F32
            || matches!(case.op, ReduceOperation::Min | ReduceOperation::Max);
        for (session, (dst, _kept)) in sessions.iter().zip(outputs) {
            let c = on_stream(&session.client, &case, 3);
            let got = c
                .read_one(dst)
                .map_err(|e| format!("read on {}: {e}", c.peer_id()))?
                .to_elems::<u32>();
            judge(c.peer_id(), &got, &expected, exact, &inputs, &case)?;
            expect_clean(session)?;
        }
        Ok(())
    })
}

/// An all-reduce of `src` into `dst` over `bad`'s list of `world` on `c`: refused at the call
/// with the error the list's class names, on `c`'s stream.
fn refuse_list<D: Device>(
    c: &ComputeClient<D>,
    bad: BadList,
    (src, dst): (&Handle, &Handle),
    world: &[DeviceId],
    case: &AllReduceCase,
) -> Result<(), String> {
    let own = c.peer_id();
    let (list, not_in) = bad.of(world, own);
    let result = c.all_reduce(src.clone(), dst.clone(), case.elem, list.clone(), case.op);
    let refused = match &result {
        Err(ServerError::Collective { stream, error }) if *stream == c.stream_id() => match error {
            CollectiveError::NotInCommunicator { device, devices } => {
                not_in && *device == own && *devices == list
            }
            CollectiveError::InvalidDevices { devices, .. } => !not_in && *devices == list,
            _ => false,
        },
        _ => false,
    };
    ensure!(
        refused,
        "all_reduce on {own} over {bad:?} ({list:?}) must be refused at the call, got {result:?}"
    );
    Ok(())
}

/// Device `device`'s all-reduce result `got` against the `expected` reference of `inputs`:
/// as many elements, each equal (or, where the device may sum floats in its own order and
/// `exact` is false, within [`tolerance`]).
fn judge(
    device: DeviceId,
    got: &[u32],
    expected: &[u32],
    exact: bool,
    inputs: &[Bytes],
    case: &AllReduceCase,
) -> Result<(), String> {
    ensure!(
        got.len() == expected.len(),
        "device {device}: the result has {} elements, the reference {}",
        got.len(),
        expected.len()
    );
    for (i, (&g, &w)) in got.iter().zip(expected).enumerate() {
        let close = if exact {
            g == w
        } else {
            (f32::from_bits(g) - f32::from_bits(w)).abs() <= tolerance(inputs, i, case.op)
        };
        ensure!(
            close,
            "device {device} element {i}: got {g:#010x}, reference {w:#010x} ({} {} of {:?})",
            case.elem,
            case.op,
            inputs
                .iter()
                .map(|b| b.to_elems::<u32>()[i])
                .collect::<Vec<_>>()
        );
    }
    Ok(())
}

/// `client` pinned to `stream` when the case spreads its work over streams.
fn on_stream<D: Device>(
    client: &ComputeClient<D>,
    case: &AllReduceCase,
    stream: u64,
) -> ComputeClient<D> {
    let mut client = client.clone();
    if case.other_streams {
        client.set_stream(StreamId(stream));
    }
    client
}

#[derive(Clone, Debug)]
struct ToClientCase {
    /// Two devices of one world (a peer copy where the backend has collectives), else two
    /// clients of independent devices (read-then-write).
    peers: bool,
    /// `Some((rows, cols))`: a tensor through `to_client_tensor` (pitched rows copy by
    /// read-then-write); `None`: a plain handle through `to_client`.
    tensor: Option<(usize, usize)>,
    elems: usize,
    /// Read the copy on another stream of the destination.
    other_stream: bool,
    data_seed: u64,
    sim_seed: u64,
}

fn to_client_case() -> impl Strategy<Value = ToClientCase> {
    (
        any::<bool>(),
        prop::option::of((1..=8usize, 1..=40usize)),
        prop_oneof![3 => 1..=64usize, 1 => 1..=(1usize << 16)],
        any::<bool>(),
        any::<u64>(),
        any::<u64>(),
    )
        .prop_map(
            |(peers, tensor, elems, other_stream, data_seed, sim_seed)| ToClientCase {
                peers,
                tensor,
                elems,
                other_stream,
                data_seed,
                sim_seed,
            },
        )
}

/// Copies `src` to `dst`, either as the plain handle or as the tensor the case describes.
fn copy<D: Device>(
    case: &ToClientCase,
    src: &ComputeClient<D>,
    dst: &ComputeClient<D>,
    data: &Bytes,
) -> Result<(Handle, Handle), String> {
    match case.tensor {
        None => {
            let handle = src
                .create(Bytes::from(vec![0u8; data.len()]))
                .map_err(err("create"))?;
            // Enqueued, not executed: the copy must see it.
            src.write(&handle, data.clone())
                .map_err(|e| format!("write: {e}"))?;
            let copied = src
                .to_client(handle.clone(), dst, ElemType::U32)
                .map_err(err("to_client"))?;
            Ok((handle, copied))
        }
        Some((rows, cols)) => {
            let layout = src
                .create_tensor(data.clone(), &[rows, cols], 4)
                .map_err(err("create_tensor"))?;
            let descriptor =
                CopyDescriptor::new(layout.memory.clone(), vec![rows, cols], layout.strides, 4);
            let copied = src
                .to_client_tensor(descriptor, dst, ElemType::U32)
                .map_err(err("to_client_tensor"))?;
            Ok((layout.memory, copied))
        }
    }
}

/// A copy to another client holds the source's bytes as the source stream last wrote them
/// before the call, dense, and is read back on any stream of the destination; later writes to
/// the source do not reach it.
pub(super) fn to_client<F: DeviceFactory>(factory: &F, config: RunConfig) -> Result<(), Failure> {
    run_cases(config, "to_client", to_client_case(), |case| {
        let sessions = if case.peers && factory.world_size_max() >= 2 {
            open_world(factory, case.sim_seed, 2)?
        } else {
            vec![factory.open(case.sim_seed), factory.open(!case.sim_seed)]
        };
        let (a, b) = (&sessions[0].client, &sessions[1].client);
        let elems = case.tensor.map_or(case.elems, |(rows, cols)| rows * cols);
        let mut rng = ChaCha8Rng::seed_from_u64(case.data_seed);
        let values: Vec<u32> = (0..elems).map(|_| rng.random()).collect();
        let data = Bytes::from_elems(&values);
        let (source, copied) = copy(&case, a, b, &data)?;
        ensure!(
            copied.device() == b.device_id() && copied.size() == data.len() as u64,
            "the copy is {} bytes on {}, expected {} bytes on {}",
            copied.size(),
            copied.device(),
            data.len(),
            b.device_id()
        );
        a.write(&source, Bytes::from(vec![0xA5u8; source.size() as usize]))
            .map_err(|e| format!("write after the copy: {e}"))?;
        let mut reader = b.clone();
        if case.other_stream {
            reader.set_stream(StreamId(7));
        }
        let got = reader
            .read_one(copied)
            .map_err(|e| format!("read of the copy: {e}"))?;
        ensure!(
            got[..] == data[..],
            "the copy differs from the source ({} bytes)",
            data.len()
        );
        for session in &sessions {
            session
                .client
                .sync()
                .map_err(|e| format!("sync on {}: {e}", session.client.peer_id()))?;
            expect_clean(session)?;
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn case(elems: usize) -> AllReduceCase {
        AllReduceCase {
            devices: 2,
            elem: ElemType::U32,
            op: ReduceOperation::Sum,
            elems,
            in_place: false,
            other_streams: false,
            release_source: false,
            refused: None,
            data_seed: 0,
            sim_seed: 0,
        }
    }

    #[test]
    fn bad_lists_are_the_boundary_classes_of_a_communicators_ranks() {
        let id = |index| DeviceId { type_id: 3, index };
        let world = [id(0), id(1)];
        assert_eq!(BadList::Empty.of(&world, id(1)), (vec![], true));
        assert_eq!(
            BadList::WithoutCaller.of(&world, id(1)),
            (vec![id(0)], true)
        );
        assert_eq!(BadList::WithoutCaller.of(&[id(0)], id(0)), (vec![], true));
        assert_eq!(
            BadList::CallerTwice.of(&world, id(1)),
            (vec![id(0), id(1), id(1)], false)
        );
        assert_eq!(
            BadList::Absent.of(&world, id(0)),
            (vec![id(0), id(1), id(u32::MAX)], false)
        );
        let other = DeviceId {
            type_id: 4,
            index: 0,
        };
        assert_eq!(
            BadList::OtherBackend.of(&world, id(0)),
            (vec![id(0), id(1), other], false)
        );
    }

    #[test]
    fn a_result_is_judged_by_its_length_and_every_element() {
        let device = DeviceId {
            type_id: 0,
            index: 1,
        };
        let inputs = [
            Bytes::from_elems(&[1u32, 2, 3]),
            Bytes::from_elems(&[4u32, 5, 6]),
        ];
        let expected = reference(&inputs, ElemType::U32, ReduceOperation::Sum);
        assert_eq!(expected, vec![5, 7, 9]);
        let judged = |got: &[u32]| judge(device, got, &expected, true, &inputs, &case(3));
        assert_eq!(judged(&[5, 7, 9]), Ok(()));
        assert_eq!(
            judged(&[5, 7]),
            Err("device 0:1: the result has 2 elements, the reference 3".to_owned())
        );
        assert_eq!(
            judged(&[5, 7, 9, 0]),
            Err("device 0:1: the result has 4 elements, the reference 3".to_owned())
        );
        assert_eq!(
            judged(&[5, 8, 9]),
            Err(
                "device 0:1 element 1: got 0x00000008, reference 0x00000007 (u32 sum of [2, 5])"
                    .to_owned()
            )
        );
    }
}
