//! The engines on kernels whose results are known exactly.

use lockstep::kernel::accuracy::{MathCall, ulp};
use lockstep::kernel::{Access, AtomicOp, Axis, BindingId, ElemType, KernelBuilder, Stmt, UnaryOp};

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use super::*;

const ENGINES: [Engine; 2] = [Engine::Batched, Engine::Workgroup];

const CHECKED: Guards = Guards {
    checked: true,
    kernel_id: 1,
};

/// Runs `def` checked over `count` workgroups on the engine that runs it, interleaved by
/// `seed`.
fn launch_seeded(
    def: &KernelDef,
    count: u32,
    data: &mut [BindingData],
    seed: u64,
) -> LaunchOutcome {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    run(def, CHECKED, [count, 1, 1], data, &[], &mut rng).expect("checked launches do not trap")
}

fn launch(def: &KernelDef, count: u32, data: &mut [BindingData]) -> LaunchOutcome {
    launch_seeded(def, count, data, 0)
}

/// What the sanitizer says about `outcome`, a launch of `def` over `count` workgroups.
fn findings(def: &KernelDef, count: u32, outcome: &LaunchOutcome) -> Vec<String> {
    describe(def, [count, 1, 1], outcome)
        .into_iter()
        .map(|f| format!("{}: {}", f.kind, f.detail))
        .collect()
}

fn words(data: &BindingData) -> Vec<u32> {
    data.words.clone()
}

fn floats(values: &[f32]) -> BindingData {
    binding(values.iter().map(|v| v.to_bits()).collect())
}

fn binding(words: Vec<u32>) -> BindingData {
    let n = words.len();
    BindingData::new(words, vec![true; n])
}

fn record() -> BindingData {
    binding(vec![0; FaultRecord::WORDS])
}

/// Workgroups of 4; invocation `i` stores `i` at `i`, except that invocation 6 first stores
/// out of range at 100 + i (statement 1) and invocation 2 only later (statement 2, at
/// 200 + i): the lowest violating invocation is 2, although 6 violates first in statement
/// order.
fn two_faulting_statements() -> KernelDef {
    let mut k = KernelBuilder::new("two", [4, 1, 1]);
    let out = k.binding(ElemType::U32, Access::ReadWrite);
    let i = k.global_id(Axis::X);
    k.if_(i.equals(6u32), |k| k.store(out, i + 100u32, 1u32));
    k.if_(i.lt(out.len()), |k| k.store(out, i, i));
    k.if_(i.equals(2u32), |k| k.store(out, i + 200u32, 1u32));
    k.build().unwrap().def().clone()
}

#[test]
fn the_fault_record_takes_the_lowest_invocations_first_violation() {
    let def = two_faulting_statements();
    let options = Guards {
        checked: true,
        kernel_id: 9,
    };
    for engine in ENGINES {
        let mut data = vec![binding(vec![0; 8]), record()];
        run_on(engine, 0, &def, options, [2, 1, 1], &mut data, &[]).unwrap();
        assert_eq!(data[0].words, (0..8).collect::<Vec<u32>>());
        assert_eq!(data[1].words, vec![1, 9, 0, 202], "{engine:?}");
        // A record that already holds a fault keeps it.
        let mut data = vec![binding(vec![0; 8]), binding(vec![1, 3, 0, 7])];
        run_on(engine, 0, &def, options, [2, 1, 1], &mut data, &[]).unwrap();
        assert_eq!(data[1].words, vec![1, 3, 0, 7]);
    }
}

#[test]
fn an_unchecked_trap_names_the_lowest_invocations_first_violation() {
    let def = two_faulting_statements();
    let options = Guards {
        checked: false,
        kernel_id: 0,
    };
    for engine in ENGINES {
        let mut data = vec![binding(vec![0; 8])];
        let trap = run_on(engine, 0, &def, options, [2, 1, 1], &mut data, &[]).unwrap_err();
        assert_eq!(
            trap,
            KernelTrap::OutOfBounds {
                array: Array::Binding(BindingId(0)),
                index: 202
            },
            "{engine:?}"
        );
    }
}

/// Per invocation `i`: a local array of 4, zero at entry, `a[k] += i + k` twice through a
/// dynamic index (`(i + k) % 4`), then `out[i] = a[0] * 1000 + a[1] * 100 + a[2] * 10 + a[3]`;
/// invocation 5 also stores at index `4 + i` (out of range).
fn local_array_kernel() -> KernelDef {
    let mut k = KernelBuilder::new("locals", [4, 1, 1]);
    let out = k.binding(ElemType::U32, Access::ReadWrite);
    let a = k.local_array(ElemType::U32, 4);
    let i = k.global_id(Axis::X);
    k.for_range(ElemType::U32, 0u32, 2u32, |k, _| {
        k.for_range(ElemType::U32, 0u32, i % 4u32, |k, j| {
            let at = (i + j) % a.len();
            k.store(a, at, a.load(at) + j + 1u32);
        });
    });
    k.if_(i.equals(5u32), |k| k.store(a, a.len() + i, 1u32));
    let digits = a.load(0u32) * 1000u32 + a.load(1u32) * 100u32 + a.load(2u32) * 10u32;
    k.store(out, i, digits + a.load(3u32));
    k.build().unwrap().def().clone()
}

/// What [`local_array_kernel`] stores for invocation `i`.
fn local_array_reference(i: u32) -> u32 {
    let mut a = [0u32; 4];
    for _ in 0..2 {
        for j in 0..i % 4 {
            a[((i + j) % 4) as usize] += j + 1;
        }
    }
    a[0] * 1000 + a[1] * 100 + a[2] * 10 + a[3]
}

