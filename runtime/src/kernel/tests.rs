use super::*;
use crate::Kernel;
use crate::kernel::uniformity::DivergenceCause;

fn saxpy() -> KernelDef {
    let mut k = KernelBuilder::new("saxpy", [64, 1, 1]);
    let x = k.binding(ElemType::F32, Access::Read);
    let y = k.binding(ElemType::F32, Access::ReadWrite);
    let a = k.param(ElemType::F32);
    let i = k.global_id(Axis::X);
    k.if_(i.lt(y.len()), |k| k.store(y, i, a * x.load(i) + y.load(i)));
    k.build().expect("saxpy is valid").def().clone()
}

#[test]
fn builder_produces_the_expected_tree() {
    let def = saxpy();
    assert_eq!(def.bindings.len(), 2);
    assert_eq!(def.params, vec![ElemType::F32]);
    assert!(
        matches!(def.body.as_slice(), [Stmt::If { then_body, else_body, .. }]
        if then_body.len() == 1 && else_body.is_empty())
    );
}

#[test]
fn content_hash_is_stable_and_distinguishes_kernels() {
    assert_eq!(saxpy().content_hash(), saxpy().content_hash());
    let mut other = saxpy();
    other.workgroup_size = [32, 1, 1];
    assert_ne!(saxpy().content_hash(), other.content_hash());
    // Pinned so that a change to hashing (which invalidates on-disk caches and trace hashes)
    // is a deliberate decision.
    assert_eq!(format!("{:016x}", saxpy().content_hash()).len(), 16);
}

#[test]
fn type_mismatch_names_the_context() {
    let mut k = KernelBuilder::new("bad_add", [1, 1, 1]);
    let out = k.binding(ElemType::U32, Access::ReadWrite);
    k.store(out, 0u32, Value::from(1u32) + 2.0f32);
    let err = k.build().unwrap_err();
    assert_eq!(
        err.to_string(),
        "kernel `bad_add`: the right operand expects u32, found f32"
    );
}

#[test]
fn store_to_read_only_binding_is_rejected() {
    let mut k = KernelBuilder::new("ro", [1, 1, 1]);
    let input = k.binding(ElemType::F32, Access::Read);
    k.store(input, 0u32, 1.0f32);
    assert_eq!(
        k.build().unwrap_err(),
        KernelError::WriteToReadOnly {
            kernel: "ro".into(),
            operation: "store",
            binding: 0
        }
    );
}

#[test]
fn unknown_binding_and_float_atomics_are_rejected() {
    let mut k = KernelBuilder::new("unknown", [1, 1, 1]);
    k.store(Array::Binding(BindingId(3)), 0u32, 1u32);
    assert!(matches!(
        k.build(),
        Err(KernelError::UnknownBinding { binding: 3, .. })
    ));

    let mut k = KernelBuilder::new("fatomic", [1, 1, 1]);
    let out = k.binding(ElemType::F32, Access::ReadWrite);
    k.atomic_add(out, 0u32, 1.0f32);
    assert!(matches!(k.build(), Err(KernelError::AtomicOnFloat { .. })));
}

#[test]
fn indices_must_be_u32_and_workgroups_non_empty() {
    let mut k = KernelBuilder::new("idx", [1, 1, 1]);
    let out = k.binding(ElemType::F32, Access::ReadWrite);
    k.store(out, 0i32, 1.0f32);
    assert!(matches!(k.build(), Err(KernelError::TypeMismatch { .. })));

    let k = KernelBuilder::new("empty_wg", [0, 1, 1]);
    assert!(matches!(
        k.build(),
        Err(KernelError::InvalidWorkgroupSize { .. })
    ));
}

#[test]
fn a_bitcast_takes_a_value_of_its_target_size() {
    let mut k = KernelBuilder::new("bits", [1, 1, 1]);
    let out = k.binding(ElemType::U32, Access::ReadWrite);
    k.store(out, 0u32, Value::from(1.5f32).bitcast(ElemType::U32));
    assert!(k.build().is_ok());
    let mut k = KernelBuilder::new("bad_bits", [1, 1, 1]);
    let out = k.binding(ElemType::F16, Access::ReadWrite);
    k.store(out, 0u32, Value::from(7u32).bitcast(ElemType::F16));
    assert!(matches!(k.build(), Err(KernelError::TypeMismatch { .. })));
}

