//! Statements: naga's control flow and side effects as Lockstep statements.
//!
//! - `loop { body; continuing { c }; break if e }` is `while true { body; c; if e { break } }`,
//!   each `continue` of the body running `c` and the `break if` first.
//! - `switch` is a chain of `if`s on the selector; a case may end with `break` (dropped), a
//!   `break` elsewhere in a case is refused.
//! - `workgroupUniformLoad(p)` is a barrier, the load, a barrier (naga's definition).
//! - `atomicSub(p, v)` is an atomic add of `0 - v` (the same bits for `u32` and `i32`);
//!   `atomicCompareExchangeWeak` is the IR's strong compare-exchange.
//! - A `return` with nothing after it in the kernel is dropped; any other is the IR's `Return`.
//!   (A barrier after a `return` that only some invocations take is a uniformity error in
//!   WGSL, which naga does not check; the IR gives it the meaning CUDA does: an invocation that
//!   returned counts as arrived.)

use lockstep::kernel::{AtomicOp, BinOp, CmpOp, ElemType, Expr, LogicOp, Stmt};
use naga::{AtomicFunction, Barrier, Block, Expression, Handle, Statement, SwitchValue};

use super::Translator;
use super::bindings::ArrayOf;
use super::error::{Construct, Translation};
use super::ops;
use super::place::Place;
use super::types::{ScalarTy, Value};

/// Where a block sits, for the statements that leave it.
#[derive(Clone, Copy)]
pub(crate) struct Context<'a> {
    /// The innermost loop's continuing block and `break if`, when inside a loop.
    continuing: Option<(&'a Block, Option<Handle<Expression>>)>,
    /// Whether nothing runs after this block in the kernel (a `return` here ends nothing early).
    tail: bool,
    /// Whether the block is inside a `switch` case (where `break` leaves the `switch`).
    in_case: bool,
    /// Whether the block is a `switch` case's own body, whose last `break` is dropped.
    case_body: bool,
}

impl<'a> Translator<'a> {
    /// The entry point's body.
    pub(crate) fn top_block(&mut self, block: &'a Block, out: &mut Vec<Stmt>) -> Translation<()> {
        self.block(block, out, OUTSIDE_LOOPS)
    }

    fn block(&mut self, block: &'a Block, out: &mut Vec<Stmt>, cx: Context<'a>) -> Translation<()> {
        let count = block.len();
        for (i, statement) in block.iter().enumerate() {
            let last = i + 1 == count;
            if cx.case_body && last && matches!(statement, Statement::Break) {
                continue;
            }
            let cx = Context {
                tail: cx.tail && last,
                case_body: false,
                ..cx
            };
            self.statement(statement, out, cx)?;
        }
        Ok(())
    }

    fn statement(
        &mut self,
        statement: &'a Statement,
        out: &mut Vec<Stmt>,
        cx: Context<'a>,
    ) -> Translation<()> {
        match *statement {
            Statement::Emit(ref range) => self.emit(range.clone(), out),
            Statement::Block(ref block) => self.block(block, out, cx),
            Statement::If {
                condition,
                ref accept,
                ref reject,
            } => {
                let cond = self.condition(condition)?;
                let (mut then_body, mut else_body) = (Vec::new(), Vec::new());
                self.block(accept, &mut then_body, cx)?;
                self.block(reject, &mut else_body, cx)?;
                out.push(Stmt::If {
                    cond,
                    then_body,
                    else_body,
                });
                Ok(())
            }
            Statement::Store { pointer, value } => {
                let place = self.place(pointer)?;
                let value = self.value(value)?;
                out.extend(self.store(&place, &value)?);
                Ok(())
            }
            Statement::Return { value: None } if cx.tail => Ok(()),
            Statement::Loop {
                ref body,
                ref continuing,
                break_if,
            } => self.looped(body, continuing, break_if, out),
            Statement::Break if cx.continuing.is_some() && !cx.in_case => {
                out.push(Stmt::Break);
                Ok(())
            }
            Statement::Continue => self.continued(out, cx),
            Statement::Switch {
                selector,
                ref cases,
            } => self.switch(selector, cases, out, cx),
            Statement::ControlBarrier(barrier)
                if barrier.intersects(Barrier::WORK_GROUP | Barrier::STORAGE) =>
            {
                out.push(Stmt::Barrier);
                Ok(())
            }
            Statement::WorkGroupUniformLoad { pointer, result } => {
                self.uniform_load(pointer, result, out)
            }
            Statement::Atomic {
                pointer,
                ref fun,
                value,
                result,
            } => self.atomic(pointer, fun, value, result, out),
            Statement::Return { value: None } => {
                out.push(Stmt::Return);
                Ok(())
            }
            Statement::Return { value: Some(_) } => Err(self.refuse(
                Construct::Statement("Return with a value".to_owned()),
                "an entry point returns nothing",
            )),
            ref other => Err(self.refuse(
                Construct::Statement(statement_name(other)),
                self.why_not(other, cx),
            )),
        }
    }