#[test]
fn local_arrays_are_per_invocation_zero_at_entry_and_checked() {
    let def = local_array_kernel();
    let options = Guards {
        checked: true,
        kernel_id: 3,
    };
    // 300 workgroups of 4: two batches, the second reusing the first's arrays.
    let expected: Vec<u32> = (0..1200).map(local_array_reference).collect();
    for engine in ENGINES {
        let mut data = vec![binding(vec![0; 1200]), record()];
        let outcome = run_on(engine, 0, &def, options, [300, 1, 1], &mut data, &[]).unwrap();
        assert_eq!(data[0].words, expected, "{engine:?}");
        let word = FaultRecord::array_word(Array::Local(lockstep::kernel::LocalArrayId(0)));
        assert_eq!(data[1].words, vec![1, 3, word, 9], "{engine:?}");
        assert!(outcome.races.is_empty() && outcome.uninitialized_loads.is_empty());
    }
    let trap = run_on(
        Engine::Batched,
        0,
        &def,
        Guards {
            checked: false,
            kernel_id: 0,
        },
        [2, 1, 1],
        &mut [binding(vec![0; 8])],
        &[],
    );
    assert_eq!(
        trap.unwrap_err(),
        KernelTrap::OutOfBounds {
            array: Array::Local(lockstep::kernel::LocalArrayId(0)),
            index: 9
        }
    );
}

#[test]
fn loops_keep_each_lanes_trip_count_and_guards_short_circuit() {
    // out[i] = sum of 0..i, and a load guarded by `i < len(src) &&` never runs past src.
    let mut k = KernelBuilder::new("lanes", [8, 1, 1]);
    let out = k.binding(ElemType::U32, Access::ReadWrite);
    let src = k.binding(ElemType::U32, Access::Read);
    let i = k.global_id(Axis::X);
    let sum = k.var(ElemType::U32, 0u32);
    k.for_range(ElemType::U32, 0u32, i, |k, j| k.assign(sum, sum.get() + j));
    let guarded = i.lt(src.len()).and(src.load(i).gt(0u32));
    k.if_(guarded, |k| k.assign(sum, sum.get() + 1000u32));
    k.store(out, i, sum.get());
    let def = k.build().unwrap().def().clone();
    let options = Guards {
        checked: true,
        kernel_id: 1,
    };
    for engine in ENGINES {
        let mut data = vec![binding(vec![0; 8]), binding(vec![1, 0, 1]), record()];
        run_on(engine, 0, &def, options, [1, 1, 1], &mut data, &[]).unwrap();
        assert_eq!(data[0].words, vec![1000, 0, 1001, 3, 6, 10, 15, 21]);
        assert_eq!(
            data[2].words,
            vec![0; 4],
            "the guarded load never ran out of range ({engine:?})"
        );
    }
}

/// `out[workgroup] = sum of input[workgroup * 64 ..][..64]`: a tree reduction through shared
/// memory, with a barrier after every level.
fn reduction(elem: ElemType) -> KernelDef {
    let mut k = KernelBuilder::new("reduce", [64, 1, 1]);
    let input = k.binding(elem, Access::Read);
    let out = k.binding(elem, Access::ReadWrite);
    let partial = k.shared(elem, 64);
    let lid = k.local_id(Axis::X);
    k.store(partial, lid, input.load(k.global_id(Axis::X)));
    k.workgroup_barrier();
    let stride = k.var(ElemType::U32, 32u32);
    k.while_(stride.get().gt(0u32), |k| {
        k.if_(lid.lt(stride.get()), |k| {
            let sum = partial.load(lid) + partial.load(lid + stride.get());
            k.store(partial, lid, sum);
        });
        k.workgroup_barrier();
        k.assign(stride, stride.get() >> 1u32);
    });
    k.if_(lid.equals(0u32), |k| {
        k.store(out, k.workgroup_id(Axis::X), partial.load(0u32))
    });
    k.build().unwrap().def().clone()
}

#[test]
fn a_workgroup_reduction_through_shared_memory_is_exact() {
    let input: Vec<u32> = (0..256).map(|i| i * 7 + 3).collect();
    let mut data = vec![binding(input.clone()), binding(vec![0; 4]), record()];
    let outcome = launch(&reduction(ElemType::U32), 4, &mut data);
    let expected: Vec<u32> = input.chunks(64).map(|c| c.iter().sum()).collect();
    assert_eq!(words(&data[1]), expected);
    assert!(outcome.uninitialized_loads.is_empty());
    assert_eq!(outcome.divergent_barrier, None);
    assert_eq!(words(&data[2]), vec![0; 4]);

    // Floats that sum exactly in any order.
    let input: Vec<f32> = (0..128).map(|i| (i % 13) as f32 - 6.0).collect();
    let mut data = vec![floats(&input), floats(&[0.0; 2]), record()];
    launch(&reduction(ElemType::F32), 2, &mut data);
    let expected: Vec<u32> = input
        .chunks(64)
        .map(|c| c.iter().sum::<f32>().to_bits())
        .collect();
    assert_eq!(words(&data[1]), expected);
}