/// A workgroup size whose product overflows `u64` (2^66 wraps to 0) was accepted in release
/// builds and panicked in debug ones; the simulator then aborted allocating invocation ids.
#[test]
fn a_workgroup_size_whose_product_overflows_is_refused() {
    for size in [[1 << 22; 3], [u32::MAX; 3], [1 << 31, 1 << 31, 4]] {
        let k = KernelBuilder::new("huge_wg", size);
        assert_eq!(
            k.build().unwrap_err(),
            KernelError::InvalidWorkgroupSize {
                kernel: "huge_wg".into(),
                size,
            }
        );
    }
    let mut def = KernelBuilder::new("wg", [1, 1, 1])
        .build()
        .unwrap()
        .def()
        .clone();
    def.workgroup_size = [1 << 22; 3];
    assert_eq!(def.workgroup_invocations(), u64::MAX);
    assert!(matches!(
        Kernel::new(def),
        Err(KernelError::InvalidWorkgroupSize { .. })
    ));
}

#[test]
fn loops_and_locals_validate() {
    let mut k = KernelBuilder::new("sum", [1, 1, 1]);
    let input = k.binding(ElemType::I32, Access::Read);
    let out = k.binding(ElemType::I32, Access::ReadWrite);
    let acc = k.var(ElemType::I32, 0i32);
    k.for_range(ElemType::U32, 0u32, input.len(), |k, i| {
        k.assign(acc, acc.get() + input.load(i));
    });
    k.store(out, 0u32, acc.get());
    let kernel = k.build().unwrap();
    assert_eq!(kernel.def().locals, vec![ElemType::I32, ElemType::U32]);
}

#[test]
fn fault_record_decodes_only_when_flagged() {
    assert_eq!(FaultRecord::decode(&[0, 1, 2, 3]), None);
    assert_eq!(
        FaultRecord::decode(&[1, 7, 2, 99]),
        Some(FaultRecord {
            kernel_id: 7,
            binding: 2,
            index: 99
        })
    );
}

/// Every invocation sums its workgroup's inputs from a shared copy, one partial sum per
/// chunk of 16 in a uniform `while`, with a barrier around each reuse of the chunk array:
/// the shape kernels with barriers have (uniform loops, id-dependent branches without a
/// barrier inside).
fn reduction() -> KernelBuilder {
    let mut k = KernelBuilder::new("reduce", [64, 1, 1]);
    let input = k.binding(ElemType::F32, Access::Read);
    let out = k.binding(ElemType::F32, Access::ReadWrite);
    let copy = k.shared(ElemType::F32, 64);
    let lid = k.local_id(Axis::X);
    k.store(copy, lid, input.load(k.global_id(Axis::X)));
    k.workgroup_barrier();
    let chunk = k.var(ElemType::U32, 0u32);
    let sum = k.var(ElemType::F32, 0.0f32);
    k.while_(chunk.get().lt(4u32), |k| {
        k.for_range(ElemType::U32, 0u32, 16u32, |k, j| {
            k.assign(sum, sum.get() + copy.load(chunk.get() * 16u32 + j));
        });
        k.assign(chunk, chunk.get() + 1u32);
    });
    k.workgroup_barrier();
    k.if_(lid.equals(0u32), |k| {
        k.store(out, k.workgroup_id(Axis::X), sum.get())
    });
    k
}

#[test]
fn a_shared_memory_reduction_builds_and_needs_its_shared_bytes() {
    let kernel = reduction().build().unwrap();
    let def = kernel.def();
    assert_eq!(
        def.shared,
        vec![SharedDecl {
            elem: ElemType::F32,
            len: 64
        }]
    );
    assert_eq!(def.shared_bytes(), 256);
    assert!(matches!(
        def.body.as_slice(),
        [
            Stmt::Store {
                array: Array::Shared(SharedId(0)),
                ..
            },
            Stmt::Barrier,
            Stmt::Assign { .. },
            Stmt::Assign { .. },
            Stmt::While { .. },
            Stmt::Barrier,
            Stmt::If { .. }
        ]
    ));
    let mut properties = small_device();
    assert_eq!(validate_for_device(def, &properties), Ok(()));
    properties.max_shared_memory_bytes = 255;
    let err = validate_for_device(def, &properties).unwrap_err();
    assert_eq!(
        err.to_string(),
        "kernel `reduce`: 256 bytes of workgroup-shared memory, the device allows 255"
    );
}

