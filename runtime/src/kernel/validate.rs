//! Type checking of [`KernelDef`]s. Devices may assume every kernel they compile passed it.

use thiserror::Error;

use super::builder::ForeignOrigin;
use super::ir::{
    Access, Array, BinOp, BindingId, ElemType, Expr, KernelDef, LocalArrayId, SharedId, Stmt, Ty,
    UnaryOp, VarId,
};
use super::types;
use super::uniformity::{self, DivergenceCause};
use crate::properties::DeviceProperties;

/// Why a kernel definition is invalid. Messages name the kernel and the offending part.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum KernelError {
    /// An expression or statement whose operand has the wrong type (a `f32` index, operands of two
    /// types, a non-boolean condition).
    #[error("kernel `{kernel}`: {context} expects {expected}, found {found}")]
    TypeMismatch {
        /// The kernel's name.
        kernel: String,
        /// Where the operand sits, for the message (`"a load index"`, `"an if condition"`, ...).
        context: String,
        /// The type or types accepted there.
        expected: String,
        /// The type the operand has.
        found: Ty,
    },
    /// A [`BindingId`](super::BindingId) past the declared bindings.
    #[error("kernel `{kernel}`: binding {binding} is not declared ({declared} bindings)")]
    UnknownBinding {
        /// The kernel's name.
        kernel: String,
        /// The binding referenced.
        binding: u32,
        /// Number of bindings declared.
        declared: usize,
    },
    /// An [`Expr::Param`](super::Expr::Param) past the declared parameters.
    #[error("kernel `{kernel}`: parameter {param} is not declared ({declared} parameters)")]
    UnknownParam {
        /// The kernel's name.
        kernel: String,
        /// The parameter referenced.
        param: u32,
        /// Number of parameters declared.
        declared: usize,
    },
    /// A [`VarId`](super::VarId) past the declared locals.
    #[error("kernel `{kernel}`: local variable {var} is not declared ({declared} locals)")]
    UnknownVar {
        /// The kernel's name.
        kernel: String,
        /// The local referenced.
        var: u32,
        /// Number of locals declared.
        declared: usize,
    },
    /// A store or atomic on a binding declared [`Access::Read`](super::Access::Read): declare it
    /// `ReadWrite`.
    #[error("kernel `{kernel}`: {operation} to binding {binding}, which is declared read-only")]
    WriteToReadOnly {
        /// The kernel's name.
        kernel: String,
        /// The statement, for the message (`"store"`, `"atomic add"`, ...).
        operation: &'static str,
        /// The binding written.
        binding: u32,
    },
    /// A [`SharedId`](super::SharedId) past the declared shared arrays.
    #[error("kernel `{kernel}`: shared array {shared} is not declared ({declared} shared arrays)")]
    UnknownShared {
        /// The kernel's name.
        kernel: String,
        /// The shared array referenced.
        shared: u32,
        /// Number of shared arrays declared.
        declared: usize,
    },
    /// A shared array declared with zero elements.
    #[error("kernel `{kernel}`: shared array {shared} has no elements")]
    EmptySharedArray {
        /// The kernel's name.
        kernel: String,
        /// The empty shared array.
        shared: u32,
    },
    /// A [`LocalArrayId`](super::LocalArrayId) past the declared local arrays.
    #[error("kernel `{kernel}`: local array {array} is not declared ({declared} local arrays)")]
    UnknownLocalArray {
        /// The kernel's name.
        kernel: String,
        /// The local array referenced.
        array: u32,
        /// Number of local arrays declared.
        declared: usize,
    },
    /// A local array of no elements, or of more than [`MAX_LOCAL_ARRAY_LEN`].
    #[error(
        "kernel `{kernel}`: local array {array} has {len} elements; a local array holds 1 to {MAX_LOCAL_ARRAY_LEN}"
    )]
    LocalArrayLength {
        /// The kernel's name.
        kernel: String,
        /// The local array.
        array: u32,
        /// Its declared length.
        len: u32,
    },
    /// An atomic on a local array, which no other invocation can reach: use a load and a store.
    #[error("kernel `{kernel}`: atomic {operation} on {array}, a per-invocation array")]
    AtomicOnLocalArray {
        /// The kernel's name.
        kernel: String,
        /// The atomic, for the message.
        operation: &'static str,
        /// The local array the atomic targets.
        array: Array,
    },
    /// An atomic on a float array: atomics take `u32` or `i32` arrays only.
    #[error(
        "kernel `{kernel}`: atomic {operation} on {array} of type {elem}; atomics need u32 or i32"
    )]
    AtomicOnFloat {
        /// The kernel's name.
        kernel: String,
        /// The atomic, for the message.
        operation: &'static str,
        /// The array the atomic targets.
        array: Array,
        /// The array's element type.
        elem: ElemType,
    },
    /// A function defined on floats only (`sqrt`, `exp`, `pow`, `fma`, ...) applied to another
    /// type: cast the operand first.
    #[error("kernel `{kernel}`: {op} is defined on floats only, found {found}")]
    FloatOnly {
        /// The kernel's name.
        kernel: String,
        /// The function, for the message.
        op: &'static str,
        /// The operand's type.
        found: Ty,
    },
    /// A `break` or `continue` outside any loop.
    #[error("kernel `{kernel}`: `{statement}` outside a loop")]
    OutsideLoop {
        /// The kernel's name.
        kernel: String,
        /// `"break"` or `"continue"`.
        statement: &'static str,
    },
    /// A barrier that some invocations of a workgroup may not reach, because the control flow
    /// around it depends on the invocation id: hoist it out of that `if` or loop.
    #[error(
        "kernel `{kernel}`: workgroup_barrier {cause}; a barrier must be reached by every invocation of the workgroup"
    )]
    DivergentBarrier {
        /// The kernel's name.
        kernel: String,
        /// Which control flow diverges.
        cause: DivergenceCause,
    },
    /// More workgroup-shared memory than the device provides
    /// ([`DeviceProperties::max_shared_memory_bytes`](crate::DeviceProperties::max_shared_memory_bytes)),
    /// found at launch.
    #[error(
        "kernel `{kernel}`: {bytes} bytes of workgroup-shared memory, the device allows {limit}"
    )]
    SharedMemoryTooLarge {
        /// The kernel's name.
        kernel: String,
        /// Bytes of shared arrays one workgroup uses.
        bytes: u64,
        /// Bytes the device allows per workgroup.
        limit: u64,
    },
    /// A bitwise or shift operator applied to a float.
    #[error("kernel `{kernel}`: {op:?} is defined on integers only, found {found}")]
    IntegerOnly {
        /// The kernel's name.
        kernel: String,
        /// The operator.
        op: BinOp,
        /// The operand's type.
        found: Ty,
    },
    /// A workgroup size with a zero dimension, or more than [`MAX_WORKGROUP_INVOCATIONS`]
    /// invocations.
    #[error(
        "kernel `{kernel}`: workgroup size {size:?} must have every dimension >= 1 and at most 1024 invocations"
    )]
    InvalidWorkgroupSize {
        /// The kernel's name.
        kernel: String,
        /// The size declared, `[x, y, z]`.
        size: [u32; 3],
    },
    /// A kernel that uses a half float type the device does not support (its
    /// [`Features`](crate::Features) flag is false), found at launch or compile.
    #[error(
        "kernel `{kernel}`: uses {elem}, which the device does not support (Features::{feature} is false)"
    )]
    UnsupportedType {
        /// The kernel's name.
        kernel: String,
        /// The element type the device lacks.
        elem: ElemType,
        /// The [`Features`](crate::Features) field that would allow it (`"f16"`, `"bf16"`).
        feature: &'static str,
    },
    /// A statement of a [`KernelBuilder`](super::KernelBuilder) used a value, variable or
    /// array that another builder made (see [`Value`](super::Value)): build each kernel from
    /// its own builder's handles.
    #[error(
        "kernel `{kernel}`: a {what} {origin} was used; a kernel takes only the values, variables and arrays its own KernelBuilder made"
    )]
    ForeignValue {
        /// The kernel's name.
        kernel: String,
        /// `"value"`, `"variable"` or `"array"`.
        what: &'static str,
        /// Which builder made it.
        origin: ForeignOrigin,
    },
}