#[test]
fn global_atomics_min_max_and_add_see_every_workgroup() {
    let mut k = KernelBuilder::new("extremes", [8, 1, 1]);
    let input = k.binding(ElemType::I32, Access::Read);
    let out = k.binding(ElemType::I32, Access::ReadWrite);
    let i = k.global_id(Axis::X);
    let v = k.var(ElemType::I32, input.load(i));
    k.atomic(AtomicOp::Min, out, 0u32, v.get());
    k.atomic(AtomicOp::Max, out, 1u32, v.get());
    k.atomic_add(out, 2u32, v.get());
    let def = k.build().unwrap().def().clone();
    let input: Vec<i32> = (0..32).map(|i| (i * 37 % 101) - 50).collect();
    let mut data = vec![
        binding(input.iter().map(|&v| v as u32).collect()),
        binding(vec![i32::MAX as u32, i32::MIN as u32, 0]),
        record(),
    ];
    launch(&def, 4, &mut data);
    let got: Vec<i32> = data[1].words.iter().map(|&w| w as i32).collect();
    let min = *input.iter().min().unwrap();
    let max = *input.iter().max().unwrap();
    assert_eq!(got, vec![min, max, input.iter().sum()]);
}

#[test]
fn exchange_and_compare_exchange_hand_values_on_exactly_once() {
    // Every invocation exchanges its id + 1 into one word and keeps what it took out; one
    // invocation's compare-exchange of 0 -> id + 1 wins, the others see the winner.
    let mut k = KernelBuilder::new("handoff", [16, 1, 1]);
    let out = k.binding(ElemType::U32, Access::ReadWrite);
    let i = k.global_id(Axis::X);
    let took = k.fetch_atomic(AtomicOp::Exchange, out, 0u32, i + 1u32);
    k.store(out, i + 2u32, took.get());
    let seen = k.compare_exchange(out, 1u32, 0u32, i + 1u32);
    k.store(out, i + 34u32, seen.get());
    let def = k.build().unwrap().def().clone();
    let mut data = vec![binding(vec![0; 66]), record()];
    launch(&def, 2, &mut data);
    let w = words(&data[0]);
    // Exchange: the values taken out plus the one left are the initial 0 and every id + 1.
    let mut chain: Vec<u32> = w[2..34].to_vec();
    chain.push(w[0]);
    chain.sort_unstable();
    assert_eq!(chain, (0..=32).collect::<Vec<u32>>());
    // Compare-exchange: exactly one winner saw 0; everyone else saw the winner's value.
    let winner = w[1];
    let seen = &w[34..66];
    assert_eq!(seen.iter().filter(|&&s| s == 0).count(), 1);
    assert_eq!(seen[winner as usize - 1], 0);
    assert!(seen.iter().all(|&s| s == 0 || s == winner));
}

#[test]
fn the_seed_interleaves_a_workgroup_so_order_dependent_results_differ() {
    // Who wins a compare-exchange, and who exchanges last, depend on the order of the
    // invocations: each seed gives one order, always the same, and seeds differ.
    let mut k = KernelBuilder::new("order", [16, 1, 1]);
    let out = k.binding(ElemType::U32, Access::ReadWrite);
    let i = k.global_id(Axis::X);
    k.compare_exchange(out, 0u32, 0u32, i + 1u32);
    k.atomic(AtomicOp::Exchange, out, 1u32, i + 1u32);
    let def = k.build().unwrap().def().clone();
    let outcome = |seed: u64| {
        let mut data = vec![binding(vec![0; 2]), record()];
        let findings = findings(&def, 1, &launch_seeded(&def, 1, &mut data, seed));
        assert_eq!(findings, Vec::<String>::new(), "atomics do not race");
        words(&data[0])
    };
    let orders: std::collections::BTreeSet<Vec<u32>> = (0..16).map(outcome).collect();
    assert!(orders.len() > 4, "16 seeds gave only {orders:?}");
    assert_eq!(outcome(3), outcome(3));
}

#[test]
fn an_atomic_store_reads_nothing_but_an_exchange_that_keeps_the_old_value_does() {
    // Invocation 0 stores into a fresh shared word by an exchange whose old value it drops
    // (how a WGSL `atomicStore` is translated), a barrier, then everyone reads: nothing was
    // read unwritten. Keeping the old value reads the word, and it was never written.
    let kernel = |keep_old: bool| {
        let mut k = KernelBuilder::new("publish", [4, 1, 1]);
        let out = k.binding(ElemType::U32, Access::ReadWrite);
        let word = k.shared(ElemType::U32, 1);
        let lid = k.local_id(Axis::X);
        k.if_(lid.equals(0u32), |k| {
            if keep_old {
                let old = k.fetch_atomic(AtomicOp::Exchange, word, 0u32, 3u32);
                k.store(out, 4u32, old.get());
            } else {
                k.atomic(AtomicOp::Exchange, word, 0u32, 3u32);
            }
        });
        k.workgroup_barrier();
        k.store(out, lid, word.load(0u32));
        k.build().unwrap().def().clone()
    };
    let store = kernel(false);
    let mut data = vec![binding(vec![0; 5]), record()];
    let outcome = launch(&store, 1, &mut data);
    assert_eq!(words(&data[0])[..4], [3, 3, 3, 3]);
    assert_eq!(findings(&store, 1, &outcome), Vec::<String>::new());

    let exchange = kernel(true);
    let mut data = vec![binding(vec![0; 5]), record()];
    let outcome = launch(&exchange, 1, &mut data);
    assert_eq!(
        outcome.unwritten_shared.len(),
        1,
        "{:?}",
        findings(&exchange, 1, &outcome)
    );
}

