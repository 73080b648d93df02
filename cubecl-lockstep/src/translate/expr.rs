//! Expressions: naga expressions translated into values (one IR expression per lane).

use lockstep::kernel::{Axis, BinOp, Builtin, Expr, LogicOp, Scalar};
use naga::{BuiltIn, Expression, Handle, Literal, RelationalFunction, TypeInner};

use super::Translator;
use super::error::{Construct, Translation};
use super::math::math;
use super::ops::{self, Refusal};
use super::place::expression_name;
use super::types::{ScalarTy, Value, zero};

impl Translator<'_> {
    /// The value of `h`: its locals if it was materialized, else its translation.
    pub(crate) fn value(&mut self, h: Handle<Expression>) -> Translation<Value> {
        match self.materialized.get(&h) {
            Some(value) => Ok(value.clone()),
            None => self.compute(h),
        }
    }

    /// The type naga's analysis gives `h`.
    pub(crate) fn type_of(&self, h: Handle<Expression>) -> &TypeInner {
        self.info[h].ty.inner_with(&self.module.types)
    }

    /// `h` translated from its operands' values.
    pub(crate) fn compute(&mut self, h: Handle<Expression>) -> Translation<Value> {
        let expression = &self.function.expressions[h];
        match *expression {
            Expression::Literal(literal) => self.literal(literal),
            Expression::ZeroValue(_) => {
                let (ty, lanes) = self.value_ty(self.type_of(h))?;
                Ok(Value {
                    ty,
                    lanes: vec![zero(ty); lanes],
                })
            }
            Expression::Compose { ref components, .. } => self.compose(h, components),
            Expression::Splat { size, value } => {
                let value = self.value(value)?;
                Ok(Value {
                    ty: value.ty,
                    lanes: vec![value.lane(0); size as usize],
                })
            }
            Expression::Swizzle {
                size,
                vector,
                pattern,
            } => {
                let vector = self.value(vector)?;
                let lanes = pattern[..size as usize]
                    .iter()
                    .map(|&c| vector.lane(c as usize))
                    .collect();
                Ok(Value {
                    ty: vector.ty,
                    lanes,
                })
            }
            Expression::FunctionArgument(index) => self.argument(index),
            Expression::Load { pointer } => {
                let place = self.place(pointer)?;
                self.load(&place)?.ok_or_else(|| self.unmaterialized(h))
            }
            Expression::AccessIndex { base, index } => {
                if let Some(member) = self.members.get(&base).and_then(|m| m.get(index as usize)) {
                    return Ok(member.clone());
                }
                let base = self.lanes_of(base)?;
                Ok(Value::scalar(base.ty, base.lane(index as usize)))
            }
            Expression::Access { base, index } => self.dynamic_lane(base, index),
            Expression::Unary { op, expr } => {
                let value = self.value(expr)?;
                let lanes = value
                    .lanes
                    .iter()
                    .map(|l| ops::unary(op, value.ty, l.clone()));
                let lanes = lanes
                    .collect::<Result<Vec<_>, Refusal>>()
                    .map_err(|r| self.refused(r))?;
                Ok(Value {
                    ty: value.ty,
                    lanes,
                })
            }
            Expression::Binary { op, left, right } => self.binary(op, left, right),
            Expression::Select {
                condition,
                accept,
                reject,
            } => self.select(condition, accept, reject),
            Expression::Relational { fun, argument } => self.relational(fun, argument),
            Expression::Math {
                fun,
                arg,
                arg1,
                arg2,
                arg3,
            } => {
                let args = [Some(arg), arg1, arg2, arg3].into_iter().flatten();
                let args = args
                    .map(|a| self.value(a))
                    .collect::<Translation<Vec<_>>>()?;
                math(fun, &args).map_err(|r| self.refused(r))
            }
            Expression::As {
                expr,
                kind,
                convert,
            } => {
                let value = self.value(expr)?;
                let from = value.ty;
                let cast = value
                    .lanes
                    .into_iter()
                    .map(|lane| ops::cast(from, kind, convert, lane));
                let cast = cast
                    .collect::<Result<Vec<_>, Refusal>>()
                    .map_err(|r| self.refused(r))?;
                Ok(typed_lanes(from, cast))
            }
            Expression::AtomicResult { .. } | Expression::WorkGroupUniformLoadResult { .. } => {
                Err(self.unmaterialized(h))
            }
            ref other => Err(self.refuse(
                Construct::Expression(expression_name(other)),
                "Lockstep's IR has no counterpart",
            )),
        }
    }

    /// A refusal from the operator tables, for this kernel.
    pub(crate) fn refused(&self, (construct, detail): Refusal) -> super::Unsupported {
        self.refuse(construct, detail)
    }

    fn unmaterialized(&self, h: Handle<Expression>) -> super::Unsupported {
        self.refuse(
            Construct::Expression(expression_name(&self.function.expressions[h])),
            "a result read before the statement that produces it",
        )
    }

    fn literal(&self, literal: Literal) -> Translation<Value> {
        let (ty, lane) = match literal {
            Literal::U32(v) => (
                ScalarTy::Elem(lockstep::kernel::ElemType::U32),
                Expr::Lit(Scalar::U32(v)),
            ),
            Literal::I32(v) => (
                ScalarTy::Elem(lockstep::kernel::ElemType::I32),
                Expr::Lit(Scalar::I32(v)),
            ),
            Literal::F32(v) => (
                ScalarTy::Elem(lockstep::kernel::ElemType::F32),
                Expr::Lit(Scalar::F32(v)),
            ),
            Literal::Bool(v) => (ScalarTy::Bool, Expr::Bool(v)),
            other => {
                let name = format!("{other:?}")
                    .split('(')
                    .next()
                    .unwrap_or("?")
                    .to_owned();
                return Err(self.refuse(Construct::Type(name), "Lockstep's IR has 32-bit literals"));
            }
        };
        Ok(Value::scalar(ty, lane))
    }

    /// A vector built from scalars and vectors, their lanes in order.
    fn compose(
        &mut self,
        h: Handle<Expression>,
        components: &[Handle<Expression>],
    ) -> Translation<Value> {
        let (ty, _) = self.value_ty(self.type_of(h))?;
        let mut lanes = Vec::new();
        for &component in components {
            lanes.extend(self.value(component)?.lanes);
        }
        Ok(Value { ty, lanes })
    }

    /// The value of `h` as lanes: a vector value, never a pointer.
    fn lanes_of(&mut self, h: Handle<Expression>) -> Translation<Value> {
        if matches!(
            self.type_of(h),
            TypeInner::Pointer { .. } | TypeInner::ValuePointer { .. }
        ) {
            return Err(self.refuse(
                Construct::Expression("Access".to_owned()),
                "a pointer used as a value",
            ));
        }
        self.value(h)
    }

    /// `vector[index]` with a dynamic index (`ops::lane_chain`).
    fn dynamic_lane(
        &mut self,
        base: Handle<Expression>,
        index: Handle<Expression>,
    ) -> Translation<Value> {
        let base = self.lanes_of(base)?;
        let index = self.value(index)?;
        let ty = index.ty;
        let index = index.single().and_then(|i| ops::index_u32(ty, i));
        let index = index.ok_or_else(|| {
            self.refuse(
                Construct::Expression("Access".to_owned()),
                "an index is a scalar",
            )
        })?;
        Ok(Value::scalar(base.ty, ops::lane_chain(&base, &index)))
    }

    fn binary(
        &mut self,
        op: naga::BinaryOperator,
        left: Handle<Expression>,
        right: Handle<Expression>,
    ) -> Translation<Value> {
        let (left, right) = (self.value(left)?, self.value(right)?);
        let lanes = left.lanes.len().max(right.lanes.len());
        let lanes = (0..lanes).map(|k| ops::binary(op, left.ty, left.lane(k), right.lane(k)));
        let lanes = lanes
            .collect::<Result<Vec<_>, Refusal>>()
            .map_err(|r| self.refused(r))?;
        Ok(typed_lanes(left.ty, lanes))
    }

    fn select(
        &mut self,
        condition: Handle<Expression>,
        accept: Handle<Expression>,
        reject: Handle<Expression>,
    ) -> Translation<Value> {
        let (cond, accept, reject) = (
            self.value(condition)?,
            self.value(accept)?,
            self.value(reject)?,
        );
        let lanes = (0..accept.lanes.len())
            .map(|k| ops::select(accept.ty, cond.lane(k), accept.lane(k), reject.lane(k)))
            .collect();
        Ok(Value {
            ty: accept.ty,
            lanes,
        })
    }

    /// `all(v)` and `any(v)` of a boolean vector.
    fn relational(
        &mut self,
        fun: RelationalFunction,
        argument: Handle<Expression>,
    ) -> Translation<Value> {
        let op = match fun {
            RelationalFunction::All => LogicOp::And,
            RelationalFunction::Any => LogicOp::Or,
            other => {
                return Err(self.refuse(
                    Construct::Math(format!("{other:?}")),
                    "Lockstep's IR has no such test",
                ));
            }
        };
        let value = self.value(argument)?;
        let folded = value.lanes.into_iter().reduce(|acc, lane| Expr::Logic {
            op,
            lhs: Box::new(acc),
            rhs: Box::new(lane),
        });
        Ok(Value::scalar(
            ScalarTy::Bool,
            folded.unwrap_or(Expr::Bool(op == LogicOp::And)),
        ))
    }

    /// An entry-point argument: a builtin, as its lanes.
    fn argument(&self, index: u32) -> Translation<Value> {
        let argument = &self.function.arguments[index as usize];
        let Some(naga::Binding::BuiltIn(builtin)) = argument.binding else {
            return Err(self.refuse(
                Construct::Builtin(format!("{:?}", argument.binding)),
                "kernel inputs are builtins",
            ));
        };
        let u32 = ScalarTy::Elem(lockstep::kernel::ElemType::U32);
        let axes = |f: fn(Axis) -> Builtin| {
            [Axis::X, Axis::Y, Axis::Z]
                .map(|a| Expr::Builtin(f(a)))
                .to_vec()
        };
        let lanes = match builtin {
            BuiltIn::WorkGroupId => axes(Builtin::WorkgroupId),
            BuiltIn::NumWorkGroups => axes(Builtin::NumWorkgroups),
            BuiltIn::LocalInvocationId => axes(Builtin::LocalId),
            BuiltIn::GlobalInvocationId => axes(Builtin::GlobalId),
            BuiltIn::LocalInvocationIndex => vec![self.local_index()],
            other => {
                return Err(self.refuse(
                    Construct::Builtin(format!("{other:?}")),
                    "Lockstep's IR has no such builtin",
                ));
            }
        };
        Ok(Value { ty: u32, lanes })
    }

    /// `local_invocation_index`: `x + size_x * (y + size_y * z)` of the local id.
    fn local_index(&self) -> Expr {
        let [size_x, size_y, size_z] = self.workgroup_size;
        let id = |axis| Expr::Builtin(Builtin::LocalId(axis));
        let add = |lhs, rhs| Expr::Binary {
            op: BinOp::Add,
            lhs: Box::new(lhs),
            rhs: Box::new(rhs),
        };
        let mut index = id(Axis::X);
        if size_y > 1 || size_z > 1 {
            let yz = if size_z > 1 {
                add(id(Axis::Y), ops::u32_mul(id(Axis::Z), size_y))
            } else {
                id(Axis::Y)
            };
            index = add(index, ops::u32_mul(yz, size_x));
        }
        index
    }
}

/// A value from lanes that each carry their type (all the same); `fallback` types an empty one.
fn typed_lanes(fallback: ScalarTy, lanes: Vec<(ScalarTy, Expr)>) -> Value {
    let ty = lanes.first().map_or(fallback, |(ty, _)| *ty);
    Value {
        ty,
        lanes: lanes.into_iter().map(|(_, lane)| lane).collect(),
    }
}
