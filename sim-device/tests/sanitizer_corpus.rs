//! The kernel sanitizer judged against a corpus, both ways: for every kind of pair of accesses
//! to one word (read, write, atomic), in shared and in global memory, and every relation of the
//! two invocations (the same one, one workgroup, one workgroup across a barrier, two workgroups
//! of one batch, with or without a barrier, two workgroups of different batches, two launches), it reports a race exactly
//! when the kernel memory model (`lockstep::kernel`) says the pair races. A rule of the race
//! check planted wrong (which pairs race, what atomics excuse, what a barrier or a new batch of
//! workgroups resets) fails a case of this corpus: checked by hand with atomics never
//! excused, a barrier taken to order every workgroup, and shared logs kept across batches.

use lockstep::kernel::{Access, Axis, ElemType, KernelBuilder};
use lockstep::{Bytes, ComputeClient, CubeCount, Kernel, KernelArguments};
use lockstep_sim::{KernelFinding, SanitizerReport, SimConfig, SimDevice};

/// Invocations per workgroup of every corpus kernel.
const WORKGROUP: u32 = 4;
/// Workgroups of a launch: more than one batch of the simulator (1024 lanes, so 256
/// workgroups of 4), so that two workgroups can lie in different batches.
const GROUPS: u32 = 300;
/// Workgroups of one batch of the simulator: 1024 lanes over workgroups of 4.
const BATCH_WORKGROUPS: u32 = 256;
/// The first of the two invocations: global id 1, in workgroup 0.
const FIRST: u32 = 1;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Read,
    Write,
    Atomic,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Memory {
    /// Word 0 of a workgroup-shared array (each workgroup has its own).
    Shared,
    /// Word 0 of a read-write binding (one for the whole launch).
    Global,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Relation {
    SameInvocation,
    SameWorkgroup,
    /// One workgroup, with a barrier between the two accesses.
    AcrossBarrier,
    /// Workgroups 0 and 1: one batch.
    OtherWorkgroup,
    /// Workgroups 0 and 256: the first of two batches, at the same place in each, so that a
    /// shared word the second batch reuses is the first's.
    OtherBatch,
    /// Workgroups 0 and 1, with a barrier between the accesses: a barrier orders its own
    /// workgroup only.
    OtherWorkgroupAcrossBarrier,
}

impl Relation {
    /// The second invocation's global id.
    fn second(self) -> u32 {
        match self {
            Relation::SameInvocation => FIRST,
            Relation::SameWorkgroup | Relation::AcrossBarrier => FIRST + 1,
            Relation::OtherWorkgroup | Relation::OtherWorkgroupAcrossBarrier => WORKGROUP + 2,
            Relation::OtherBatch => BATCH_WORKGROUPS * WORKGROUP + 2,
        }
    }
}

/// What the memory model says of the pair: a race is two accesses of different invocations
/// to one word, unordered (no barrier between them in one workgroup), at least one writing,
/// not both atomic. A shared word is one workgroup's: other workgroups never touch it.
fn races(first: Kind, second: Kind, memory: Memory, relation: Relation) -> bool {
    let different = relation != Relation::SameInvocation;
    let unordered = relation != Relation::AcrossBarrier;
    let writes = first != Kind::Read || second != Kind::Read;
    let both_atomic = first == Kind::Atomic && second == Kind::Atomic;
    let same_word = memory == Memory::Global
        || matches!(relation, Relation::SameInvocation | Relation::SameWorkgroup);
    different && unordered && writes && !both_atomic && same_word
}

/// The kernel: invocation `FIRST` makes the `first` access, then (after a barrier if the
/// relation says so) the relation's second invocation makes the `second` one. Reads store what
/// they read at their own index of `out`, which no other invocation touches; a shared word is
/// written by each workgroup's invocation 0 before a barrier, so no read finds it unwritten.
fn pair(first: Kind, second: Kind, memory: Memory, relation: Relation) -> Kernel {
    let name = format!("{first:?}_{second:?}_{memory:?}_{relation:?}");
    let mut k = KernelBuilder::new(name, [WORKGROUP, 1, 1]);
    let word = k.binding(ElemType::U32, Access::ReadWrite);
    let out = k.binding(ElemType::U32, Access::ReadWrite);
    let i = k.global_id(Axis::X);
    let shared = (memory == Memory::Shared).then(|| {
        let s = k.shared(ElemType::U32, 1);
        let lid = k.local_id(Axis::X);
        k.if_(lid.equals(0u32), |k| k.store(s, 0u32, 7u32));
        k.workgroup_barrier();
        s
    });
    let access = |k: &mut KernelBuilder, kind: Kind| match (kind, shared) {
        (Kind::Read, Some(s)) => k.store(out, i, s.load(0u32)),
        (Kind::Read, None) => k.store(out, i, word.load(0u32)),
        (Kind::Write, Some(s)) => k.store(s, 0u32, i),
        (Kind::Write, None) => k.store(word, 0u32, i),
        (Kind::Atomic, Some(s)) => k.atomic_add(s, 0u32, 1u32),
        (Kind::Atomic, None) => k.atomic_add(word, 0u32, 1u32),
    };
    k.if_(i.equals(FIRST), |k| access(k, first));
    if matches!(
        relation,
        Relation::AcrossBarrier | Relation::OtherWorkgroupAcrossBarrier
    ) {
        k.workgroup_barrier();
    }
    k.if_(i.equals(relation.second()), |k| access(k, second));
    k.build().expect("corpus kernels are valid")
}

/// The kernel findings of one launch of `kernel` over `GROUPS` workgroups on seed `seed`.
fn findings(kernel: &Kernel, seed: u64) -> Vec<KernelFinding> {
    let device = SimDevice::new(SimConfig::new(seed));
    let probe = device.probe();
    let c = ComputeClient::new(device);
    let word = c.create(Bytes::from_elems(&[0u32])).unwrap();
    let out = c
        .create(Bytes::from_elems(&vec![
            0u32;
            (GROUPS * WORKGROUP) as usize
        ]))
        .unwrap();
    let args = KernelArguments::new().binding(&word).binding(&out);
    c.launch(kernel, CubeCount::Static(GROUPS, 1, 1), args)
        .unwrap();
    c.sync().unwrap();
    (probe.observations().reports.iter())
        .map(|report| match report {
            SanitizerReport::Kernel { finding, .. } => *finding,
            other => panic!("only kernel findings expected, got {other}"),
        })
        .collect()
}

#[test]
fn the_race_check_reports_exactly_the_pairs_the_memory_model_calls_races() {
    let kinds = [Kind::Read, Kind::Write, Kind::Atomic];
    let relations = [
        Relation::SameInvocation,
        Relation::SameWorkgroup,
        Relation::AcrossBarrier,
        Relation::OtherWorkgroup,
        Relation::OtherBatch,
        Relation::OtherWorkgroupAcrossBarrier,
    ];
    let mut wrong = Vec::new();
    let (mut racy, mut cases) = (0, 0);
    for memory in [Memory::Shared, Memory::Global] {
        for relation in relations {
            for first in kinds {
                for second in kinds {
                    let kernel = pair(first, second, memory, relation);
                    let expected = races(first, second, memory, relation);
                    racy += usize::from(expected);
                    cases += 1;
                    for seed in 0..2 {
                        let found = findings(&kernel, seed);
                        let reported = found.contains(&KernelFinding::Race);
                        let other = found.iter().any(|f| *f != KernelFinding::Race);
                        if reported != expected || other {
                            wrong.push(format!(
                                "{}: seed {seed}, expected race {expected}, found {found:?}",
                                kernel.name()
                            ));
                        }
                    }
                }
            }
        }
    }
    println!("sanitizer corpus: {cases} kernels, {racy} racy, each run on 2 seeds");
    assert!(wrong.is_empty(), "{wrong:#?}");
    assert!(racy > 0 && racy < cases, "the corpus holds both verdicts");
}

/// One invocation, `at`, makes one `kind` access to word 0 of the global binding.
fn one(kind: Kind, at: u32) -> Kernel {
    let mut k = KernelBuilder::new(format!("{kind:?}_at_{at}"), [WORKGROUP, 1, 1]);
    let word = k.binding(ElemType::U32, Access::ReadWrite);
    let out = k.binding(ElemType::U32, Access::ReadWrite);
    let i = k.global_id(Axis::X);
    k.if_(i.equals(at), |k| match kind {
        Kind::Read => k.store(out, i, word.load(0u32)),
        Kind::Write => k.store(word, 0u32, i),
        Kind::Atomic => k.atomic_add(word, 0u32, 1u32),
    });
    k.build().expect("corpus kernels are valid")
}

/// Two launches are ordered: a word one writes and the next reads (or writes) from another
/// invocation, of another workgroup or batch, is no race.
#[test]
fn consecutive_launches_never_race_with_each_other() {
    let device = SimDevice::new(SimConfig::new(3));
    let probe = device.probe();
    let c = ComputeClient::new(device);
    let word = c.create(Bytes::from_elems(&[0u32])).unwrap();
    let out = c
        .create(Bytes::from_elems(&vec![
            0u32;
            (GROUPS * WORKGROUP) as usize
        ]))
        .unwrap();
    let pairs = [
        (Kind::Write, Kind::Read),
        (Kind::Read, Kind::Write),
        (Kind::Write, Kind::Write),
    ];
    for relation in [Relation::SameWorkgroup, Relation::OtherBatch] {
        for (first, second) in pairs {
            for kernel in [one(first, FIRST), one(second, relation.second())] {
                let args = KernelArguments::new().binding(&word).binding(&out);
                c.launch(&kernel, CubeCount::Static(GROUPS, 1, 1), args)
                    .unwrap();
            }
        }
    }
    c.sync().unwrap();
    let reports = probe.observations().reports.clone();
    assert!(reports.is_empty(), "{reports:#?}");
}