    fn why_not(&self, statement: &Statement, cx: Context) -> &'static str {
        match statement {
            Statement::Break if cx.in_case => "a break before the end of a switch case",
            _ => "Lockstep's IR has no counterpart",
        }
    }

    /// `workgroupUniformLoad(p)`: a barrier, the load, a barrier. Between two barriers every
    /// invocation of the workgroup only loads, so even an atomic element is loaded plainly
    /// (no access can race it), and the result is uniform, as WGSL says, for Lockstep's
    /// barrier check too.
    fn uniform_load(
        &mut self,
        pointer: Handle<Expression>,
        result: Handle<Expression>,
        out: &mut Vec<Stmt>,
    ) -> Translation<()> {
        let place = match self.place(pointer)? {
            Place::Element { of, first } => Place::Element {
                of: ArrayOf {
                    atomic: false,
                    ..of
                },
                first,
            },
            other => other,
        };
        let value = self.load(&place)?.ok_or_else(|| {
            self.refuse(
                Construct::Statement("WorkGroupUniformLoad".to_owned()),
                "of an atomic lane",
            )
        })?;
        out.push(Stmt::Barrier);
        self.assign_slots(result, value, out);
        out.push(Stmt::Barrier);
        Ok(())
    }

    /// A boolean condition.
    fn condition(&mut self, h: Handle<Expression>) -> Translation<Expr> {
        let value = self.value(h)?;
        match (value.ty, value.single()) {
            (ScalarTy::Bool, Some(cond)) => Ok(cond),
            _ => Err(self.refuse(
                Construct::Expression("condition".to_owned()),
                "a condition is a boolean scalar",
            )),
        }
    }

    fn looped(
        &mut self,
        body: &'a Block,
        continuing: &'a Block,
        break_if: Option<Handle<Expression>>,
        out: &mut Vec<Stmt>,
    ) -> Translation<()> {
        let inner = Context {
            continuing: Some((continuing, break_if)),
            ..OUTSIDE_LOOPS
        };
        let inner = Context {
            tail: false,
            ..inner
        };
        let mut looped = Vec::new();
        self.block(body, &mut looped, inner)?;
        self.iteration_end(&mut looped, inner)?;
        out.push(Stmt::While {
            cond: Expr::Bool(true),
            body: looped,
        });
        Ok(())
    }

    /// The continuing block and the `break if` test, run at the end of every iteration.
    fn iteration_end(&mut self, out: &mut Vec<Stmt>, cx: Context<'a>) -> Translation<()> {
        let Some((continuing, break_if)) = cx.continuing else {
            return Ok(());
        };
        self.block(
            continuing,
            out,
            Context {
                tail: false,
                ..OUTSIDE_LOOPS
            },
        )?;
        if let Some(test) = break_if {
            let cond = self.condition(test)?;
            out.push(Stmt::If {
                cond,
                then_body: vec![Stmt::Break],
                else_body: Vec::new(),
            });
        }
        Ok(())
    }

    fn continued(&mut self, out: &mut Vec<Stmt>, cx: Context<'a>) -> Translation<()> {
        if cx.continuing.is_none() {
            return Err(self.refuse(
                Construct::Statement("Continue".to_owned()),
                "outside a loop",
            ));
        }
        self.iteration_end(out, cx)?;
        out.push(Stmt::Continue);
        Ok(())
    }

    /// `switch` as `if selector == a || selector == b { .. } else if .. else { default }`.
    fn switch(
        &mut self,
        selector: Handle<Expression>,
        cases: &'a [naga::SwitchCase],
        out: &mut Vec<Stmt>,
        cx: Context<'a>,
    ) -> Translation<()> {
        let selector = self.value(selector)?;
        let selector_ty = selector.ty;
        let selector = selector.lane(0);
        let case_cx = Context {
            in_case: true,
            case_body: true,
            ..cx
        };
        let mut arms: Vec<(Option<Expr>, Vec<Stmt>)> = Vec::new();
        let mut pending: Vec<Expr> = Vec::new();
        let (mut default, mut default_pending) = (Vec::new(), false);
        for case in cases {
            default_pending |= matches!(case.value, SwitchValue::Default);
            if let Some(value) = case_value(case.value, selector_ty) {
                pending.push(Expr::Cmp {
                    op: CmpOp::Eq,
                    lhs: Box::new(selector.clone()),
                    rhs: Box::new(value),
                });
            }
            if case.fall_through && case.body.is_empty() {
                continue;
            }
            if case.fall_through {
                return Err(self.refuse(
                    Construct::Statement("Switch".to_owned()),
                    "a case falling through into another",
                ));
            }
            let mut body = Vec::new();
            self.block(&case.body, &mut body, case_cx)?;
            let test = pending.drain(..).reduce(|a, b| Expr::Logic {
                op: LogicOp::Or,
                lhs: Box::new(a),
                rhs: Box::new(b),
            });
            if std::mem::take(&mut default_pending) {
                default = body.clone();
            }
            if test.is_some() {
                arms.push((test, body));
            }
        }
        let chain =
            arms.into_iter()
                .rev()
                .fold(default, |else_body, (test, then_body)| match test {
                    Some(cond) => vec![Stmt::If {
                        cond,
                        then_body,
                        else_body,
                    }],
                    None => else_body,
                });
        out.extend(chain);
        Ok(())
    }

    fn atomic(
        &mut self,
        pointer: Handle<Expression>,
        fun: &AtomicFunction,
        value: Handle<Expression>,
        result: Option<Handle<Expression>>,
        out: &mut Vec<Stmt>,
    ) -> Translation<()> {
        let Place::Element { of, first } = self.place(pointer)? else {
            return Err(self.refuse(
                Construct::Statement("Atomic".to_owned()),
                "on something other than an array element",
            ));
        };
        let operand = self.value(value)?.lane(0);
        let (op, operand) = match *fun {
            AtomicFunction::Add => (AtomicOp::Add, operand),
            AtomicFunction::Subtract => (AtomicOp::Add, negated(of.ty, operand)),
            AtomicFunction::Min => (AtomicOp::Min, operand),
            AtomicFunction::Max => (AtomicOp::Max, operand),
            AtomicFunction::And => (AtomicOp::And, operand),
            AtomicFunction::InclusiveOr => (AtomicOp::Or, operand),
            AtomicFunction::ExclusiveOr => (AtomicOp::Xor, operand),
            AtomicFunction::Exchange { compare: None } => (AtomicOp::Exchange, operand),
            AtomicFunction::Exchange {
                compare: Some(expected),
            } => {
                let expected = self.value(expected)?.lane(0);
                return self.compare_exchange(of, first, expected, operand, result, out);
            }
        };
        let old = result.map(|r| {
            let vars = self.slots_of(r, &Value::scalar(of.ty, operand.clone()));
            self.record(r, of.ty, &vars);
            vars[0]
        });
        out.push(Stmt::Atomic {
            op,
            array: of.array,
            index: first,
            value: operand,
            old,
        });
        Ok(())
    }
}