#[test]
fn atomics_return_their_old_value_in_a_fresh_variable_of_the_arrays_type() {
    let mut k = KernelBuilder::new("atomics", [8, 1, 1]);
    let counts = k.binding(ElemType::I32, Access::ReadWrite);
    let slots = k.shared(ElemType::U32, 8);
    let old = k.fetch_atomic(AtomicOp::Max, counts, 0u32, -1i32);
    let seen = k.compare_exchange(slots, 1u32, 0u32, 7u32);
    k.atomic(AtomicOp::Exchange, slots, 2u32, seen.get());
    k.atomic_add(counts, 1u32, old.get());
    let kernel = k.build().unwrap();
    let def = kernel.def();
    assert_eq!(def.locals, vec![ElemType::I32, ElemType::U32]);
    assert_eq!(
        def.body[0],
        Stmt::Atomic {
            op: AtomicOp::Max,
            array: Array::Binding(BindingId(0)),
            index: 0u32.into(),
            value: (-1i32).into(),
            old: Some(VarId(0)),
        }
    );
    assert!(matches!(
        def.body[1],
        Stmt::CompareExchange {
            array: Array::Shared(SharedId(0)),
            old: VarId(1),
            ..
        }
    ));
}

#[test]
fn atomics_need_an_integer_array_that_may_be_written() {
    let mut k = KernelBuilder::new("fshared", [1, 1, 1]);
    let s = k.shared(ElemType::F32, 4);
    k.atomic(AtomicOp::Min, s, 0u32, 1.0f32);
    let err = k.build().unwrap_err();
    assert_eq!(
        err,
        KernelError::AtomicOnFloat {
            kernel: "fshared".into(),
            operation: "min",
            array: Array::Shared(SharedId(0)),
            elem: ElemType::F32,
        }
    );
    assert_eq!(
        err.to_string(),
        "kernel `fshared`: atomic min on shared array 0 of type f32; atomics need u32 or i32"
    );

    let mut k = KernelBuilder::new("ro", [1, 1, 1]);
    let input = k.binding(ElemType::U32, Access::Read);
    k.compare_exchange(input, 0u32, 0u32, 1u32);
    assert!(matches!(
        k.build(),
        Err(KernelError::WriteToReadOnly {
            operation: "compare_exchange",
            binding: 0,
            ..
        })
    ));

    // The old value's variable must have the array's type.
    let mut k = KernelBuilder::new("oldtype", [1, 1, 1]);
    let out = k.binding(ElemType::U32, Access::ReadWrite);
    k.fetch_atomic(AtomicOp::Add, out, 0u32, 1u32);
    let mut def = k.build().unwrap().def().clone();
    def.locals[0] = ElemType::I32;
    assert_eq!(
        validate(&def).unwrap_err().to_string(),
        "kernel `oldtype`: the variable receiving an atomic's old value expects u32, found i32"
    );
}

#[test]
fn shared_arrays_are_indexed_by_u32_declared_and_not_empty() {
    let mut k = KernelBuilder::new("sidx", [1, 1, 1]);
    let s = k.shared(ElemType::I32, 4);
    k.store(s, 1i32, 2i32);
    assert_eq!(
        k.build().unwrap_err().to_string(),
        "kernel `sidx`: a store index expects u32, found i32"
    );

    let mut k = KernelBuilder::new("sload", [1, 1, 1]);
    let s = k.shared(ElemType::I32, 4);
    let v = k.var(ElemType::I32, 0i32);
    k.assign(v, s.load(-1i32));
    assert!(matches!(k.build(), Err(KernelError::TypeMismatch { .. })));

    let mut k = KernelBuilder::new("unknown", [1, 1, 1]);
    k.store(Array::Shared(SharedId(2)), 0u32, 1u32);
    assert_eq!(
        k.build().unwrap_err(),
        KernelError::UnknownShared {
            kernel: "unknown".into(),
            shared: 2,
            declared: 0
        }
    );

    let mut k = KernelBuilder::new("empty", [1, 1, 1]);
    k.shared(ElemType::U32, 0);
    assert_eq!(
        k.build().unwrap_err(),
        KernelError::EmptySharedArray {
            kernel: "empty".into(),
            shared: 0
        }
    );
}