#[test]
fn shared_atomics_count_per_workgroup() {
    // Each workgroup: a shared counter zeroed by invocation 0, a barrier, every invocation
    // takes a ticket and adds its local id, a barrier, invocation 0 publishes.
    let mut k = KernelBuilder::new("tickets", [32, 1, 1]);
    let out = k.binding(ElemType::U32, Access::ReadWrite);
    let tickets = k.binding(ElemType::U32, Access::ReadWrite);
    let counter = k.shared(ElemType::U32, 2);
    let lid = k.local_id(Axis::X);
    k.if_(lid.equals(0u32), |k| {
        k.store(counter, 0u32, 0u32);
        k.store(counter, 1u32, 0u32);
    });
    k.workgroup_barrier();
    let ticket = k.fetch_atomic(AtomicOp::Add, counter, 0u32, 1u32);
    k.atomic(AtomicOp::Max, counter, 1u32, lid);
    k.store(tickets, k.global_id(Axis::X), ticket.get());
    k.workgroup_barrier();
    k.if_(lid.equals(0u32), |k| {
        let wg = k.workgroup_id(Axis::X);
        k.store(out, wg * 2u32, counter.load(0u32));
        k.store(out, wg * 2u32 + 1u32, counter.load(1u32));
    });
    let def = k.build().unwrap().def().clone();
    let mut data = vec![binding(vec![0; 6]), binding(vec![0; 96]), record()];
    let outcome = launch(&def, 3, &mut data);
    assert_eq!(words(&data[0]), vec![32, 31, 32, 31, 32, 31]);
    for group in data[1].words.chunks(32) {
        let mut t = group.to_vec();
        t.sort_unstable();
        assert_eq!(t, (0..32).collect::<Vec<u32>>(), "tickets are unique");
    }
    assert!(outcome.uninitialized_loads.is_empty());
}

#[test]
fn while_break_and_continue_steer_each_lane() {
    // Per invocation i: gcd(i + 12, 18) by Euclid (a while left by break); the j < i that are
    // not multiples of 4 (a for with continue); and pairs b <= a < 4 (an inner break that
    // leaves only the inner loop).
    let mut k = KernelBuilder::new("steer", [8, 1, 1]);
    let out = k.binding(ElemType::U32, Access::ReadWrite);
    let i = k.global_id(Axis::X);
    let a = k.var(ElemType::U32, i + 12u32);
    let b = k.var(ElemType::U32, 18u32);
    k.while_(true, |k| {
        k.if_(b.get().equals(0u32), |k| k.break_());
        let t = k.var(ElemType::U32, a.get() % b.get());
        k.assign(a, b.get());
        k.assign(b, t.get());
    });
    let count = k.var(ElemType::U32, 0u32);
    k.for_range(ElemType::U32, 0u32, i, |k, j| {
        k.if_((j & 3u32).equals(0u32), |k| k.continue_());
        k.assign(count, count.get() + 1u32);
    });
    let pairs = k.var(ElemType::U32, 0u32);
    k.for_range(ElemType::U32, 0u32, 4u32, |k, x| {
        k.for_range(ElemType::U32, 0u32, 4u32, |k, y| {
            k.if_(y.gt(x), |k| k.break_());
            k.assign(pairs, pairs.get() + 1u32);
        });
    });
    k.store(out, i * 3u32, a.get());
    k.store(out, i * 3u32 + 1u32, count.get());
    k.store(out, i * 3u32 + 2u32, pairs.get());
    let def = k.build().unwrap().def().clone();
    let mut data = vec![binding(vec![0; 48]), record()];
    launch(&def, 2, &mut data);
    let gcd = |mut a: u32, mut b: u32| {
        while b != 0 {
            (a, b) = (b, a % b);
        }
        a
    };
    let expected: Vec<u32> = (0..16u32)
        .flat_map(|i| {
            [
                gcd(i + 12, 18),
                (0..i).filter(|j| j % 4 != 0).count() as u32,
                10,
            ]
        })
        .collect();
    assert_eq!(words(&data[0]), expected);
}

/// Inputs of each function inside its domain, where the WGSL bound is finite.
fn math_inputs(op: UnaryOp) -> Vec<f32> {
    let spread = |lo: f32, hi: f32| -> Vec<f32> {
        (0..64).map(|i| lo + (hi - lo) * i as f32 / 63.0).collect()
    };
    match op {
        UnaryOp::Abs | UnaryOp::Floor | UnaryOp::Ceil | UnaryOp::Trunc | UnaryOp::Round => {
            spread(-9.5, 9.5)
        }
        UnaryOp::Sqrt | UnaryOp::InverseSqrt | UnaryOp::Log => spread(1e-3, 1e4),
        UnaryOp::Exp => spread(-80.0, 80.0),
        UnaryOp::Tanh => spread(-9.0, 9.0),
        UnaryOp::Sin | UnaryOp::Cos => {
            let below_pi = std::f32::consts::PI.next_down();
            spread(-below_pi, below_pi)
        }
        UnaryOp::Tan => spread(-1.4, 1.4),
        UnaryOp::Sinh | UnaryOp::Cosh => spread(-9.0, 9.0),
        // At ±1 the inherited bound takes `sqrt` of `1 - x * x`, which may round below 0.
        UnaryOp::Asin | UnaryOp::Acos => spread(-0.999, 0.999),
        UnaryOp::Atan | UnaryOp::Asinh => spread(-1e3, 1e3),
        UnaryOp::Acosh => spread(1.001, 1e3),
        UnaryOp::Atanh => spread(-0.999, 0.999),
    }
}

