//! The kernel sanitizer through the client: a kernel that races or leaves shared memory
//! unwritten is a sanitizer report of the launch, seeded runs repeat exactly, and a kernel
//! whose shared arrays exceed the device's limit is refused at the launch.

use lockstep::kernel::{Access, Axis, ElemType, KernelBuilder, KernelError};
use lockstep::{Bytes, ComputeClient, CubeCount, IoError, Kernel, KernelArguments};
use lockstep_sim::{KernelFinding, SanitizerReport, SimConfig, SimDevice, SimProbe};

fn client(seed: u64) -> (ComputeClient<SimDevice>, SimProbe) {
    let device = SimDevice::new(SimConfig::new(seed));
    let probe = device.probe();
    (ComputeClient::new(device), probe)
}

/// `out[i] = input[workgroup start + (local id + 1) % 8]`, through a shared array: each
/// invocation reads what its neighbour wrote, so a barrier must sit between.
fn rotate(barrier: bool) -> Kernel {
    let mut k = KernelBuilder::new("rotate", [8, 1, 1]);
    let input = k.binding(ElemType::U32, Access::Read);
    let out = k.binding(ElemType::U32, Access::ReadWrite);
    let s = k.shared(ElemType::U32, 8);
    let (i, lid) = (k.global_id(Axis::X), k.local_id(Axis::X));
    k.store(s, lid, input.load(i));
    if barrier {
        k.workgroup_barrier();
    }
    k.store(out, i, s.load((lid + 1u32) % 8u32));
    k.build().unwrap()
}

/// Runs `rotate` on 16 values; returns the result, the kernel findings and the trace hash.
fn run_rotate(seed: u64, barrier: bool) -> (Vec<u32>, Vec<(KernelFinding, String)>, u64) {
    let (c, probe) = client(seed);
    let input: Vec<u32> = (100..116).collect();
    let input = c.create(Bytes::from_elems(&input)).unwrap();
    let out = c.create(Bytes::from_elems(&[0u32; 16])).unwrap();
    let args = KernelArguments::new().binding(&input).binding(&out);
    c.launch(&rotate(barrier), CubeCount::Static(2, 1, 1), args)
        .unwrap();
    let got = c.read_one(out).unwrap().to_elems::<u32>();
    let findings = probe
        .observations()
        .reports
        .iter()
        .map(|r| match r {
            SanitizerReport::Kernel {
                operation,
                finding,
                detail,
                ..
            } => {
                assert_eq!(operation, "launch of `rotate`");
                (*finding, detail.clone())
            }
            other => panic!("only kernel findings expected, got {other}"),
        })
        .collect();
    let hash = probe.observations().trace_hash;
    (got, findings, hash)
}

#[test]
fn a_missing_barrier_is_a_race_report_on_every_seed_and_runs_repeat_exactly() {
    let expected: Vec<u32> = (0..16).map(|i| 100 + (i / 8) * 8 + (i + 1) % 8).collect();
    for seed in 0..4 {
        let (got, findings, _) = run_rotate(seed, true);
        assert_eq!(got, expected, "seed {seed}");
        assert!(findings.is_empty(), "seed {seed}: {findings:?}");

        let (_, findings, hash) = run_rotate(seed, false);
        // The race, and where the neighbour had not written yet, the unwritten read.
        let (kind, detail) = &findings[0];
        assert_eq!(*kind, KernelFinding::Race, "seed {seed}: {findings:?}");
        assert!(
            detail.starts_with("shared array 0 index "),
            "seed {seed}: {detail}"
        );
        assert!(detail.ends_with("with no barrier between them"), "{detail}");
        assert!(
            findings[1..]
                .iter()
                .all(|(kind, _)| *kind == KernelFinding::UnwrittenShared),
            "seed {seed}: {findings:?}"
        );
        // The same seed interleaves the same way: the same report and trace.
        let (_, again, hash_again) = run_rotate(seed, false);
        assert_eq!((&again, hash_again), (&findings, hash));
    }
}

#[test]
fn shared_memory_beyond_the_device_limit_is_refused_at_the_launch() {
    let (c, _) = client(1);
    let limit = c.properties().max_shared_memory_bytes;
    let mut k = KernelBuilder::new("too_big", [1, 1, 1]);
    let out = k.binding(ElemType::U32, Access::ReadWrite);
    let s = k.shared(ElemType::U32, (limit / 4) as u32 + 1);
    k.store(s, 0u32, 1u32);
    k.store(out, 0u32, s.load(0u32));
    let kernel = k.build().unwrap();
    let out = c.create(Bytes::from_elems(&[0u32])).unwrap();
    let refused = c.launch(
        &kernel,
        CubeCount::Static(1, 1, 1),
        KernelArguments::new().binding(&out),
    );
    assert_eq!(
        refused,
        Err(IoError::InvalidKernel(KernelError::SharedMemoryTooLarge {
            kernel: "too_big".into(),
            bytes: limit + 4,
            limit,
        }))
    );
}
