use super::*;
use crate::kernel::ir::{BinOp, CmpOp, Scalar};
use crate::kernel::validate::VALIDATIONS;

fn lit(v: u32) -> Box<Expr> {
    Box::new(Expr::Lit(Scalar::U32(v)))
}

fn gid() -> Box<Expr> {
    Box::new(Expr::Builtin(Builtin::GlobalId(Axis::X)))
}

fn bin(op: BinOp, lhs: Box<Expr>, rhs: Box<Expr>) -> Box<Expr> {
    Box::new(Expr::Binary { op, lhs, rhs })
}

fn load(binding: u32, index: Box<Expr>) -> Box<Expr> {
    Box::new(Expr::Load {
        array: Array::Binding(BindingId(binding)),
        index,
    })
}

/// `y[i] = a * x[i] + y[i]` where `i < len(y)`.
fn axpy(k: &mut KernelBuilder) {
    let x = k.binding(ElemType::F32, Access::Read);
    let y = k.binding(ElemType::F32, Access::ReadWrite);
    let a = k.param(ElemType::F32);
    let i = k.global_id(Axis::X);
    k.if_(i.lt(y.len()), |k| k.store(y, i, a * x.load(i) + y.load(i)));
}

#[test]
fn a_value_used_twice_becomes_two_equal_subtrees() {
    let mut k = KernelBuilder::new("axpy", [64, 1, 1]);
    axpy(&mut k);
    let kernel = k.build().unwrap();
    let product = bin(BinOp::Mul, Box::new(Expr::Param(0)), load(0, gid()));
    assert_eq!(
        kernel.def().body,
        vec![Stmt::If {
            cond: Expr::Cmp {
                op: CmpOp::Lt,
                lhs: gid(),
                rhs: Box::new(Expr::Len(BindingId(1))),
            },
            then_body: vec![Stmt::Store {
                array: Array::Binding(BindingId(1)),
                index: *gid(),
                value: *bin(BinOp::Add, product, load(1, gid())),
            }],
            else_body: vec![],
        }]
    );
}

#[test]
fn a_literal_on_the_left_stays_on_the_left() {
    let mut k = KernelBuilder::new("left", [1, 1, 1]);
    let out = k.binding(ElemType::U32, Access::ReadWrite);
    let i = k.global_id(Axis::X);
    k.store(out, 0u32, 2u32 * i - 1u32);
    let kernel = k.build().unwrap();
    let Stmt::Store { value, .. } = &kernel.def().body[0] else {
        panic!("one store: {:?}", kernel.def().body);
    };
    assert_eq!(
        *value,
        *bin(BinOp::Sub, bin(BinOp::Mul, lit(2), gid()), lit(1))
    );
}

#[test]
fn a_value_is_a_small_copy_handle() {
    fn copy<T: Copy>() {}
    copy::<Value>();
    assert!(std::mem::size_of::<Value>() <= 16);
}

#[test]
fn two_builders_open_at_once_build_the_kernels_they_build_alone() {
    let alone = |name| {
        let mut k = KernelBuilder::new(name, [64, 1, 1]);
        axpy(&mut k);
        k.build().unwrap().content_hash()
    };
    let mut outer = KernelBuilder::new("outer", [64, 1, 1]);
    let x = outer.binding(ElemType::F32, Access::Read);
    let y = outer.binding(ElemType::F32, Access::ReadWrite);
    let a = outer.param(ElemType::F32);
    let i = outer.global_id(Axis::X);
    let scaled = a * x.load(i);
    // A kernel built while `outer` is open, and one still open when `outer` builds.
    let inner = alone("inner");
    let mut late = KernelBuilder::new("late", [64, 1, 1]);
    axpy(&mut late);
    outer.if_(i.lt(y.len()), |k| k.store(y, i, scaled + y.load(i)));
    assert_eq!(outer.build().unwrap().content_hash(), alone("outer"));
    assert_eq!(inner, alone("inner"));
    assert_eq!(late.build().unwrap().content_hash(), alone("late"));
}

#[test]
fn a_value_of_another_open_builder_is_refused_by_name() {
    let mut a = KernelBuilder::new("a", [1, 1, 1]);
    let n = a.param(ElemType::U32);
    let mut b = KernelBuilder::new("b", [1, 1, 1]);
    let out = b.binding(ElemType::U32, Access::ReadWrite);
    b.store(out, 0u32, n + 1u32);
    let err = b.build().unwrap_err();
    assert_eq!(
        err,
        KernelError::ForeignValue {
            kernel: "b".into(),
            what: "value",
            origin: ForeignOrigin::OtherBuilder("a".into()),
        }
    );
    assert_eq!(
        err.to_string(),
        "kernel `b`: a value of kernel `a`'s builder was used; a kernel takes only the values, \
         variables and arrays its own KernelBuilder made"
    );
    // `a` itself is unharmed.
    let out = a.binding(ElemType::U32, Access::ReadWrite);
    a.store(out, 0u32, n);
    assert!(a.build().is_ok());
}