#[test]
fn math_functions_are_within_the_stated_bounds_and_one_ulp_of_f64() {
    let mut k = KernelBuilder::new("math", [64, 1, 1]);
    let input = k.binding(ElemType::F32, Access::Read);
    let out = k.binding(ElemType::F32, Access::ReadWrite);
    let x = input.load(k.global_id(Axis::X));
    let base = UnaryOp::ALL.len() as u32 * 64;
    for (n, op) in UnaryOp::ALL.into_iter().enumerate() {
        let at = k.global_id(Axis::X) + n as u32 * 64;
        k.store(out, at, input.load(at).unary(op));
    }
    // pow(x, 1.5) and fma(x, x, -x) on the sqrt inputs.
    let sqrt_in = input.load(k.global_id(Axis::X) + 3u32 * 64);
    k.store(out, k.global_id(Axis::X) + base, sqrt_in.pow(1.5f32));
    k.store(out, k.global_id(Axis::X) + base + 64u32, x.fma(x, -x));
    let def = k.build().unwrap().def().clone();
    let inputs: Vec<f32> = UnaryOp::ALL.into_iter().flat_map(math_inputs).collect();
    let mut data = vec![
        floats(&inputs),
        floats(&vec![0.0; inputs.len() + 128]),
        record(),
    ];
    launch(&def, 1, &mut data);
    let got: Vec<f32> = data[1].words.iter().map(|&w| f32::from_bits(w)).collect();
    let mut calls: Vec<MathCall> = UnaryOp::ALL
        .into_iter()
        .flat_map(|op| {
            math_inputs(op)
                .into_iter()
                .map(move |x| MathCall::Unary(op, x))
        })
        .collect();
    let sqrt_inputs = math_inputs(UnaryOp::Sqrt);
    calls.extend(sqrt_inputs.iter().map(|&x| MathCall::Pow(x, 1.5)));
    calls.extend(
        math_inputs(UnaryOp::Abs)
            .iter()
            .map(|&x| MathCall::Fma(x, x, -x)),
    );
    assert_eq!(calls.len(), got.len());
    for (call, &got) in calls.iter().zip(&got) {
        let exact = call.exact();
        assert!(call.max_error().is_some(), "{call:?} is bounded");
        assert!(call.accepts(got), "{call:?} gave {got}, exact {exact}");
        // The simulator rounds the f64 result once: within one ULP (fma exactly).
        assert!(
            (got as f64 - exact).abs() <= ulp(exact),
            "{call:?} gave {got}, exact {exact}"
        );
    }
}

/// Invocations whose input is odd wait at a barrier the others never reach. The validator
/// rejects the kernel (the condition depends on the invocation id through the load's index);
/// the engine checks at run time all the same, as it must for divergence that comes from data.
fn diverging() -> KernelDef {
    let mut k = KernelBuilder::new("diverge", [4, 1, 1]);
    let input = k.binding(ElemType::U32, Access::Read);
    let v = k.var(ElemType::U32, input.load(k.global_id(Axis::X)));
    k.if_((v.get() % 2u32).equals(1u32), |_| {});
    let mut def = k.build().unwrap().def().clone();
    let Some(Stmt::If { then_body, .. }) = def.body.last_mut() else {
        unreachable!("built above")
    };
    then_body.push(Stmt::Barrier);
    assert!(lockstep::kernel::validate(&def).is_err());
    def
}

#[test]
fn a_barrier_in_divergent_control_flow_is_reported() {
    let def = diverging();
    let mut data = vec![binding(vec![2, 3, 4, 5]), record()];
    let outcome = launch(&def, 1, &mut data);
    assert_eq!(
        outcome.divergent_barrier,
        Some(DivergentBarrier {
            waiting: vec![(3, 1)],
            finished: Some(0),
        })
    );
    assert_eq!(
        findings(&def, 1, &outcome),
        vec![
            "barrier in divergent control flow: invocation 1 (workgroup [0, 0, 0], local [1, 0, 0]) waits at statement 3 `workgroup_barrier`, invocation 0 (workgroup [0, 0, 0], local [0, 0, 0]) has finished"
        ]
    );
    // Uniform data: no report.
    let mut data = vec![binding(vec![1, 3, 5, 7]), record()];
    assert_eq!(launch(&def, 1, &mut data).divergent_barrier, None);
}

#[test]
fn each_workgroup_of_a_batch_is_judged_alone_and_the_lowest_divergent_one_reported() {
    let def = diverging();
    // Workgroup 0 is uniform (all odd: all wait), 1 and 2 diverge; 3 is uniform (all even).
    let input = vec![1, 3, 5, 7, 2, 3, 4, 5, 3, 2, 2, 2, 2, 4, 6, 8];
    for seed in 0..8 {
        let mut data = vec![binding(input.clone()), record()];
        let outcome = launch_seeded(&def, 4, &mut data, seed);
        assert_eq!(
            outcome.divergent_barrier,
            Some(DivergentBarrier {
                waiting: vec![(3, 5)],
                finished: Some(4),
            }),
            "seed {seed}"
        );
    }
    // A barrier only some workgroups reach, each of them whole, is uniform.
    let mut k = KernelBuilder::new("second", [4, 1, 1]);
    let out = k.binding(ElemType::U32, Access::ReadWrite);
    let s = k.shared(ElemType::U32, 4);
    let lid = k.local_id(Axis::X);
    k.if_(k.workgroup_id(Axis::X).equals(1u32), |k| {
        k.store(s, lid, lid + 10u32);
        k.workgroup_barrier();
        k.store(out, k.global_id(Axis::X), s.load((lid + 1u32) % 4u32));
    });
    let def = k.build().unwrap().def().clone();
    let mut data = vec![binding(vec![0; 12]), record()];
    let outcome = launch(&def, 3, &mut data);
    assert_eq!(outcome.divergent_barrier, None);
    assert_eq!(words(&data[0]), [0, 0, 0, 0, 11, 12, 13, 10, 0, 0, 0, 0]);
}

/// Invocations whose local id is odd return at once; the others exchange words through shared
/// memory across a barrier, which passes without the returned ones (they count as arrived).
fn half_return() -> KernelDef {
    let mut k = KernelBuilder::new("half_return", [8, 1, 1]);
    let out = k.binding(ElemType::U32, Access::ReadWrite);
    let s = k.shared(ElemType::U32, 8);
    let lid = k.local_id(Axis::X);
    k.if_((lid % 2u32).equals(1u32), |k| k.return_());
    k.store(s, lid, lid + 100u32);
    k.workgroup_barrier();
    k.store(out, k.global_id(Axis::X), s.load((lid + 2u32) % 8u32));
    k.build().unwrap().def().clone()
}

