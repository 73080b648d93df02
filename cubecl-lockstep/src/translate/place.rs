//! Pointers: naga's pointer expressions resolved to places (elements of an array, local
//! lanes, info words), and the loads and stores on them.

use lockstep::kernel::{Array, AtomicOp, CmpOp, ElemType, Expr, Stmt, VarId};
use naga::{Expression, GlobalVariable, Handle, Statement};

use super::Translator;
use super::bindings::{ArrayOf, GlobalPlace};
use super::error::{Construct, Translation};
use super::ops;
use super::types::{ScalarTy, Value};

/// What a pointer expression points at.
#[derive(Clone, Debug)]
pub enum Place {
    /// A whole array, before it is indexed.
    Array(ArrayOf),
    /// One element of an array: its lanes are at indices `first`, `first + 1`, ...
    Element { of: ArrayOf, first: Expr },
    /// The info struct, before a member is chosen.
    Info,
    /// A member of the info struct (an array of words from `word`), before it is indexed.
    InfoMember { word: u32, ty: ScalarTy },
    /// A local variable's lanes (or one of them).
    Locals { vars: Vec<VarId>, ty: ScalarTy },
    /// The lane `index` (an expression) of a vector place: an element or locals.
    Lane { base: Box<Place>, index: Expr },
}

impl Place {
    /// Lanes of the value at this place (1 for an array, the info struct, a member).
    fn lanes(&self) -> usize {
        match self {
            Place::Element { of, .. } => of.lanes,
            Place::Locals { vars, .. } => vars.len(),
            _ => 1,
        }
    }

    /// Lane `k` of a vector place.
    fn lane(&self, k: u32) -> Option<Place> {
        match self {
            Place::Element { of, first } => Some(Place::Element {
                of: ArrayOf { lanes: 1, ..*of },
                first: ops::u32_add(first.clone(), k),
            }),
            Place::Locals { vars, ty } => Some(Place::Locals {
                vars: vec![*vars.get(k as usize)?],
                ty: *ty,
            }),
            _ => None,
        }
    }
}

