//! Data: what is written is read back, and what does not fit is refused with a typed error.

use lockstep::kernel::Scalar;
use lockstep::{
    Bytes, ComputeClient, CopyDescriptor, CubeCount, Device, Handle, IoError, KernelArguments,
    MemoryLayoutDescriptor, MemoryLayoutStrategy, ServerError,
};
use proptest::prelude::*;
use proptest::sample::{Index, select};
use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::{Failure, RunConfig, err, expect_baseline, expect_clean, run_cases};
use crate::factory::DeviceFactory;
use lockstep_kernels::elementwise::KernelKind;

pub(super) fn random_bytes(len: usize, seed: u64) -> Vec<u8> {
    let mut bytes = vec![0u8; len];
    ChaCha8Rng::seed_from_u64(seed).fill_bytes(&mut bytes);
    bytes
}

#[derive(Clone, Debug)]
struct RoundTrip {
    size: usize,
    fill_seed: u64,
    patch_at: Index,
    patch_len: usize,
    shape: Vec<usize>,
    elem_size: usize,
    sim_seed: u64,
}

fn round_trip_case() -> impl Strategy<Value = RoundTrip> {
    let size = prop_oneof![4 => 0..=64usize, 3 => 0..=4096usize, 1 => 0..=(1usize << 20)];
    (
        size,
        any::<u64>(),
        any::<Index>(),
        0..=256usize,
        proptest::collection::vec(0..=6usize, 0..=4),
        select(vec![1usize, 2, 4, 8]),
        any::<u64>(),
    )
        .prop_map(
            |(size, fill_seed, patch_at, patch_len, shape, elem_size, sim_seed)| RoundTrip {
                size,
                fill_seed,
                patch_at,
                patch_len,
                shape,
                elem_size,
                sim_seed,
            },
        )
}

/// Bytes and tensors written come back as written: `create`, `write_at` and a whole `write`
/// of an empty handle, then tensors through every read (`read_tensor`, the async and unchecked
/// single reads) and two tensors created together. Nothing leaks, nothing is reported.
pub(super) fn round_trip<F: DeviceFactory>(factory: &F, config: RunConfig) -> Result<(), Failure> {
    run_cases(config, "round_trip", round_trip_case(), |case| {
        let session = factory.open(case.sim_seed);
        let c = &session.client;
        let baseline = c.memory_usage().map_err(err("memory_usage"))?;
        // Kept alive through the tensor phase, so the tensors share the pool with it.
        let handle = bytes_round_trip(c, &case)?;
        tensors_round_trip(c, &case)?;
        drop(handle);
        expect_baseline(c, baseline)?;
        expect_clean(&session)
    })
}

/// `create`, a `write_at` patch and a whole `write` of an empty handle, each read back; returns
/// the created handle.
fn bytes_round_trip<D: Device>(c: &ComputeClient<D>, case: &RoundTrip) -> Result<Handle, String> {
    let mut expected = random_bytes(case.size, case.fill_seed);
    let handle = c
        .create(Bytes::from(expected.clone()))
        .map_err(err("create"))?;
    let read = c
        .read_one(handle.clone())
        .map_err(err("read after create"))?;
    ensure!(
        read[..] == expected[..],
        "read after create differs ({} bytes)",
        case.size
    );

    let offset = case.patch_at.index(case.size + 1);
    let len = case.patch_len.min(case.size - offset);
    let patch = random_bytes(len, !case.fill_seed);
    c.write_at(&handle, offset as u64, Bytes::from(patch.clone()))
        .map_err(|e| format!("write_at({offset}, {len}): {e}"))?;
    expected[offset..offset + len].copy_from_slice(&patch);
    let read = c
        .read_one(handle.clone())
        .map_err(err("read after write_at"))?;
    ensure!(
        read[..] == expected[..],
        "read after write_at({offset}, {len}) differs"
    );

    let empty = c.empty(case.size).map_err(err("empty"))?;
    c.write(&empty, Bytes::from(expected.clone()))
        .map_err(|e| format!("write: {e}"))?;
    ensure!(
        c.read_one(empty).map_err(err("read of written empty"))?[..] == expected[..],
        "read of an empty handle after a full write differs"
    );
    Ok(handle)
}