#[test]
fn an_invocation_that_returned_counts_as_arrived_at_later_barriers() {
    let def = half_return();
    for seed in 0..8 {
        let mut data = vec![binding(vec![0; 16]), record()];
        let outcome = launch_seeded(&def, 2, &mut data, seed);
        assert_eq!(outcome.divergent_barrier, None, "seed {seed}");
        assert!(outcome.races.is_empty() && outcome.unwritten_shared.is_empty());
        let expected = [102, 0, 104, 0, 106, 0, 100, 0];
        let both: Vec<u32> = expected.iter().chain(&expected).copied().collect();
        assert_eq!(
            words(&data[0]),
            both,
            "seed {seed}: returned invocations store nothing"
        );
    }
}

#[test]
fn a_read_of_a_word_a_returned_invocation_never_wrote_is_reported() {
    // Invocation 1 returns before storing its shared word, which invocation 7 then reads.
    let mut k = KernelBuilder::new("skipped", [8, 1, 1]);
    let out = k.binding(ElemType::U32, Access::ReadWrite);
    let s = k.shared(ElemType::U32, 8);
    let lid = k.local_id(Axis::X);
    k.if_(lid.equals(1u32), |k| k.return_());
    k.store(s, lid, lid);
    k.workgroup_barrier();
    k.store(out, lid, s.load((lid + 2u32) % 8u32));
    let def = k.build().unwrap().def().clone();
    let mut data = vec![binding(vec![0; 8]), record()];
    let outcome = launch(&def, 1, &mut data);
    assert_eq!(outcome.divergent_barrier, None);
    assert_eq!(
        findings(&def, 1, &outcome),
        vec![
            "read of unwritten shared memory: invocation 7 (workgroup [0, 0, 0], local [7, 0, 0]) read shared array 0 index 1 at statement 5 `b0[local_id.x] = s0[((local_id.x + 2u) % 8u)]`, which no invocation of its workgroup had written"
        ]
    );
}

#[test]
fn a_launch_of_more_workgroups_than_a_batch_holds_reduces_each_exactly() {
    // 40 workgroups of 64 lanes: three batches of up to 1024 lanes.
    let input: Vec<u32> = (0..40 * 64).map(|i| i * 31 + 5).collect();
    let mut data = vec![binding(input.clone()), binding(vec![0; 40]), record()];
    let outcome = launch(&reduction(ElemType::U32), 40, &mut data);
    let expected: Vec<u32> = input.chunks(64).map(|c| c.iter().sum()).collect();
    assert_eq!(words(&data[1]), expected);
    assert!(outcome.races.is_empty() && outcome.unwritten_shared.is_empty());
}

#[test]
fn shared_memory_is_per_workgroup_and_unwritten_reads_are_reported() {
    // Workgroup 0 writes its shared word, workgroup 1 only reads it.
    let mut k = KernelBuilder::new("leak", [2, 1, 1]);
    let out = k.binding(ElemType::U32, Access::ReadWrite);
    let s = k.shared(ElemType::U32, 1);
    let wg = k.workgroup_id(Axis::X);
    let first = wg.equals(0u32).and(k.local_id(Axis::X).equals(0u32));
    k.if_(first, |k| k.store(s, 0u32, 7u32));
    k.workgroup_barrier();
    k.store(out, k.global_id(Axis::X), s.load(0u32));
    let def = k.build().unwrap().def().clone();
    let mut data = vec![binding(vec![9; 4]), record()];
    let outcome = launch(&def, 2, &mut data);
    assert_eq!(words(&data[0]), vec![7, 7, 0, 0]);
    assert_eq!(outcome.unwritten_shared.len(), 1);
    // The launch's interleaving has workgroup 1's second invocation read first.
    assert_eq!(
        findings(&def, 2, &outcome),
        vec![
            "read of unwritten shared memory: invocation 3 (workgroup [1, 0, 0], local [1, 0, 0]) read shared array 0 index 0 at statement 4 `b0[global_id.x] = s0[0u]`, which no invocation of its workgroup had written"
        ]
    );
}

#[test]
fn shared_accesses_out_of_range_fault_or_trap_like_bindings() {
    let mut k = KernelBuilder::new("sbounds", [4, 1, 1]);
    let out = k.binding(ElemType::U32, Access::ReadWrite);
    let s = k.shared(ElemType::U32, 2);
    let i = k.global_id(Axis::X);
    k.store(s, i, i);
    k.workgroup_barrier();
    k.store(out, i, s.load(i % 2u32));
    let def = k.build().unwrap().def().clone();
    let mut data = vec![binding(vec![9; 4]), record()];
    launch(&def, 1, &mut data);
    assert_eq!(words(&data[0]), vec![0, 1, 0, 1]);
    assert_eq!(
        words(&data[1]),
        vec![1, 1, FaultRecord::SHARED_ARRAY, 2],
        "invocation 2 stored out of range first"
    );
    let unchecked = Guards {
        checked: false,
        kernel_id: 0,
    };
    let mut data = vec![binding(vec![9; 4])];
    let trap = run_on(
        Engine::Workgroup,
        0,
        &def,
        unchecked,
        [1, 1, 1],
        &mut data,
        &[],
    )
    .unwrap_err();
    assert_eq!(
        trap.to_string(),
        "illegal address: shared array 0 index 2 (unchecked mode)"
    );
}