impl Translator<'_> {
    /// The place `pointer` points at.
    pub(crate) fn place(&mut self, pointer: Handle<Expression>) -> Translation<Place> {
        match self.function.expressions[pointer] {
            Expression::GlobalVariable(global) => Ok(match &self.globals.places[&global] {
                GlobalPlace::Array(of) => Place::Array(*of),
                GlobalPlace::Single(of) => Place::Element {
                    of: *of,
                    first: 0u32.into(),
                },
                GlobalPlace::Info => Place::Info,
            }),
            Expression::LocalVariable(local) if self.local_arrays.contains_key(&local) => {
                Ok(Place::Array(self.local_arrays[&local]))
            }
            Expression::LocalVariable(local) => {
                let ty = self
                    .value_ty(&self.module.types[self.function.local_variables[local].ty].inner)?
                    .0;
                Ok(Place::Locals {
                    vars: self.locals[&local].clone(),
                    ty,
                })
            }
            Expression::AccessIndex { base, index } => {
                let base = self.place(base)?;
                self.index_place(base, Index::Constant(index))
            }
            Expression::Access { base, index } => {
                let base = self.place(base)?;
                let index = self.value(index)?;
                let ty = index.ty;
                let index = index.single().and_then(|i| ops::index_u32(ty, i));
                let index = index.ok_or_else(|| {
                    self.refuse(
                        Construct::Expression("Access".to_owned()),
                        "an index is a u32 or i32 scalar",
                    )
                })?;
                self.index_place(base, Index::Dynamic(index))
            }
            ref other => Err(self.refuse(
                Construct::Expression(expression_name(other)),
                "not a pointer the translator resolves",
            )),
        }
    }

    fn index_place(&self, base: Place, index: Index) -> Translation<Place> {
        match (base, index) {
            (Place::Array(of), index) => {
                let first = ops::u32_mul(index.expr(), of.lanes as u32);
                Ok(Place::Element { of, first })
            }
            (Place::Info, Index::Constant(member)) => {
                let &(word, ty) = &self.globals.info_members[member as usize];
                Ok(Place::InfoMember { word, ty })
            }
            (Place::InfoMember { word, ty }, index) => {
                // Read as the member's type from the view's words (`load` reinterprets them).
                let binding = self.info_view(ty);
                let of = ArrayOf {
                    array: Array::Binding(binding),
                    ty,
                    lanes: 1,
                    atomic: false,
                };
                Ok(Place::Element {
                    of,
                    first: ops::u32_add(index.expr(), word),
                })
            }
            (base, Index::Constant(k)) if base.lanes() > 1 => base.lane(k).ok_or_else(|| {
                self.refuse(
                    Construct::Expression("AccessIndex".to_owned()),
                    "past a vector's lanes",
                )
            }),
            (base @ (Place::Element { .. } | Place::Locals { .. }), Index::Dynamic(index))
                if base.lanes() > 1 =>
            {
                Ok(Place::Lane {
                    base: Box::new(base),
                    index,
                })
            }
            _ => Err(self.refuse(
                Construct::Expression("Access".to_owned()),
                "an index into a scalar, or into a lane",
            )),
        }
    }

    /// The binding the info words are read through as `ty`: `f32` members through the `f32`
    /// view, the others through the `u32` words.
    fn info_view(&self, ty: ScalarTy) -> lockstep::kernel::BindingId {
        match (ty, self.globals.info_floats) {
            (ScalarTy::Elem(ElemType::F32), Some(floats)) => floats,
            _ => self
                .globals
                .info_words
                .expect("an info member implies the info binding"),
        }
    }

    /// The value at `place`; `None` when reading it takes a statement (an atomic element).
    pub(crate) fn load(&self, place: &Place) -> Translation<Option<Value>> {
        match place {
            Place::Element { of, .. } if of.atomic => Ok(None),
            Place::Element { of, first } => {
                let stored = self.def.elem_of(of.array).unwrap_or(ElemType::U32);
                let lanes = (0..of.lanes)
                    .map(|k| {
                        let load = Expr::Load {
                            array: of.array,
                            index: Box::new(ops::u32_add(first.clone(), k as u32)),
                        };
                        ops::reinterpret_load(stored, of.ty, load)
                    })
                    .collect();
                Ok(Some(Value { ty: of.ty, lanes }))
            }
            Place::Locals { vars, ty } => Ok(Some(Value {
                ty: *ty,
                lanes: vars
                    .iter()
                    .map(|&v| Translator::read_local(*ty, v))
                    .collect(),
            })),
            Place::Lane { base, index } => Ok(self
                .load(base)?
                .map(|v| Value::scalar(v.ty, ops::lane_chain(&v, index)))),
            _ => Err(self.refuse(
                Construct::Expression("Load".to_owned()),
                "a load of a whole array or struct",
            )),
        }
    }

    /// Statements storing `value` at `place`; an atomic element is stored by an exchange, so
    /// the race checker sees every access to it as atomic.
    pub(crate) fn store(&self, place: &Place, value: &Value) -> Translation<Vec<Stmt>> {
        match place {
            Place::Element { of, first } => Ok((0..of.lanes)
                .map(|k| {
                    let index = ops::u32_add(first.clone(), k as u32);
                    let lane = ops::to_stored(of.ty, value.lane(k));
                    if of.atomic {
                        Stmt::Atomic {
                            op: AtomicOp::Exchange,
                            array: of.array,
                            index,
                            value: lane,
                            old: None,
                        }
                    } else {
                        Stmt::Store {
                            array: of.array,
                            index,
                            value: lane,
                        }
                    }
                })
                .collect()),
            Place::Locals { vars, .. } => Ok(assign(vars, value)),
            Place::Lane { base, index } => (0..base.lanes() as u32)
                .map(|k| {
                    let lane = base.lane(k).ok_or_else(|| {
                        self.refuse(Construct::Statement("Store".to_owned()), "to a lane")
                    })?;
                    let is_k = Expr::Cmp {
                        op: CmpOp::Eq,
                        lhs: Box::new(index.clone()),
                        rhs: Box::new(k.into()),
                    };
                    Ok(Stmt::If {
                        cond: is_k,
                        then_body: self.store(&lane, value)?,
                        else_body: Vec::new(),
                    })
                })
                .collect(),
            _ => Err(self.refuse(
                Construct::Statement("Store".to_owned()),
                "a store to a read-only or whole place",
            )),
        }
    }

    /// Every global some statement stores to or updates atomically.
    pub(crate) fn written_globals(&self) -> Vec<Handle<GlobalVariable>> {
        let mut written = Vec::new();
        let mut visit = |pointer| {
            if let Some(global) = self.root_global(pointer) {
                written.push(global);
            }
        };
        walk(&self.function.body, &mut |statement| match *statement {
            Statement::Store { pointer, .. } | Statement::Atomic { pointer, .. } => visit(pointer),
            _ => {}
        });
        written
    }

    /// The global a pointer expression is rooted at, if it is one.
    pub(crate) fn root_global(
        &self,
        mut pointer: Handle<Expression>,
    ) -> Option<Handle<GlobalVariable>> {
        loop {
            match self.function.expressions[pointer] {
                Expression::Access { base, .. } | Expression::AccessIndex { base, .. } => {
                    pointer = base
                }
                Expression::GlobalVariable(global) => return Some(global),
                _ => return None,
            }
        }
    }
}

/// Assignments of `value`'s lanes to local lanes `vars`.
pub fn assign(vars: &[VarId], value: &Value) -> Vec<Stmt> {
    vars.iter()
        .enumerate()
        .map(|(k, &var)| Stmt::Assign {
            var,
            value: ops::to_stored(value.ty, value.lane(k)),
        })
        .collect()
}

/// An index into a place: a constant (`AccessIndex`) or an expression (`Access`).
enum Index {
    Constant(u32),
    Dynamic(Expr),
}

impl Index {
    fn expr(&self) -> Expr {
        match self {
            Index::Constant(k) => (*k).into(),
            Index::Dynamic(e) => e.clone(),
        }
    }
}

/// Calls `f` on every statement of `block`, nested ones included.
pub fn walk(block: &naga::Block, f: &mut impl FnMut(&Statement)) {
    for statement in block.iter() {
        f(statement);
        match statement {
            Statement::Block(inner) => walk(inner, f),
            Statement::If { accept, reject, .. } => {
                walk(accept, f);
                walk(reject, f);
            }
            Statement::Loop {
                body, continuing, ..
            } => {
                walk(body, f);
                walk(continuing, f);
            }
            Statement::Switch { cases, .. } => cases.iter().for_each(|c| walk(&c.body, f)),
            _ => {}
        }
    }
}

/// naga's name of an expression's kind (`Load`, `Math`, ...), for refusals.
pub fn expression_name(expression: &Expression) -> String {
    format!("{expression:?}")
        .split([' ', '(', '{'])
        .next()
        .unwrap_or("?")
        .to_owned()
}