#[test]
fn a_value_mixing_two_builders_is_refused_wherever_it_is_used() {
    let mut a = KernelBuilder::new("a", [1, 1, 1]);
    let mut b = KernelBuilder::new("b", [1, 1, 1]);
    let (na, nb) = (a.param(ElemType::U32), b.param(ElemType::U32));
    let (out_a, out_b) = (
        a.binding(ElemType::U32, Access::ReadWrite),
        b.binding(ElemType::U32, Access::ReadWrite),
    );
    // The sum lives in `a` (its left operand's builder) but reads `b`'s parameter.
    a.store(out_a, 0u32, na + nb);
    b.store(out_b, 0u32, na + nb);
    let origin = |r: Result<Kernel, KernelError>| match r {
        Err(KernelError::ForeignValue { origin, .. }) => origin,
        other => panic!("expected a foreign value, got {other:?}"),
    };
    // Each statement resolves its values when it is added, while both builders are open.
    assert_eq!(origin(a.build()), ForeignOrigin::OtherBuilder("b".into()));
    assert_eq!(origin(b.build()), ForeignOrigin::OtherBuilder("a".into()));
}

#[test]
fn values_variables_and_arrays_of_a_closed_builder_are_refused() {
    let mut old = KernelBuilder::new("old", [1, 1, 1]);
    let (data, tile) = (
        old.binding(ElemType::U32, Access::ReadWrite),
        old.shared(ElemType::U32, 4),
    );
    let (i, v) = (old.param(ElemType::U32), old.var(ElemType::U32, 0u32));
    drop(old);
    let refused = |f: &dyn Fn(&mut KernelBuilder)| {
        let mut k = KernelBuilder::new("new", [1, 1, 1]);
        let out = k.binding(ElemType::U32, Access::ReadWrite);
        k.store(out, 0u32, 0u32);
        f(&mut k);
        match k.build() {
            Err(KernelError::ForeignValue { what, origin, .. }) => {
                assert_eq!(origin, ForeignOrigin::ClosedBuilder);
                what
            }
            other => panic!("expected a foreign value, got {other:?}"),
        }
    };
    assert_eq!(refused(&|k| k.store(data, 0u32, 1u32)), "array");
    assert_eq!(refused(&|k| k.atomic_add(tile, 0u32, 1u32)), "array");
    assert_eq!(refused(&|k| k.assign(v, 1u32)), "variable");
    assert_eq!(refused(&|k| k.if_(i.lt(2u32), |_| {})), "value");
    assert_eq!(refused(&|k| k.store(tile, 0u32, v)), "array");
    assert_eq!(
        refused(&|k| {
            k.var(ElemType::U32, v);
        }),
        "value"
    );
    assert_eq!(
        refused(&|k| k.while_(data.load(0u32).gt(0u32), |_| {})),
        "value"
    );
}

#[test]
fn an_operation_on_literals_goes_to_the_newest_open_builder() {
    let orphan = Value::from(2u32) * 3u32;
    let mut k = KernelBuilder::new("k", [1, 1, 1]);
    let out = k.binding(ElemType::U32, Access::ReadWrite);
    let six = Value::from(2u32) * 3u32;
    k.store(out, 0u32, six);
    assert!(k.build().is_ok());

    let mut k = KernelBuilder::new("k", [1, 1, 1]);
    let out = k.binding(ElemType::U32, Access::ReadWrite);
    k.store(out, 0u32, orphan);
    assert_eq!(
        k.build().unwrap_err().to_string(),
        "kernel `k`: a value made from literals while no KernelBuilder was open was used; a \
         kernel takes only the values, variables and arrays its own KernelBuilder made"
    );
}

#[test]
fn a_built_kernel_is_validated_exactly_once() {
    let mut k = KernelBuilder::new("axpy", [64, 1, 1]);
    axpy(&mut k);
    VALIDATIONS.with(|n| n.set(0));
    let kernel = k.build().unwrap();
    assert_eq!(VALIDATIONS.get(), 1);
    // A hand-made definition is validated by `Kernel::new`.
    let mut def = kernel.def().clone();
    assert!(Kernel::new(def.clone()).is_ok());
    assert_eq!(VALIDATIONS.get(), 2);
    def.workgroup_size = [0, 1, 1];
    assert!(matches!(
        Kernel::new(def),
        Err(KernelError::InvalidWorkgroupSize { .. })
    ));
}