#[test]
fn an_endless_loop_is_stopped_by_the_watchdog() {
    let mut k = KernelBuilder::new("spin", [1, 1, 1]);
    k.while_(true, |_| {});
    let def = k.build().unwrap().def().clone();
    let trap = run_on(
        Engine::Workgroup,
        0,
        &def,
        CHECKED,
        [1, 1, 1],
        &mut [record()],
        &[],
    )
    .unwrap_err();
    assert_eq!(
        trap,
        KernelTrap::Endless {
            dispatches: workgroup::MAX_DISPATCHES
        }
    );
}

/// [`reduction`] without the barrier after each level: a level's reads race with the next
/// level's writes.
fn racy_reduction() -> KernelDef {
    let mut def = reduction(ElemType::U32);
    let Some(Stmt::While { body, .. }) = def.body.get_mut(3) else {
        unreachable!("the reduction's loop is its fourth statement")
    };
    body.retain(|s| *s != Stmt::Barrier);
    lockstep::kernel::validate(&def).expect("a missing barrier is no invalid kernel");
    def
}

#[test]
fn a_reduction_missing_its_barrier_races_and_its_sum_depends_on_the_seed() {
    let def = racy_reduction();
    let input: Vec<u32> = (0..64).collect();
    let sums: Vec<u32> = (0..8)
        .map(|seed| {
            let mut data = vec![binding(input.clone()), binding(vec![0]), record()];
            let outcome = launch_seeded(&def, 1, &mut data, seed);
            let found = findings(&def, 1, &outcome);
            assert_eq!(found.len(), 1, "seed {seed}: {found:?}");
            assert!(
                found[0].starts_with("race: shared array 0 index "),
                "{found:?}"
            );
            data[1].words[0]
        })
        .collect();
    assert!(sums.iter().any(|&s| s != 2016), "{sums:?}");
    let mut data = vec![binding(input), binding(vec![0]), record()];
    let outcome = launch_seeded(&def, 1, &mut data, 0);
    assert_eq!(
        findings(&def, 1, &outcome),
        vec![
            "race: shared array 0 index 16: invocation 16 (workgroup [0, 0, 0], local [16, 0, 0]) wrote it at statement 6 `s0[local_id.x] = (s0[local_id.x] + s0[(local_id.x + v0)])`, and invocation 0 (workgroup [0, 0, 0], local [0, 0, 0]) read it at statement 6 `s0[local_id.x] = (s0[local_id.x] + s0[(local_id.x + v0)])`, with no barrier between them"
        ]
    );
}

#[test]
fn writes_from_different_invocations_to_one_global_word_race() {
    // Every invocation stores its id to out[0]: batched engine.
    let mut k = KernelBuilder::new("last_wins", [1, 1, 1]);
    let out = k.binding(ElemType::U32, Access::ReadWrite);
    k.store(out, 0u32, k.global_id(Axis::X));
    let def = k.build().unwrap().def().clone();
    assert_eq!(Engine::for_kernel(&def), Engine::Batched);
    let mut data = vec![binding(vec![0]), record()];
    let outcome = launch(&def, 2, &mut data);
    assert_eq!(
        findings(&def, 2, &outcome),
        vec![
            "race: binding 0 index 0: invocation 0 (workgroup [0, 0, 0], local [0, 0, 0]) wrote it at statement 1 `b0[0u] = global_id.x`, and invocation 1 (workgroup [1, 0, 0], local [0, 0, 0]) wrote it at statement 1 `b0[0u] = global_id.x`, in different workgroups, which nothing orders"
        ]
    );
}

#[test]
fn a_launch_whose_invocations_own_their_words_is_not_watched() {
    // The explorer's shape: dst[i] = f(dst[i], src[j]) over a one-dimensional grid.
    let mut k = KernelBuilder::new("own", [8, 1, 1]);
    let dst = k.binding(ElemType::U32, Access::ReadWrite);
    let src = k.binding(ElemType::U32, Access::Read);
    let i = k.global_id(Axis::X);
    k.if_(i.lt(dst.len()), |k| {
        let j = (i * 3u32) % src.len();
        k.store(dst, i, dst.load(i) + src.load(j));
    });
    let def = k.build().unwrap().def().clone();
    assert!(owns_its_words(&def, [4, 1, 1]));
    assert!(
        !owns_its_words(&def, [4, 2, 1]),
        "two rows share global_id.x"
    );
    let mut data = vec![binding(vec![1; 32]), binding(vec![2; 5]), record()];
    launch(&def, 4, &mut data);
    assert!(data.iter().all(|d| d.log.is_none()));
    // Any other index of a written binding is watched.
    let mut k = KernelBuilder::new("shifted", [8, 1, 1]);
    let dst = k.binding(ElemType::U32, Access::ReadWrite);
    k.store(dst, k.global_id(Axis::X) + 1u32, 1u32);
    assert!(!owns_its_words(k.build().unwrap().def(), [4, 1, 1]));
}

