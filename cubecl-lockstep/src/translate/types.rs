//! naga's value types as the translator holds them: lanes of one scalar type.

use lockstep::kernel::{ElemType, Expr, Scalar};
use naga::{Scalar as NagaScalar, ScalarKind, TypeInner};

use super::Translator;
use super::error::{Construct, Translation};

/// The scalar type of a value's lanes: a Lockstep element type, or a boolean, which Lockstep's
/// IR holds only as a condition (a boolean that outlives its expression lives in a `u32`
/// local, 1 for true).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScalarTy {
    /// A numeric element type.
    Elem(ElemType),
    /// A boolean.
    Bool,
}

impl ScalarTy {
    /// The element type of a local or array element holding a lane of this type.
    pub fn stored(self) -> ElemType {
        match self {
            ScalarTy::Elem(elem) => elem,
            ScalarTy::Bool => ElemType::U32,
        }
    }

    /// The numeric element type; `None` for a boolean.
    pub fn elem(self) -> Option<ElemType> {
        match self {
            ScalarTy::Elem(elem) => Some(elem),
            ScalarTy::Bool => None,
        }
    }
}

/// A translated value: one expression per lane (a scalar has one), all of type `ty`.
/// Invariant: boolean lanes are boolean expressions, numeric lanes numeric ones of `ty`.
#[derive(Clone, Debug, PartialEq)]
pub struct Value {
    /// The lanes' scalar type.
    pub ty: ScalarTy,
    /// The lanes, in order.
    pub lanes: Vec<Expr>,
}

impl Value {
    /// A one-lane value.
    pub fn scalar(ty: ScalarTy, lane: Expr) -> Self {
        Self {
            ty,
            lanes: vec![lane],
        }
    }

    /// The value's only lane, for operands WGSL requires to be scalars.
    pub fn single(self) -> Option<Expr> {
        let [lane] = <[Expr; 1]>::try_from(self.lanes).ok()?;
        Some(lane)
    }

    /// Lane `k`, repeating a scalar's one lane (WGSL's scalar-vector operators).
    pub fn lane(&self, k: usize) -> Expr {
        self.lanes[k.min(self.lanes.len() - 1)].clone()
    }
}

/// The zero of a scalar type, as an expression of that type.
pub fn zero(ty: ScalarTy) -> Expr {
    match ty {
        ScalarTy::Elem(elem) => Expr::Lit(Scalar::from_bits(elem, 0)),
        ScalarTy::Bool => Expr::Bool(false),
    }
}

impl Translator<'_> {
    /// The Lockstep scalar type of a naga scalar; 64-bit, 16-bit and abstract types are
    /// refused.
    pub(crate) fn scalar_ty(&self, scalar: NagaScalar) -> Translation<ScalarTy> {
        Ok(match (scalar.kind, scalar.width) {
            (ScalarKind::Uint, 4) => ScalarTy::Elem(ElemType::U32),
            (ScalarKind::Sint, 4) => ScalarTy::Elem(ElemType::I32),
            (ScalarKind::Float, 4) => ScalarTy::Elem(ElemType::F32),
            (ScalarKind::Bool, _) => ScalarTy::Bool,
            (kind, width) => {
                return Err(self.refuse(
                    Construct::Type(format!("{kind:?}{}", width * 8)),
                    "Lockstep's IR has 32-bit integers and floats (64-bit integers are a planned addition)",
                ));
            }
        })
    }

    /// The scalar type and lane count of a scalar or vector type; anything else is refused.
    pub(crate) fn value_ty(&self, inner: &TypeInner) -> Translation<(ScalarTy, usize)> {
        match *inner {
            TypeInner::Scalar(s) => Ok((self.scalar_ty(s)?, 1)),
            TypeInner::Vector { size, scalar } => Ok((self.scalar_ty(scalar)?, size as usize)),
            ref other => Err(self.refuse(
                Construct::Type(type_name(other)),
                "only scalars and vectors are values",
            )),
        }
    }
}

/// A short name of a naga type, for refusals.
pub fn type_name(inner: &TypeInner) -> String {
    match inner {
        TypeInner::Array { .. } => "array".to_owned(),
        TypeInner::Struct { .. } => "struct".to_owned(),
        TypeInner::Atomic(s) => format!("atomic<{:?}{}>", s.kind, s.width * 8),
        TypeInner::Matrix { .. } => "matrix".to_owned(),
        TypeInner::Pointer { .. } | TypeInner::ValuePointer { .. } => "pointer".to_owned(),
        other => format!("{other:?}")
            .split([' ', '(', '{'])
            .next()
            .unwrap_or("?")
            .to_owned(),
    }
}
