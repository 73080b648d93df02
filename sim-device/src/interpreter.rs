//! Executes kernel IR on the host, one invocation after another, with the semantics of
//! `lockstep::kernel::semantics` and the checked-mode rules of `lockstep::kernel::FaultRecord`.

use lockstep::kernel::{
    BindingId, Builtin, CompileOptions, ElemType, Expr, FaultRecord, KernelDef, LogicOp, Scalar,
    Stmt, semantics,
};

/// One binding's words, copied out of device memory for the launch.
#[derive(Debug)]
pub(crate) struct BindingData {
    pub words: Vec<u32>,
    /// Per word: whether it holds written data (loads of unwritten words are reported).
    pub initialized: Vec<bool>,
    /// Per word: whether this launch stored to it.
    pub dirty: Vec<bool>,
}

/// What went wrong while running a kernel.
#[derive(Debug, PartialEq)]
pub(crate) enum KernelTrap {
    /// Unchecked mode: an access outside its binding, which real hardware reports as an illegal
    /// address.
    OutOfBounds { binding: u32, index: u32 },
}

/// What a launch observed besides its effects on memory.
#[derive(Debug, Default)]
pub(crate) struct LaunchOutcome {
    /// Bindings that had unwritten words loaded, at most once each.
    pub uninitialized_loads: Vec<u32>,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Value {
    Scalar(Scalar),
    Bool(bool),
}

impl Value {
    fn scalar(self) -> Scalar {
        match self {
            Value::Scalar(s) => s,
            Value::Bool(_) => panic!("validated kernels use booleans only as conditions"),
        }
    }

    fn boolean(self) -> bool {
        match self {
            Value::Bool(b) => b,
            Value::Scalar(_) => panic!("validated kernels use only booleans as conditions"),
        }
    }

    fn index(self) -> u32 {
        match self.scalar() {
            Scalar::U32(i) => i,
            other => panic!("validated kernels index with u32, got {other:?}"),
        }
    }
}

struct Invocation<'a> {
    def: &'a KernelDef,
    options: CompileOptions,
    params: &'a [Scalar],
    bindings: &'a mut [BindingData],
    locals: Vec<Scalar>,
    local_id: [u32; 3],
    workgroup_id: [u32; 3],
    num_workgroups: [u32; 3],
    outcome: &'a mut LaunchOutcome,
}

/// Runs `def` over `count` workgroups. `bindings` hold the declared bindings, then (checked
/// mode) the fault record.
pub(crate) fn run(
    def: &KernelDef,
    options: CompileOptions,
    count: [u32; 3],
    bindings: &mut [BindingData],
    params: &[Scalar],
) -> Result<LaunchOutcome, KernelTrap> {
    let mut outcome = LaunchOutcome::default();
    let [wx, wy, wz] = def.workgroup_size;
    for gz in 0..count[2] {
        for gy in 0..count[1] {
            for gx in 0..count[0] {
                for lz in 0..wz {
                    for ly in 0..wy {
                        for lx in 0..wx {
                            let mut inv = Invocation {
                                def,
                                options,
                                params,
                                bindings,
                                locals: def.locals.iter().map(|&t| semantics::zero(t)).collect(),
                                local_id: [lx, ly, lz],
                                workgroup_id: [gx, gy, gz],
                                num_workgroups: count,
                                outcome: &mut outcome,
                            };
                            inv.block(&def.body)?;
                        }
                    }
                }
            }
        }
    }
    Ok(outcome)
}

