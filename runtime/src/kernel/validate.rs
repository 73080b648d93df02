//! Type checking of [`KernelDef`]s. Devices may assume every kernel they compile passed it.

use thiserror::Error;

use super::ir::{Access, BinOp, BindingId, ElemType, Expr, KernelDef, Stmt, Ty, VarId};

/// Why a kernel definition is invalid. Messages name the kernel and the offending part.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum KernelError {
    #[error("kernel `{kernel}`: {context} expects {expected}, found {found}")]
    TypeMismatch {
        kernel: String,
        context: String,
        expected: String,
        found: Ty,
    },
    #[error("kernel `{kernel}`: binding {binding} is not declared ({declared} bindings)")]
    UnknownBinding {
        kernel: String,
        binding: u32,
        declared: usize,
    },
    #[error("kernel `{kernel}`: parameter {param} is not declared ({declared} parameters)")]
    UnknownParam {
        kernel: String,
        param: u32,
        declared: usize,
    },
    #[error("kernel `{kernel}`: local variable {var} is not declared ({declared} locals)")]
    UnknownVar {
        kernel: String,
        var: u32,
        declared: usize,
    },
    #[error("kernel `{kernel}`: {operation} to binding {binding}, which is declared read-only")]
    WriteToReadOnly {
        kernel: String,
        operation: &'static str,
        binding: u32,
    },
    #[error(
        "kernel `{kernel}`: atomic add on binding {binding} of type {elem}; atomics need u32 or i32"
    )]
    AtomicOnFloat {
        kernel: String,
        binding: u32,
        elem: ElemType,
    },
    #[error("kernel `{kernel}`: {op:?} is defined on integers only, found {found}")]
    IntegerOnly {
        kernel: String,
        op: BinOp,
        found: Ty,
    },
    #[error(
        "kernel `{kernel}`: workgroup size {size:?} must have every dimension >= 1 and at most 1024 invocations"
    )]
    InvalidWorkgroupSize { kernel: String, size: [u32; 3] },
}

/// Largest number of invocations per workgroup that every device accepts.
pub const MAX_WORKGROUP_INVOCATIONS: u64 = 1024;

/// Checks types, references and access modes of a whole kernel.
pub fn validate(def: &KernelDef) -> Result<(), KernelError> {
    let checker = Checker { def };
    if def.workgroup_size.contains(&0) || def.workgroup_invocations() > MAX_WORKGROUP_INVOCATIONS {
        return Err(KernelError::InvalidWorkgroupSize {
            kernel: def.name.clone(),
            size: def.workgroup_size,
        });
    }
    checker.block(&def.body)
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

    fn writable(&self, id: BindingId, operation: &'static str) -> Result<ElemType, KernelError> {
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
            Expr::Param(p) => Ty::Elem(*self.def.params.get(*p as usize).ok_or_else(|| {
                KernelError::UnknownParam {
                    kernel: self.kernel(),
                    param: *p,
                    declared: self.def.params.len(),
                }
            })?),
            Expr::Var(v) => Ty::Elem(self.var(*v)?),
            Expr::Load { binding, index } => {
                let elem = self.binding(*binding)?.elem;
                self.expect("a load index", U32, index)?;
                Ty::Elem(elem)
            }
            Expr::Binary { op, lhs, rhs } => {
                let lt = self.ty(lhs)?;
                let Ty::Elem(elem) = lt else {
                    return Err(self.mismatch("an arithmetic operand", "u32, i32 or f32", lt));
                };
                self.expect("the right operand", lt, rhs)?;
                let integer_only = matches!(
                    op,
                    BinOp::BitAnd | BinOp::BitOr | BinOp::BitXor | BinOp::Shl | BinOp::Shr
                );
                if integer_only && elem == ElemType::F32 {
                    return Err(KernelError::IntegerOnly {
                        kernel: self.kernel(),
                        op: *op,
                        found: lt,
                    });
                }
                lt
            }
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
                if !matches!(t, Ty::Elem(ElemType::I32 | ElemType::F32)) {
                    return Err(self.mismatch("negation", "i32 or f32", t));
                }
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
        })
    }

    fn block(&self, body: &[Stmt]) -> Result<(), KernelError> {
        body.iter().try_for_each(|s| self.stmt(s))
    }

    fn stmt(&self, stmt: &Stmt) -> Result<(), KernelError> {
        const U32: Ty = Ty::Elem(ElemType::U32);
        match stmt {
            Stmt::Assign { var, value } => {
                let elem = self.var(*var)?;
                self.expect("an assignment", Ty::Elem(elem), value)
            }
            Stmt::Store {
                binding,
                index,
                value,
            } => {
                let elem = self.writable(*binding, "store")?;
                self.expect("a store index", U32, index)?;
                self.expect("a stored value", Ty::Elem(elem), value)
            }
            Stmt::AtomicAdd {
                binding,
                index,
                value,
            } => {
                let elem = self.writable(*binding, "atomic add")?;
                if elem == ElemType::F32 {
                    return Err(KernelError::AtomicOnFloat {
                        kernel: self.kernel(),
                        binding: binding.0,
                        elem,
                    });
                }
                self.expect("an atomic index", U32, index)?;
                self.expect("an atomic operand", Ty::Elem(elem), value)
            }
            Stmt::If {
                cond,
                then_body,
                else_body,
            } => {
                self.expect("an if condition", Ty::Bool, cond)?;
                self.block(then_body)?;
                self.block(else_body)
            }
            Stmt::For {
                var,
                start,
                end,
                body,
            } => {
                let elem = self.var(*var)?;
                if elem == ElemType::F32 {
                    return Err(self.mismatch("a loop variable", "u32 or i32", Ty::Elem(elem)));
                }
                self.expect("a loop start", Ty::Elem(elem), start)?;
                self.expect("a loop end", Ty::Elem(elem), end)?;
                self.block(body)
            }
        }
    }
}