impl Translator<'_> {
    /// `atomicCompareExchangeWeak(p, expected, value)` as the IR's strong compare-exchange
    /// (a weak one may fail spuriously; never failing is one of its behaviours). Its result
    /// struct is recorded member by member: `old_value`, and `exchanged` as `old ==
    /// expected`, computed into a local right after the exchange.
    fn compare_exchange(
        &mut self,
        of: ArrayOf,
        index: Expr,
        expected: Expr,
        value: Expr,
        result: Option<Handle<Expression>>,
        out: &mut Vec<Stmt>,
    ) -> Translation<()> {
        // The same two locals at every translation of this statement (see `slots_of`).
        let slots = match result.and_then(|r| self.slots.get(&r)) {
            Some(slots) => slots.clone(),
            None => vec![
                self.fresh_local(of.ty.stored()),
                self.fresh_local(ElemType::U32),
            ],
        };
        let (old, exchanged) = (slots[0], slots[1]);
        out.push(Stmt::CompareExchange {
            array: of.array,
            index,
            expected: expected.clone(),
            value,
            old,
        });
        let swapped = Expr::Cmp {
            op: CmpOp::Eq,
            lhs: Box::new(Expr::Var(old)),
            rhs: Box::new(expected),
        };
        out.push(Stmt::Assign {
            var: exchanged,
            value: ops::to_stored(ScalarTy::Bool, swapped),
        });
        if let Some(r) = result {
            self.slots.insert(r, slots);
            let members = vec![
                Value::scalar(of.ty, Translator::read_local(of.ty, old)),
                Value::scalar(
                    ScalarTy::Bool,
                    Translator::read_local(ScalarTy::Bool, exchanged),
                ),
            ];
            self.members.insert(r, members);
        }
        Ok(())
    }
}

/// The context of the kernel's body: no loop around it, nothing after it.
const OUTSIDE_LOOPS: Context<'static> = Context {
    continuing: None,
    tail: true,
    in_case: false,
    case_body: false,
};

/// `0 - v` in `ty`, wrapping: an atomic subtraction as an addition, bit for bit.
fn negated(ty: ScalarTy, value: Expr) -> Expr {
    let zero = super::types::zero(ty);
    Expr::Binary {
        op: BinOp::Sub,
        lhs: Box::new(zero),
        rhs: Box::new(value),
    }
}

/// A case's value, of the selector's type (naga may spell a `u32` selector's cases as `i32`).
fn case_value(value: SwitchValue, selector: ScalarTy) -> Option<Expr> {
    let bits = match value {
        SwitchValue::I32(v) => v as u32,
        SwitchValue::U32(v) => v,
        SwitchValue::Default => return None,
    };
    Some(Expr::Lit(lockstep::kernel::Scalar::from_bits(
        selector.stored(),
        bits,
    )))
}

/// naga's name of a statement's kind, for refusals.
fn statement_name(statement: &Statement) -> String {
    format!("{statement:?}")
        .split([' ', '(', '{'])
        .next()
        .unwrap_or("?")
        .to_owned()
}