#[cfg(test)]
thread_local! {
    /// How many times [`validate`] ran on this thread: the builder's tests count them.
    pub(crate) static VALIDATIONS: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

/// Largest number of invocations per workgroup that every device accepts.
pub const MAX_WORKGROUP_INVOCATIONS: u64 = 1024;

/// Most elements of one local array: 16 KiB of 32-bit words per invocation, far below what a
/// GPU's local memory holds, and what the simulator holds per lane of a batch.
pub const MAX_LOCAL_ARRAY_LEN: u32 = 4096;

/// Checks types, references, access modes, loops and barriers of a whole kernel: everything
/// that does not depend on the device.
pub fn validate(def: &KernelDef) -> Result<(), KernelError> {
    #[cfg(test)]
    VALIDATIONS.with(|n| n.set(n.get() + 1));
    let checker = Checker { def };
    if def.workgroup_size.contains(&0) || def.workgroup_invocations() > MAX_WORKGROUP_INVOCATIONS {
        return Err(KernelError::InvalidWorkgroupSize {
            kernel: def.name.clone(),
            size: def.workgroup_size,
        });
    }
    if let Some(shared) = def.shared.iter().position(|s| s.len == 0) {
        return Err(KernelError::EmptySharedArray {
            kernel: def.name.clone(),
            shared: shared as u32,
        });
    }
    let too_long = |len| len == 0 || len > MAX_LOCAL_ARRAY_LEN;
    if let Some(array) = def.local_arrays.iter().position(|l| too_long(l.len)) {
        return Err(KernelError::LocalArrayLength {
            kernel: def.name.clone(),
            array: array as u32,
            len: def.local_arrays[array].len,
        });
    }
    checker.block(&def.body, 0)?;
    uniformity::check_barriers(def).map_err(|cause| KernelError::DivergentBarrier {
        kernel: def.name.clone(),
        cause,
    })
}

/// Checks what a device limits: a validated kernel's element types against its
/// [`Features`](crate::Features), and its shared memory against `properties`.
pub fn validate_for_device(
    def: &KernelDef,
    properties: &DeviceProperties,
) -> Result<(), KernelError> {
    fits_device(&def.name, &types::used(def), def.shared_bytes(), properties)
}

/// [`validate_for_device`] over what it reads of a kernel: its name, the element types it
/// uses and its shared memory bytes (which a [`Kernel`](super::Kernel) keeps, so that a launch
/// does not walk the kernel again).
pub(crate) fn fits_device(
    kernel: &str,
    used: &[ElemType],
    shared_bytes: u64,
    properties: &DeviceProperties,
) -> Result<(), KernelError> {
    let features = &properties.features;
    if let Some(&elem) = used.iter().find(|&&e| !features.supports(e)) {
        return Err(KernelError::UnsupportedType {
            kernel: kernel.to_owned(),
            elem,
            feature: crate::Features::flag_of(elem).unwrap_or("?"),
        });
    }
    let limit = properties.max_shared_memory_bytes;
    if shared_bytes > limit {
        return Err(KernelError::SharedMemoryTooLarge {
            kernel: kernel.to_owned(),
            bytes: shared_bytes,
            limit,
        });
    }
    Ok(())
}

struct Checker<'a> {
    def: &'a KernelDef,
}