#[test]
fn local_arrays_are_declared_bounded_and_take_no_atomics() {
    let mut k = KernelBuilder::new("local", [1, 1, 1]);
    let out = k.binding(ElemType::F32, Access::ReadWrite);
    let a = k.local_array(ElemType::F32, 3);
    k.store(a, 2u32, 1.5f32);
    k.store(out, 0u32, a.load(2u32) + a.load(0u32));
    let kernel = k.build().expect("valid");
    assert_eq!(
        kernel.def().elem_of(Array::Local(LocalArrayId(0))),
        Some(ElemType::F32)
    );

    let mut k = KernelBuilder::new("unknown", [1, 1, 1]);
    k.store(Array::Local(LocalArrayId(1)), 0u32, 1u32);
    assert_eq!(
        k.build().unwrap_err(),
        KernelError::UnknownLocalArray {
            kernel: "unknown".into(),
            array: 1,
            declared: 0
        }
    );
    for len in [0, MAX_LOCAL_ARRAY_LEN + 1] {
        let mut k = KernelBuilder::new("length", [1, 1, 1]);
        k.local_array(ElemType::U32, len);
        assert_eq!(
            k.build().unwrap_err(),
            KernelError::LocalArrayLength {
                kernel: "length".into(),
                array: 0,
                len
            }
        );
    }
    let mut k = KernelBuilder::new("atomic", [1, 1, 1]);
    let a = k.local_array(ElemType::U32, 2);
    k.atomic_add(a, 0u32, 1u32);
    assert_eq!(
        k.build().unwrap_err().to_string(),
        "kernel `atomic`: atomic add on local array 0, a per-invocation array"
    );
    let local = Array::Local(LocalArrayId(3));
    assert_eq!(
        FaultRecord::array_of_word(FaultRecord::array_word(local)),
        local
    );
}

#[test]
fn math_takes_floats_and_abs_takes_every_number() {
    let mut k = KernelBuilder::new("math", [1, 1, 1]);
    let f = k.binding(ElemType::F32, Access::ReadWrite);
    let i = k.binding(ElemType::I32, Access::ReadWrite);
    let x = f.load(0u32);
    let all = x
        .exp()
        .log()
        .sqrt()
        .rsqrt()
        .tanh()
        .abs()
        .floor()
        .ceil()
        .sin()
        .cos();
    k.store(f, 0u32, all.pow(2.0f32).fma(x, 1.0f32));
    k.store(i, 0u32, i.load(0u32).abs());
    let kernel = k.build().unwrap();
    let def = kernel.def();
    let Stmt::Store { value: stored, .. } = &def.body[0] else {
        panic!("the first statement is the f32 store: {:?}", def.body[0]);
    };
    assert_eq!(def.elem_type_of(stored), Some(ElemType::F32));

    // Each bad value is made once its builder is open: an operation on literals alone goes
    // to the newest open builder.
    let float_only = |name: &str, bad: fn() -> Value| {
        let mut k = KernelBuilder::new("bad_math", [1, 1, 1]);
        let out = k.binding(ElemType::F32, Access::ReadWrite);
        k.store(out, 0u32, bad().cast(ElemType::F32));
        let err = k.build().unwrap_err();
        assert!(
            matches!(&err, KernelError::FloatOnly { op, .. } if *op == name),
            "{err}"
        );
    };
    float_only("exp", || Value::from(1u32).exp());
    float_only("floor", || Value::from(1i32).floor());
    float_only("pow", || Value::from(2i32).pow(3i32));
    float_only("fma", || Value::from(2u32).fma(3u32, 4u32));
    let mut k = KernelBuilder::new("mixed_fma", [1, 1, 1]);
    let out = k.binding(ElemType::F32, Access::ReadWrite);
    k.store(out, 0u32, Value::from(1.0f32).fma(1u32, 2.0f32));
    assert_eq!(
        k.build().unwrap_err().to_string(),
        "kernel `mixed_fma`: fma's second operand expects f32, found u32"
    );
}

#[test]
fn break_and_continue_belong_to_a_loop() {
    let mut k = KernelBuilder::new("stray", [1, 1, 1]);
    k.break_();
    assert_eq!(
        k.build().unwrap_err(),
        KernelError::OutsideLoop {
            kernel: "stray".into(),
            statement: "break"
        }
    );
    let mut k = KernelBuilder::new("stray", [1, 1, 1]);
    k.if_(true, |k| k.continue_());
    assert_eq!(
        k.build().unwrap_err().to_string(),
        "kernel `stray`: `continue` outside a loop"
    );
    let mut k = KernelBuilder::new("loops", [1, 1, 1]);
    let n = k.var(ElemType::U32, 0u32);
    k.while_(true, |k| {
        k.assign(n, n.get() + 1u32);
        k.if_(n.get().gt(5u32), |k| k.break_());
        k.for_range(ElemType::U32, 0u32, 3u32, |k, _| k.continue_());
    });
    assert!(k.build().is_ok());
    let mut k = KernelBuilder::new("while_cond", [1, 1, 1]);
    k.while_(1u32, |_| {});
    assert!(matches!(k.build(), Err(KernelError::TypeMismatch { .. })));
}