/// A tensor of the case's shape read back by every tensor read, then the same tensor created
/// beside a second one from slices, both read back.
fn tensors_round_trip<D: Device>(c: &ComputeClient<D>, case: &RoundTrip) -> Result<(), String> {
    let elems: usize = case.shape.iter().product();
    let data = random_bytes(elems * case.elem_size, case.fill_seed ^ 1);
    let layout = c
        .create_tensor(Bytes::from(data.clone()), &case.shape, case.elem_size)
        .map_err(err("create_tensor"))?;
    ensure!(
        layout.strides.len() == case.shape.len(),
        "strides {:?} for shape {:?}",
        layout.strides,
        case.shape
    );
    let descriptor = CopyDescriptor::new(
        layout.memory,
        case.shape.clone(),
        layout.strides,
        case.elem_size,
    );
    let tensor = c.read_tensor(vec![descriptor.clone()]).remove(0);
    ensure!(
        tensor[..] == data[..],
        "read_tensor of shape {:?} differs",
        case.shape
    );
    let one = lockstep::block_on(c.read_one_tensor_async(descriptor.clone()))
        .map_err(err("read_one_tensor_async"))?;
    ensure!(
        one[..] == data[..] && c.read_one_unchecked_tensor(descriptor)[..] == data[..],
        "read_one_tensor of shape {:?} differs",
        case.shape
    );

    let second = random_bytes(elems * case.elem_size, case.fill_seed ^ 2);
    let desc = || {
        MemoryLayoutDescriptor::new(
            MemoryLayoutStrategy::Optimized,
            case.shape.clone(),
            case.elem_size,
        )
    };
    let pair = c
        .create_tensors_from_slices(vec![(desc(), &data), (desc(), &second)])
        .map_err(err("create_tensors_from_slices"))?;
    for (layout, expected) in pair.into_iter().zip([&data, &second]) {
        let d = CopyDescriptor::new(
            layout.memory,
            case.shape.clone(),
            layout.strides,
            case.elem_size,
        );
        ensure!(
            c.read_one_unchecked_tensor(d)[..] == expected[..],
            "create_tensors_from_slices of shape {:?} differs",
            case.shape
        );
    }
    Ok(())
}

/// A call that must be refused.
#[derive(Clone, Debug)]
enum BadCall {
    WriteOutOfRange { offset: u64, len: usize },
    TensorSizeMismatch { shape: Vec<usize>, extra: usize },
    ReadTensorOutOfRange { shape: Vec<usize> },
    BindingCount,
    ParamType,
    PartialElement,
    ForeignHandle,
}

fn bad_call(size: usize) -> impl Strategy<Value = BadCall> {
    let size = size as u64;
    prop_oneof![
        (0..=size + 8, 1..=16usize)
            .prop_filter("must overrun", move |(o, l)| o + *l as u64 > size)
            .prop_map(|(offset, len)| BadCall::WriteOutOfRange { offset, len }),
        (proptest::collection::vec(1..=4usize, 1..=3), 1..=8usize)
            .prop_map(|(shape, extra)| BadCall::TensorSizeMismatch { shape, extra }),
        proptest::collection::vec(1..=8usize, 1..=3)
            .prop_filter(
                "must exceed the handle",
                move |s| s.iter().product::<usize>() as u64 * 4 > size
            )
            .prop_map(|shape| BadCall::ReadTensorOutOfRange { shape }),
        Just(BadCall::BindingCount),
        Just(BadCall::ParamType),
        Just(BadCall::PartialElement),
        Just(BadCall::ForeignHandle),
    ]
}

const HANDLE_ELEMS: usize = 6;