impl Invocation<'_> {
    fn block(&mut self, body: &[Stmt]) -> Result<(), KernelTrap> {
        body.iter().try_for_each(|s| self.stmt(s))
    }

    fn stmt(&mut self, stmt: &Stmt) -> Result<(), KernelTrap> {
        match stmt {
            Stmt::Assign { var, value } => {
                let v = self.eval(value)?.scalar();
                self.locals[var.0 as usize] = v;
            }
            Stmt::Store {
                binding,
                index,
                value,
            } => {
                let index = self.eval(index)?.index();
                let value = self.eval(value)?.scalar();
                if self.in_bounds(*binding, index)? {
                    self.store_word(*binding, index, value.to_bits());
                }
            }
            Stmt::AtomicAdd {
                binding,
                index,
                value,
            } => {
                let index = self.eval(index)?.index();
                let value = self.eval(value)?.scalar();
                if self.in_bounds(*binding, index)? {
                    let elem = self.def.bindings[binding.0 as usize].elem;
                    let old = self.load_word(*binding, index, elem);
                    let sum = semantics::binary(lockstep::kernel::BinOp::Add, old, value);
                    self.store_word(*binding, index, sum.to_bits());
                }
            }
            Stmt::If {
                cond,
                then_body,
                else_body,
            } => {
                if self.eval(cond)?.boolean() {
                    self.block(then_body)?;
                } else {
                    self.block(else_body)?;
                }
            }
            Stmt::For {
                var,
                start,
                end,
                body,
            } => {
                let start = self.eval(start)?.scalar();
                let end = self.eval(end)?.scalar();
                let mut i = start;
                let one = match start {
                    Scalar::I32(_) => Scalar::I32(1),
                    _ => Scalar::U32(1),
                };
                while semantics::compare(lockstep::kernel::CmpOp::Lt, i, end) {
                    self.locals[var.0 as usize] = i;
                    self.block(body)?;
                    i = semantics::binary(lockstep::kernel::BinOp::Add, i, one);
                }
            }
        }
        Ok(())
    }

    fn eval(&mut self, expr: &Expr) -> Result<Value, KernelTrap> {
        Ok(match expr {
            Expr::Lit(s) => Value::Scalar(*s),
            Expr::Bool(b) => Value::Bool(*b),
            Expr::Builtin(b) => Value::Scalar(Scalar::U32(self.builtin(*b))),
            Expr::Param(p) => Value::Scalar(self.params[*p as usize]),
            Expr::Var(v) => Value::Scalar(self.locals[v.0 as usize]),
            Expr::Len(b) => Value::Scalar(Scalar::U32(self.len(*b))),
            Expr::Load { binding, index } => {
                let index = self.eval(index)?.index();
                let elem = self.def.bindings[binding.0 as usize].elem;
                if self.in_bounds(*binding, index)? {
                    Value::Scalar(self.load_word(*binding, index, elem))
                } else {
                    Value::Scalar(semantics::zero(elem))
                }
            }
            Expr::Binary { op, lhs, rhs } => {
                let l = self.eval(lhs)?.scalar();
                let r = self.eval(rhs)?.scalar();
                Value::Scalar(semantics::binary(*op, l, r))
            }
            Expr::Cmp { op, lhs, rhs } => {
                let l = self.eval(lhs)?.scalar();
                let r = self.eval(rhs)?.scalar();
                Value::Bool(semantics::compare(*op, l, r))
            }
            Expr::Logic { op, lhs, rhs } => {
                // Short-circuits, as WGSL's `&&`/`||` and C's do: a guarded load never runs.
                let l = self.eval(lhs)?.boolean();
                Value::Bool(match op {
                    LogicOp::And => l && self.eval(rhs)?.boolean(),
                    LogicOp::Or => l || self.eval(rhs)?.boolean(),
                })
            }
            Expr::Not(e) => Value::Bool(!self.eval(e)?.boolean()),
            Expr::Neg(e) => Value::Scalar(semantics::negate(self.eval(e)?.scalar())),
            Expr::Select {
                cond,
                if_true,
                if_false,
            } => {
                let c = self.eval(cond)?.boolean();
                let t = self.eval(if_true)?;
                let f = self.eval(if_false)?;
                if c { t } else { f }
            }
            Expr::Cast { to, value } => {
                Value::Scalar(semantics::cast(self.eval(value)?.scalar(), *to))
            }
        })
    }

    fn builtin(&self, b: Builtin) -> u32 {
        match b {
            Builtin::GlobalId(a) => {
                let i = a.index();
                self.workgroup_id[i]
                    .wrapping_mul(self.def.workgroup_size[i])
                    .wrapping_add(self.local_id[i])
            }
            Builtin::LocalId(a) => self.local_id[a.index()],
            Builtin::WorkgroupId(a) => self.workgroup_id[a.index()],
            Builtin::NumWorkgroups(a) => self.num_workgroups[a.index()],
        }
    }

    fn len(&self, binding: BindingId) -> u32 {
        self.bindings[binding.0 as usize].words.len() as u32
    }

    /// Whether `index` is inside `binding`. Out of range in checked mode records the first
    /// fault and skips the access; in unchecked mode it traps.
    fn in_bounds(&mut self, binding: BindingId, index: u32) -> Result<bool, KernelTrap> {
        if index < self.len(binding) {
            return Ok(true);
        }
        if !self.options.checked {
            return Err(KernelTrap::OutOfBounds {
                binding: binding.0,
                index,
            });
        }
        let record = self
            .bindings
            .last_mut()
            .expect("checked launches carry the fault record as their last binding");
        if record.words[FaultRecord::FLAG] == 0 {
            record.words[FaultRecord::FLAG] = 1;
            record.words[FaultRecord::KERNEL] = self.options.kernel_id;
            record.words[FaultRecord::BINDING] = binding.0;
            record.words[FaultRecord::INDEX] = index;
            for w in [
                FaultRecord::FLAG,
                FaultRecord::KERNEL,
                FaultRecord::BINDING,
                FaultRecord::INDEX,
            ] {
                record.dirty[w] = true;
                record.initialized[w] = true;
            }
        }
        Ok(false)
    }

    fn load_word(&mut self, binding: BindingId, index: u32, elem: ElemType) -> Scalar {
        let data = &self.bindings[binding.0 as usize];
        if !data.initialized[index as usize]
            && !self.outcome.uninitialized_loads.contains(&binding.0)
        {
            self.outcome.uninitialized_loads.push(binding.0);
        }
        Scalar::from_bits(elem, data.words[index as usize])
    }

    fn store_word(&mut self, binding: BindingId, index: u32, bits: u32) {
        let data = &mut self.bindings[binding.0 as usize];
        data.words[index as usize] = bits;
        data.initialized[index as usize] = true;
        data.dirty[index as usize] = true;
    }
}