fn divergence(build: impl FnOnce(&mut KernelBuilder)) -> Result<Kernel, KernelError> {
    let mut k = KernelBuilder::new("div", [8, 1, 1]);
    build(&mut k);
    k.build()
}

#[test]
fn barriers_in_id_dependent_control_flow_are_rejected() {
    let cause = |r: Result<Kernel, KernelError>| match r {
        Err(KernelError::DivergentBarrier { cause, .. }) => Some(cause),
        Ok(_) => None,
        Err(other) => panic!("unexpected {other}"),
    };
    // Directly under an id-dependent if.
    let r = divergence(|k| {
        let lid = k.local_id(Axis::X);
        k.if_(lid.lt(4u32), |k| k.workgroup_barrier());
    });
    assert_eq!(
        r.clone().unwrap_err().to_string(),
        "kernel `div`: workgroup_barrier inside an `if` whose condition depends on the invocation id; a barrier must be reached by every invocation of the workgroup"
    );
    assert_eq!(cause(r), Some(DivergenceCause::Branch));
    // Through a variable assigned from the id, and through one assigned in divergent flow.
    assert_eq!(
        cause(divergence(|k| {
            let v = k.var(ElemType::U32, k.global_id(Axis::X) * 2u32);
            let w = k.var(ElemType::U32, 0u32);
            k.if_(v.get().equals(4u32), |k| k.assign(w, 1u32));
            k.if_(w.get().equals(1u32), |k| k.workgroup_barrier());
        })),
        Some(DivergenceCause::Branch)
    );
    // Loop bounds, a while condition, an id-dependent break.
    assert_eq!(
        cause(divergence(|k| {
            let lid = k.local_id(Axis::X);
            k.for_range(ElemType::U32, 0u32, lid, |k, _| k.workgroup_barrier());
        })),
        Some(DivergenceCause::LoopCondition)
    );
    assert_eq!(
        cause(divergence(|k| {
            let s = k.shared(ElemType::U32, 8);
            let lid = k.local_id(Axis::X);
            k.while_(s.load(lid).gt(0u32), |k| k.workgroup_barrier());
        })),
        Some(DivergenceCause::LoopCondition)
    );
    assert_eq!(
        cause(divergence(|k| {
            let lid = k.local_id(Axis::X);
            k.while_(true, |k| {
                k.workgroup_barrier();
                k.if_(lid.equals(3u32), |k| k.break_());
            });
        })),
        Some(DivergenceCause::LoopExit)
    );
    // An atomic's old value differs per invocation.
    assert_eq!(
        cause(divergence(|k| {
            let s = k.shared(ElemType::U32, 1);
            let ticket = k.fetch_atomic(AtomicOp::Add, s, 0u32, 1u32);
            k.if_(ticket.get().equals(0u32), |k| k.workgroup_barrier());
        })),
        Some(DivergenceCause::Branch)
    );
}

#[test]
fn barriers_in_uniform_control_flow_are_accepted() {
    assert!(reduction().build().is_ok());
    // Workgroup ids, parameters, lengths and loads at uniform indices are uniform, and a
    // break under a uniform condition leaves a loop together.
    assert!(
        divergence(|k| {
            let data = k.binding(ElemType::U32, Access::Read);
            let n = k.param(ElemType::U32);
            let wg = k.workgroup_id(Axis::X);
            k.if_(wg.lt(n), |k| k.workgroup_barrier());
            k.for_range(ElemType::U32, 0u32, data.len(), |k, i| {
                k.workgroup_barrier();
                k.if_(data.load(i).equals(n), |k| k.break_());
            });
            // An id-dependent break in an inner loop leaves only that loop.
            k.while_(true, |k| {
                let lid = k.local_id(Axis::X);
                k.for_range(ElemType::U32, 0u32, 4u32, |k, j| {
                    k.if_(j.equals(lid), |k| k.break_());
                });
                k.workgroup_barrier();
                k.break_();
            });
        })
        .is_ok()
    );
}