impl Checker<'_> {
    fn kernel(&self) -> String {
        self.def.name.clone()
    }

    fn mismatch(&self, context: &str, expected: &str, found: Ty) -> KernelError {
        KernelError::TypeMismatch {
            kernel: self.kernel(),
            context: context.to_owned(),
            expected: expected.to_owned(),
            found,
        }
    }

    fn expect(&self, context: &str, expected: Ty, expr: &Expr) -> Result<(), KernelError> {
        let found = self.ty(expr)?;
        if found == expected {
            Ok(())
        } else {
            Err(self.mismatch(context, &expected.to_string(), found))
        }
    }

    fn binding(&self, id: BindingId) -> Result<&super::ir::BindingDecl, KernelError> {
        self.def
            .bindings
            .get(id.0 as usize)
            .ok_or_else(|| KernelError::UnknownBinding {
                kernel: self.kernel(),
                binding: id.0,
                declared: self.def.bindings.len(),
            })
    }

    fn var(&self, id: VarId) -> Result<ElemType, KernelError> {
        self.def
            .locals
            .get(id.0 as usize)
            .copied()
            .ok_or_else(|| KernelError::UnknownVar {
                kernel: self.kernel(),
                var: id.0,
                declared: self.def.locals.len(),
            })
    }

    /// The element type of `array`, which must be declared.
    fn array(&self, array: Array) -> Result<ElemType, KernelError> {
        match array {
            Array::Binding(id) => Ok(self.binding(id)?.elem),
            Array::Shared(id) => self.shared(id),
            Array::Local(id) => self.local_array(id),
        }
    }

    fn local_array(&self, id: LocalArrayId) -> Result<ElemType, KernelError> {
        self.def
            .local_arrays
            .get(id.0 as usize)
            .map(|l| l.elem)
            .ok_or_else(|| KernelError::UnknownLocalArray {
                kernel: self.kernel(),
                array: id.0,
                declared: self.def.local_arrays.len(),
            })
    }

    fn shared(&self, id: SharedId) -> Result<ElemType, KernelError> {
        self.def
            .shared
            .get(id.0 as usize)
            .map(|s| s.elem)
            .ok_or_else(|| KernelError::UnknownShared {
                kernel: self.kernel(),
                shared: id.0,
                declared: self.def.shared.len(),
            })
    }

    /// The element type of `array`, which `operation` writes: a read-write binding, a shared
    /// or a local array.
    fn writable(&self, array: Array, operation: &'static str) -> Result<ElemType, KernelError> {
        let Array::Binding(id) = array else {
            return self.array(array);
        };
        let decl = self.binding(id)?;
        if decl.access == Access::Read {
            return Err(KernelError::WriteToReadOnly {
                kernel: self.kernel(),
                operation,
                binding: id.0,
            });
        }
        Ok(decl.elem)
    }

    /// The element type of an atomic's target: writable, and an integer.
    fn atomic_target(
        &self,
        array: Array,
        operation: &'static str,
    ) -> Result<ElemType, KernelError> {
        let elem = self.writable(array, operation)?;
        if let Array::Local(_) = array {
            return Err(KernelError::AtomicOnLocalArray {
                kernel: self.kernel(),
                operation,
                array,
            });
        }
        if elem.is_float() {
            return Err(KernelError::AtomicOnFloat {
                kernel: self.kernel(),
                operation,
                array,
                elem,
            });
        }
        Ok(elem)
    }

    /// `found` must be a float for `op`.
    fn float_only(&self, op: &'static str, found: Ty) -> Result<Ty, KernelError> {
        if matches!(found, Ty::Elem(elem) if elem.is_float()) {
            Ok(found)
        } else {
            Err(KernelError::FloatOnly {
                kernel: self.kernel(),
                op,
                found,
            })
        }
    }

    fn ty(&self, expr: &Expr) -> Result<Ty, KernelError> {
        const U32: Ty = Ty::Elem(ElemType::U32);
        Ok(match expr {
            Expr::Lit(s) => Ty::Elem(s.elem_type()),
            Expr::Bool(_) => Ty::Bool,
            Expr::Builtin(_) | Expr::Len(_) => {
                if let Expr::Len(id) = expr {
                    self.binding(*id)?;
                }
                U32
            }
            Expr::Param(p) => Ty::Elem(self.param(*p)?),
            Expr::Var(v) => Ty::Elem(self.var(*v)?),
            Expr::Load { array, index } => {
                let elem = self.array(*array)?;
                self.expect("a load index", U32, index)?;
                Ty::Elem(elem)
            }
            Expr::Binary { op, lhs, rhs } => self.binary(*op, lhs, rhs)?,
            Expr::Cmp { lhs, rhs, .. } => {
                let lt = self.ty(lhs)?;
                if lt == Ty::Bool {
                    return Err(self.mismatch("a comparison operand", "u32, i32 or f32", lt));
                }
                self.expect("the right side of a comparison", lt, rhs)?;
                Ty::Bool
            }
            Expr::Logic { lhs, rhs, .. } => {
                self.expect("a logical operand", Ty::Bool, lhs)?;
                self.expect("a logical operand", Ty::Bool, rhs)?;
                Ty::Bool
            }
            Expr::Not(e) => {
                self.expect("`not`", Ty::Bool, e)?;
                Ty::Bool
            }
            Expr::Neg(e) => {
                let t = self.ty(e)?;
                if !matches!(t, Ty::Elem(e) if e == ElemType::I32 || e.is_float()) {
                    return Err(self.mismatch("negation", "i32 or a float", t));
                }
                t
            }
            Expr::Unary { op, value } => {
                let t = self.ty(value)?;
                match (op, t) {
                    (_, Ty::Bool) => {
                        return Err(self.mismatch(op.name(), "u32, i32 or f32", t));
                    }
                    (UnaryOp::Abs, _) => t,
                    _ => self.float_only(op.name(), t)?,
                }
            }
            Expr::Fma { a, b, c } => {
                let t = self.float_only("fma", self.ty(a)?)?;
                self.expect("fma's second operand", t, b)?;
                self.expect("fma's third operand", t, c)?;
                t
            }
            Expr::Select {
                cond,
                if_true,
                if_false,
            } => {
                self.expect("a select condition", Ty::Bool, cond)?;
                let t = self.ty(if_true)?;
                if t == Ty::Bool {
                    return Err(self.mismatch("a select value", "u32, i32 or f32", t));
                }
                self.expect("the false branch of a select", t, if_false)?;
                t
            }
            Expr::Cast { to, value } => {
                let t = self.ty(value)?;
                if t == Ty::Bool {
                    return Err(self.mismatch("a cast", "u32, i32 or f32", t));
                }
                Ty::Elem(*to)
            }
            Expr::Bits { op, value } => {
                let t = self.ty(value)?;
                if !matches!(t, Ty::Elem(ElemType::U32 | ElemType::I32)) {
                    return Err(self.mismatch(op.name(), "u32 or i32", t));
                }
                t
            }
            Expr::Bitcast { to, value } => {
                let t = self.ty(value)?;
                if !matches!(t, Ty::Elem(e) if e.size_bytes() == to.size_bytes()) {
                    let expected = if to.is_half() {
                        "f16 or bf16"
                    } else {
                        "u32, i32 or f32"
                    };
                    return Err(self.mismatch("a bitcast", expected, t));
                }
                Ty::Elem(*to)
            }
        })
    }

    /// The declared type of parameter `p`.
    fn param(&self, p: u32) -> Result<ElemType, KernelError> {
        self.def
            .params
            .get(p as usize)
            .copied()
            .ok_or_else(|| KernelError::UnknownParam {
                kernel: self.kernel(),
                param: p,
                declared: self.def.params.len(),
            })
    }

    /// Both operands of `op` are of one element type, an integer one for the bitwise
    /// operators and shifts, a float one for `pow`; the result is of that type.
    fn binary(&self, op: BinOp, lhs: &Expr, rhs: &Expr) -> Result<Ty, KernelError> {
        let lt = self.ty(lhs)?;
        let Ty::Elem(elem) = lt else {
            return Err(self.mismatch("an arithmetic operand", "u32, i32 or f32", lt));
        };
        self.expect("the right operand", lt, rhs)?;
        let integer_only = matches!(
            op,
            BinOp::BitAnd | BinOp::BitOr | BinOp::BitXor | BinOp::Shl | BinOp::Shr
        );
        if integer_only && elem.is_float() {
            return Err(KernelError::IntegerOnly {
                kernel: self.kernel(),
                op,
                found: lt,
            });
        }
        if op == BinOp::Pow {
            self.float_only("pow", lt)?;
        }
        if op == BinOp::Atan2 {
            self.float_only("atan2", lt)?;
        }
        Ok(lt)
    }

    /// Checks `body`, nested in `loops` loops.
    fn block(&self, body: &[Stmt], loops: u32) -> Result<(), KernelError> {
        body.iter().try_for_each(|s| self.stmt(s, loops))
    }

    fn stmt(&self, stmt: &Stmt, loops: u32) -> Result<(), KernelError> {
        const U32: Ty = Ty::Elem(ElemType::U32);
        match stmt {
            Stmt::Assign { var, value } => {
                let elem = self.var(*var)?;
                self.expect("an assignment", Ty::Elem(elem), value)
            }
            Stmt::Store {
                array,
                index,
                value,
            } => {
                let elem = self.writable(*array, "store")?;
                self.expect("a store index", U32, index)?;
                self.expect("a stored value", Ty::Elem(elem), value)
            }
            Stmt::Atomic {
                op,
                array,
                index,
                value,
                old,
            } => {
                let elem = self.atomic_target(*array, op.name())?;
                self.expect("an atomic index", U32, index)?;
                self.expect("an atomic operand", Ty::Elem(elem), value)?;
                old.map_or(Ok(()), |v| self.receives(v, elem))
            }
            Stmt::CompareExchange {
                array,
                index,
                expected,
                value,
                old,
            } => {
                let elem = self.atomic_target(*array, "compare_exchange")?;
                self.expect("an atomic index", U32, index)?;
                self.expect("a compared value", Ty::Elem(elem), expected)?;
                self.expect("an atomic operand", Ty::Elem(elem), value)?;
                self.receives(*old, elem)
            }
            Stmt::If {
                cond,
                then_body,
                else_body,
            } => {
                self.expect("an if condition", Ty::Bool, cond)?;
                self.block(then_body, loops)?;
                self.block(else_body, loops)
            }
            Stmt::For {
                var,
                start,
                end,
                body,
            } => {
                let elem = self.var(*var)?;
                if elem.is_float() {
                    return Err(self.mismatch("a loop variable", "u32 or i32", Ty::Elem(elem)));
                }
                self.expect("a loop start", Ty::Elem(elem), start)?;
                self.expect("a loop end", Ty::Elem(elem), end)?;
                self.block(body, loops + 1)
            }
            Stmt::While { cond, body } => {
                self.expect("a while condition", Ty::Bool, cond)?;
                self.block(body, loops + 1)
            }
            Stmt::Break | Stmt::Continue if loops == 0 => Err(KernelError::OutsideLoop {
                kernel: self.kernel(),
                statement: if matches!(stmt, Stmt::Break) {
                    "break"
                } else {
                    "continue"
                },
            }),
            Stmt::Break | Stmt::Continue | Stmt::Barrier | Stmt::Return => Ok(()),
        }
    }

    /// An atomic's previous value, of type `elem`, goes to `var`.
    fn receives(&self, var: VarId, elem: ElemType) -> Result<(), KernelError> {
        let found = self.var(var)?;
        if found == elem {
            Ok(())
        } else {
            Err(self.mismatch(
                "the variable receiving an atomic's old value",
                &elem.to_string(),
                Ty::Elem(found),
            ))
        }
    }
}