#[test]
fn a_race_on_data_can_make_a_barrier_diverge() {
    // Invocation 0 sets a flag the others test without a barrier between: under some
    // interleavings only some invocations see it and wait at the barrier.
    let mut k = KernelBuilder::new("flag", [4, 1, 1]);
    let flag = k.binding(ElemType::U32, Access::ReadWrite);
    let lid = k.local_id(Axis::X);
    k.if_(lid.equals(0u32), |k| k.store(flag, 0u32, 1u32));
    k.if_(flag.load(0u32).equals(1u32), |k| k.workgroup_barrier());
    let def = k
        .build()
        .expect("the flag's load is at a uniform index")
        .def()
        .clone();
    let divergent: Vec<u64> = (0..16)
        .filter(|&seed| {
            let mut data = vec![binding(vec![0]), record()];
            let outcome = launch_seeded(&def, 1, &mut data, seed);
            assert_eq!(outcome.races.len(), 1);
            outcome.divergent_barrier.is_some()
        })
        .collect();
    assert!(
        !divergent.is_empty() && divergent.len() < 16,
        "{divergent:?}"
    );
    let mut data = vec![binding(vec![0]), record()];
    let outcome = launch_seeded(&def, 1, &mut data, divergent[0]);
    assert_eq!(
        findings(&def, 1, &outcome),
        vec![
            "race: binding 0 index 0: invocation 3 (workgroup [0, 0, 0], local [3, 0, 0]) read it at statement 3 `if (b0[0u] == 1u)`, and invocation 0 (workgroup [0, 0, 0], local [0, 0, 0]) wrote it at statement 2 `b0[0u] = 1u`, with no barrier between them",
            "barrier in divergent control flow: invocation 0 (workgroup [0, 0, 0], local [0, 0, 0]) waits at statement 4 `workgroup_barrier`, invocation 1 (workgroup [0, 0, 0], local [1, 0, 0]) has finished",
        ]
    );
}

/// `dst[i] = src[j] * src[j] + (src[j] ^ dst[i]) + dst[i]` with `j = (i * 3 + shift) % len`,
/// then, in a loop, `acc = acc + src[(i + c) % len] * src[(i + c) % len]` for `c` in `0..3`:
/// loads repeated in one statement, and one whose value changes from iteration to iteration.
/// `shift` past the end of `src` (no modulo then) reads out of range.
fn repeated_loads(wrap: bool) -> KernelDef {
    let mut k = KernelBuilder::new("repeats", [4, 1, 1]);
    let dst = k.binding(ElemType::U32, Access::ReadWrite);
    let src = k.binding(ElemType::U32, Access::Read);
    let shift = k.param(ElemType::U32);
    let i = k.global_id(Axis::X);
    k.if_(i.lt(dst.len()), |k| {
        let j = if wrap {
            (i * 3u32 + shift) % src.len()
        } else {
            i + shift
        };
        let (s, d) = (src.load(j), dst.load(i));
        k.store(dst, i, s * s + (s ^ d) + d);
        let acc = k.var(ElemType::U32, 0u32);
        k.for_range(ElemType::U32, 0u32, 3u32, |k, c| {
            let s = src.load((i + c) % src.len());
            k.assign(acc, acc.get() + s * s);
        });
        k.store(dst, i, dst.load(i) + acc.get());
    });
    k.build().unwrap().def().clone()
}

#[test]
fn loads_repeated_in_a_statement_compute_check_and_report_as_each_load_would() {
    let def = repeated_loads(true);
    let repeated = repeated::RepeatedLoads::new(&def);
    assert_eq!(repeated.slots(), 3, "src[j], dst[i] and src[(i + c) % len]");
    let src: Vec<u32> = vec![3, 5, 7, 11, 13];
    let expected = |dst: &[u32], shift: u32| -> Vec<u32> {
        (0..dst.len())
            .map(|i| {
                let s = src[(i * 3 + shift as usize) % src.len()];
                let d = dst[i];
                let first = (s.wrapping_mul(s)).wrapping_add(s ^ d).wrapping_add(d);
                (0..3).fold(first, |acc, c| {
                    let s = src[(i + c) % src.len()];
                    acc.wrapping_add(s * s)
                })
            })
            .collect()
    };
    for engine in ENGINES {
        let dst: Vec<u32> = (0..8).map(|v| v * 17 + 1).collect();
        let mut data = vec![binding(dst.clone()), binding(src.clone()), record()];
        let outcome = run_on(
            engine,
            0,
            &def,
            CHECKED,
            [2, 1, 1],
            &mut data,
            &[Scalar::U32(2)],
        )
        .unwrap();
        assert_eq!(data[0].words, expected(&dst, 2), "{engine:?}");
        assert!(outcome.uninitialized_loads.is_empty(), "{engine:?}");
        // An unwritten source word is reported, once, whichever repeat reads it.
        let mut unwritten = binding(src.clone());
        unwritten.initialized[3] = false;
        let mut data = vec![binding(dst.clone()), unwritten, record()];
        let outcome = run_on(
            engine,
            0,
            &def,
            CHECKED,
            [2, 1, 1],
            &mut data,
            &[Scalar::U32(2)],
        )
        .unwrap();
        assert_eq!(
            outcome.uninitialized_loads,
            vec![BindingId(1)],
            "{engine:?}"
        );
    }
    // Out of range: the checked record and the unchecked trap name the lowest invocation.
    let def = repeated_loads(false);
    for engine in ENGINES {
        let mut data = vec![binding(vec![1; 8]), binding(src.clone()), record()];
        run_on(
            engine,
            0,
            &def,
            CHECKED,
            [2, 1, 1],
            &mut data,
            &[Scalar::U32(3)],
        )
        .unwrap();
        assert_eq!(data[2].words, vec![1, 1, 1, 5], "{engine:?}");
        let unchecked = Guards {
            checked: false,
            kernel_id: 1,
        };
        let mut data = vec![binding(vec![1; 8]), binding(src.clone()), record()];
        let trap = run_on(
            engine,
            0,
            &def,
            unchecked,
            [2, 1, 1],
            &mut data,
            &[Scalar::U32(3)],
        );
        assert_eq!(
            trap.unwrap_err(),
            KernelTrap::OutOfBounds {
                array: Array::Binding(BindingId(1)),
                index: 5
            },
            "{engine:?}"
        );
    }
}