#[test]
fn a_return_under_any_condition_leaves_later_barriers_uniform() {
    // Invocations that returned count as arrived at the barriers the others reach, in a loop
    // as after it, and `return` is allowed outside loops.
    let kernel = divergence(|k| {
        let lid = k.local_id(Axis::X);
        k.if_(lid.gt(3u32), |k| k.return_());
        k.workgroup_barrier();
        k.for_range(ElemType::U32, 0u32, 4u32, |k, i| {
            k.if_(i.equals(lid), |k| k.return_());
            k.workgroup_barrier();
        });
    })
    .expect("a valid kernel");
    assert_eq!(
        crate::kernel::display::statements(&kernel.def().body)[1],
        &Stmt::Return
    );
}

#[test]
fn a_half_float_kernel_is_refused_on_a_device_without_the_feature_naming_it() {
    use half::{bf16, f16};
    let mut k = KernelBuilder::new("halves", [1, 1, 1]);
    let out = k.binding(ElemType::F32, Access::ReadWrite);
    // The half float appears only as a literal cast to f32: still a use.
    k.store(
        out,
        0u32,
        Value::from(bf16::from_f32(1.5)).cast(ElemType::F32),
    );
    let kernel = k.build().unwrap();
    let mut properties = small_device();
    properties.features.f16 = true;
    let err = validate_for_device(kernel.def(), &properties).unwrap_err();
    assert_eq!(
        err.to_string(),
        "kernel `halves`: uses bf16, which the device does not support (Features::bf16 is false)"
    );
    properties.features.bf16 = true;
    assert_eq!(validate_for_device(kernel.def(), &properties), Ok(()));
    assert_eq!(
        crate::kernel::types_used(kernel.def()),
        [ElemType::U32, ElemType::F32, ElemType::BF16]
    );
    let _ = f16::ONE;
}

#[test]
fn half_floats_take_float_operations_but_not_atomics_or_bitwise_ones() {
    let mut k = KernelBuilder::new("h", [1, 1, 1]);
    let out = k.binding(ElemType::F16, Access::ReadWrite);
    k.atomic_add(out, 0u32, Value::from(half::f16::ONE));
    assert!(matches!(
        k.build().unwrap_err(),
        KernelError::AtomicOnFloat {
            elem: ElemType::F16,
            ..
        }
    ));
    let mut k = KernelBuilder::new("h", [1, 1, 1]);
    let out = k.binding(ElemType::BF16, Access::ReadWrite);
    let x = out.load(0u32);
    k.store(out, 1u32, (x * x - x).max(-x).sqrt().fma(x, x).abs());
    k.build().unwrap();
}

/// A device with 256 bytes of shared memory and no optional features.
fn small_device() -> crate::DeviceProperties {
    crate::DeviceProperties {
        name: "test".into(),
        backend: "test".into(),
        memory_bytes: 1 << 20,
        max_allocation_bytes: 1 << 20,
        alignment_bytes: 256,
        max_load_width_bytes: 16,
        max_workgroups: [1; 3],
        max_shared_memory_bytes: 256,
        features: crate::device::Features {
            graphs: crate::device::GraphSupport::Software,
            timestamps: false,
            concurrent_streams: false,
            f16: false,
            bf16: false,
        },
    }
}

#[test]
fn a_bitwise_operator_on_floats_and_an_undeclared_parameter_are_refused() {
    let mut def = saxpy();
    def.body = vec![Stmt::Store {
        array: Array::Binding(BindingId(1)),
        index: Expr::Lit(Scalar::U32(0)),
        value: Expr::Binary {
            op: BinOp::BitXor,
            lhs: Box::new(Expr::Param(0)),
            rhs: Box::new(Expr::Lit(Scalar::F32(1.0))),
        },
    }];
    assert_eq!(
        validate::validate(&def).unwrap_err().to_string(),
        "kernel `saxpy`: BitXor is defined on integers only, found f32"
    );
    def.body = vec![Stmt::Store {
        array: Array::Binding(BindingId(1)),
        index: Expr::Lit(Scalar::U32(0)),
        value: Expr::Param(1),
    }];
    assert_eq!(
        validate::validate(&def).unwrap_err(),
        KernelError::UnknownParam {
            kernel: "saxpy".into(),
            param: 1,
            declared: 1,
        }
    );
}