/// Each bad call is refused with its typed error at the call, changes no data, and leaves the
/// stream usable.
pub(super) fn invalid_input<F: DeviceFactory>(
    factory: &F,
    config: RunConfig,
) -> Result<(), Failure> {
    let strategy = (bad_call(HANDLE_ELEMS * 4), any::<u64>());
    run_cases(config, "invalid_input", strategy, |(call, sim_seed)| {
        let session = factory.open(sim_seed);
        let c = &session.client;
        let original: Vec<u32> = (1..=HANDLE_ELEMS as u32).collect();
        let handle = c
            .create(Bytes::from_elems(&original))
            .map_err(|e| e.to_string())?;
        let refused = call.make(factory, c, &handle, sim_seed)?;
        let expected_kind = call.refusal();
        let kind = match &refused {
            Err(ServerError::Io(IoError::OutOfRange { .. })) => "OutOfRange",
            Err(ServerError::Io(IoError::SizeMismatch { .. })) => "SizeMismatch",
            Err(ServerError::Io(IoError::InvalidLaunch { .. })) => "InvalidLaunch",
            Err(ServerError::Io(IoError::WrongDevice { .. })) => "WrongDevice",
            _ => "",
        };
        ensure!(
            kind == expected_kind,
            "expected {expected_kind}, got {refused:?}"
        );
        c.sync()
            .map_err(|e| format!("stream unusable after a refused call: {e}"))?;
        let after = c
            .read_one(handle)
            .map_err(|e| e.to_string())?
            .to_elems::<u32>();
        ensure!(
            after == original,
            "a refused call changed the data: {after:?}"
        );
        expect_clean(&session)
    })
}

impl BadCall {
    /// Makes the call on `c` against `handle` (a foreign handle comes from a second device of
    /// `factory`); the outer error is a setup failure, the inner result the call's.
    fn make<F: DeviceFactory>(
        &self,
        factory: &F,
        c: &ComputeClient<F::Device>,
        handle: &Handle,
        sim_seed: u64,
    ) -> Result<Result<(), ServerError>, String> {
        let add = KernelKind::AddConst.kernel();
        let one_workgroup = CubeCount::Static(1, 1, 1);
        Ok(match self {
            BadCall::WriteOutOfRange { offset, len } => c
                .write_at(handle, *offset, Bytes::from(vec![0xEE; *len]))
                .map_err(Into::into),
            BadCall::TensorSizeMismatch { shape, extra } => {
                let bytes = shape.iter().product::<usize>() * 4 + extra;
                c.create_tensor(Bytes::from(vec![0; bytes]), shape, 4)
                    .map(|_| ())
            }
            BadCall::ReadTensorOutOfRange { shape } => {
                let strides = lockstep::contiguous_strides(shape);
                let d = CopyDescriptor::new(handle.clone(), shape.clone(), strides, 4);
                lockstep::block_on(c.read_tensor_async(vec![d])).map(|_| ())
            }
            BadCall::BindingCount => c
                .launch(
                    &add,
                    one_workgroup,
                    KernelArguments::new().param(Scalar::U32(1)),
                )
                .map_err(Into::into),
            BadCall::ParamType => c
                .launch(
                    &add,
                    one_workgroup,
                    KernelArguments::new()
                        .binding(handle)
                        .param(Scalar::F32(1.0)),
                )
                .map_err(Into::into),
            BadCall::PartialElement => {
                let odd = c
                    .create(Bytes::from(vec![1u8; 7]))
                    .map_err(|e| e.to_string())?;
                c.launch(
                    &add,
                    one_workgroup,
                    KernelArguments::new().binding(&odd).param(Scalar::U32(1)),
                )
                .map_err(Into::into)
            }
            BadCall::ForeignHandle => {
                let other = factory.open(sim_seed ^ 1);
                let foreign = other
                    .client
                    .create(Bytes::from_elems(&[9u32]))
                    .map_err(|e| e.to_string())?;
                c.write(&foreign, Bytes::from_elems(&[1u32]))
                    .map_err(Into::into)
            }
        })
    }

    /// The `IoError` variant the call must be refused with.
    fn refusal(&self) -> &'static str {
        match self {
            BadCall::WriteOutOfRange { .. } | BadCall::ReadTensorOutOfRange { .. } => "OutOfRange",
            BadCall::TensorSizeMismatch { .. } => "SizeMismatch",
            BadCall::BindingCount | BadCall::ParamType | BadCall::PartialElement => "InvalidLaunch",
            BadCall::ForeignHandle => "WrongDevice",
        }
    }
}
