//! A proof program that passes on a GPU by luck of timing: a kernel, built with Lockstep's
//! kernel builder, in which each invocation stores its input word into shared memory and then
//! loads its neighbour's, with no workgroup barrier between the store and the load. A
//! workgroup is one warp of 32 invocations, which a GPU runs in step, so the neighbour's store
//! has landed and the result (each workgroup's words rotated by one) matches the host; the
//! memory model does not promise it. `--fixed` adds the barrier.
//!
//! `LOCKSTEP_RECORD=barrier.rec missing-barrier` records it; `lockstep explore --recording
//! barrier.rec` finds the race (the kernel sanitizer's finding). Flags: `proof/mod.rs`.

use std::process::ExitCode;

use lockstep::kernel::{Access, Axis, ElemType, KernelBuilder};
use lockstep::{Bytes, ComputeClient, CubeCount, Device, Kernel, KernelArguments};

mod proof;

/// Invocations per workgroup: one warp.
const LANES: u32 = 32;

/// Workgroups launched.
const GROUPS: u32 = 4;

/// Each invocation's output is the input of the next invocation of its workgroup (the last
/// takes the first's), read through shared memory; without `barrier`, the read races with the
/// neighbour's store.
fn rotate_in_workgroup(barrier: bool) -> Result<Kernel, lockstep::Error> {
    let name = if barrier {
        "rotate_in_workgroup"
    } else {
        "rotate_in_workgroup_missing_barrier"
    };
    let mut k = KernelBuilder::new(name, [LANES, 1, 1]);
    let input = k.binding(ElemType::U32, Access::Read);
    let out = k.binding(ElemType::U32, Access::ReadWrite);
    let tile = k.shared(ElemType::U32, LANES);
    let (i, lane) = (k.global_id(Axis::X), k.local_id(Axis::X));
    k.store(tile, lane, input.load(i));
    if barrier {
        k.workgroup_barrier();
    }
    k.store(out, i, tile.load((lane + 1u32) % LANES));
    Ok(k.build()?)
}

/// What the kernel computes, on the host.
fn rotated(input: &[u32]) -> Vec<u32> {
    let lanes = LANES as usize;
    (0..input.len())
        .map(|i| input[i - i % lanes + (i + 1) % lanes])
        .collect()
}

struct MissingBarrier;

impl proof::Program for MissingBarrier {
    const NAME: &'static str = "missing-barrier";

    fn run<D: Device>(client: ComputeClient<D>, fixed: bool) -> Result<bool, lockstep::Error> {
        let kernel = rotate_in_workgroup(fixed)?;
        let input: Vec<u32> = (0..LANES * GROUPS).map(|i| 7 * i + 2).collect();
        let input_handle = client.create(Bytes::from_elems(&input))?;
        let out = client.create(Bytes::from_elems(&vec![0u32; input.len()]))?;
        let args = KernelArguments::new().binding(&input_handle).binding(&out);
        client.launch(&kernel, CubeCount::Static(GROUPS, 1, 1), args)?;
        let read = client.read_one(out)?.to_elems::<u32>();
        Ok(read == rotated(&input))
    }
}

fn main() -> ExitCode {
    proof::main::<MissingBarrier>()
}
