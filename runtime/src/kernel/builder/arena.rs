//! The expression nodes of every [`KernelBuilder`](super::KernelBuilder) open on this thread,
//! one arena per builder, and their resolution into [`Expr`] trees.
//!
//! A [`Value`] names a node by its builder's id and its index in that builder's arena. The
//! arenas live in a thread-local list rather than in the builders, so that an operator
//! (`a * b`) can record its node without a `&mut` to the builder: it finds the arena by the id
//! its operands carry. A builder registers its arena when created and removes it when built or
//! dropped ([`Registration`]); ids are never reused, so a value outliving its builder is told
//! apart from a value of a builder opened later.

use std::cell::RefCell;
use std::marker::PhantomData;
use std::num::NonZeroU64;
use std::sync::atomic::{AtomicU64, Ordering};

use thiserror::Error;

use super::value::{Repr, Value};
use crate::kernel::ir::{
    Array, BinOp, BindingId, BitFn, CmpOp, ElemType, Expr, LogicOp, UnaryOp, VarId,
};

/// Identifies one builder for the life of the process. Nominally `pub` (in a private module,
/// so unnameable outside it) because the sealed [`KernelArray`](super::KernelArray) trait's
/// method returns it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BuilderId(NonZeroU64);

impl BuilderId {
    fn fresh() -> Self {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        let id = NEXT.fetch_add(1, Ordering::Relaxed);
        Self(NonZeroU64::new(id).expect("the counter starts at 1 and 2^64 builders never happen"))
    }
}

/// One expression node: an [`Expr`] whose operands are values of the same arena (or
/// literals). Leaves that are the same in every kernel (literals, builtins) live in the
/// [`Value`] itself.
#[derive(Clone, Copy, Debug)]
pub(super) enum Node {
    Param(u32),
    Var(VarId),
    Len(BindingId),
    Load(Array, Value),
    Binary(BinOp, Value, Value),
    Cmp(CmpOp, Value, Value),
    Logic(LogicOp, Value, Value),
    Not(Value),
    Neg(Value),
    Unary(UnaryOp, Value),
    Fma(Value, Value, Value),
    Select(Value, Value, Value),
    Cast(ElemType, Value),
    Bitcast(ElemType, Value),
    Bits(BitFn, Value),
}

/// Where a value that a kernel may not use came from; see
/// [`KernelError::ForeignValue`](crate::kernel::KernelError::ForeignValue).
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum ForeignOrigin {
    /// Made by the builder of another kernel, still open on this thread.
    #[error("of kernel `{0}`'s builder")]
    OtherBuilder(String),
    /// Made by (or from a value of) a builder that was already built or dropped.
    #[error("of a builder already built or dropped")]
    ClosedBuilder,
    /// An operation on literals and builtins only, made while no builder was open on the
    /// thread (such an operation is recorded in the most recently created open builder).
    #[error("made from literals while no KernelBuilder was open")]
    NoBuilder,
}

/// The nodes one builder recorded.
struct Arena {
    owner: BuilderId,
    /// The kernel's name, to say whose value strayed into another kernel.
    name: String,
    nodes: Vec<Node>,
}

thread_local! {
    /// The arenas of the builders open on this thread, oldest first.
    static OPEN: RefCell<Vec<Arena>> = const { RefCell::new(Vec::new()) };
}

/// A builder's arena, registered while the builder lives; dropping it removes the arena.
///
/// Not `Send`: the arena is in this thread's list, so the builder must stay on this thread.
#[derive(Debug)]
pub(super) struct Registration {
    id: BuilderId,
    _thread: PhantomData<*const ()>,
}

impl Registration {
    /// Registers an empty arena for the builder of kernel `name`.
    pub(super) fn open(name: &str) -> Self {
        let id = BuilderId::fresh();
        OPEN.with_borrow_mut(|open| {
            open.push(Arena {
                owner: id,
                name: name.to_owned(),
                nodes: Vec::new(),
            })
        });
        Self {
            id,
            _thread: PhantomData,
        }
    }

    /// The builder's id, which its values, variables and arrays carry.
    pub(super) fn id(&self) -> BuilderId {
        self.id
    }

    /// `value` as a tree of this builder's kernel, or where it came from if it is not this
    /// builder's.
    pub(super) fn resolve(&self, value: Value) -> Result<Expr, ForeignOrigin> {
        OPEN.with_borrow(|open| {
            let Some(arena) = find(open, self.id) else {
                // Only when the thread's list is gone: the thread is exiting.
                return Err(ForeignOrigin::ClosedBuilder);
            };
            arena.expr(value).map_err(|stray| origin(open, stray))
        })
    }

    /// Why a variable or an array of builder `owner` may not be used here (`None`: it may).
    pub(super) fn foreign(&self, owner: BuilderId) -> Option<ForeignOrigin> {
        (owner != self.id).then(|| OPEN.with_borrow(|open| origin(open, Some(owner))))
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        // `try_with`: during thread exit the list may already be gone, and with it the arena.
        let _ = OPEN.try_with(|open| {
            let mut open = open.borrow_mut();
            if let Some(at) = open.iter().rposition(|a| a.owner == self.id) {
                open.remove(at);
            }
        });
    }
}

fn find(open: &[Arena], id: BuilderId) -> Option<&Arena> {
    open.iter().rev().find(|a| a.owner == id)
}

/// Where a value of builder `stray` (`None`: of no builder) came from.
fn origin(open: &[Arena], stray: Option<BuilderId>) -> ForeignOrigin {
    match stray {
        None => ForeignOrigin::NoBuilder,
        Some(id) => find(open, id).map_or(ForeignOrigin::ClosedBuilder, |a| {
            ForeignOrigin::OtherBuilder(a.name.clone())
        }),
    }
}

/// Records `node` in the arena of builder `home`, or, with no home (every operand a literal
/// or a builtin), in the most recently created open builder's. A home that is not open on
/// this thread gives a stray value, refused by any builder it reaches.
pub(super) fn record(node: Node, home: Option<BuilderId>) -> Value {
    OPEN.with_borrow_mut(|open| {
        let arena = match home {
            Some(id) => open.iter_mut().rev().find(|a| a.owner == id),
            None => open.last_mut(),
        };
        let Some(arena) = arena else {
            return Value::new(Repr::Stray(home));
        };
        let index = u32::try_from(arena.nodes.len())
            .expect("a kernel of more than 2^32 expression nodes cannot be lowered anyway");
        arena.nodes.push(node);
        Value::new(Repr::Node {
            owner: arena.owner,
            index,
        })
    })
}

impl Arena {
    /// `value` as a tree, or the builder of the first operand that is not this arena's.
    fn expr(&self, value: Value) -> Result<Expr, Option<BuilderId>> {
        match value.repr() {
            Repr::Lit(s) => Ok(Expr::Lit(s)),
            Repr::Bool(b) => Ok(Expr::Bool(b)),
            Repr::Builtin(b) => Ok(Expr::Builtin(b)),
            Repr::Node { owner, index } if owner == self.owner => {
                self.node(self.nodes[index as usize])
            }
            Repr::Node { owner, .. } => Err(Some(owner)),
            Repr::Stray(owner) => Err(owner),
        }
    }

    fn node(&self, node: Node) -> Result<Expr, Option<BuilderId>> {
        let tree = |v: Value| self.expr(v).map(Box::new);
        Ok(match node {
            Node::Param(p) => Expr::Param(p),
            Node::Var(v) => Expr::Var(v),
            Node::Len(b) => Expr::Len(b),
            Node::Load(array, index) => Expr::Load {
                array,
                index: tree(index)?,
            },
            Node::Binary(op, lhs, rhs) => Expr::Binary {
                op,
                lhs: tree(lhs)?,
                rhs: tree(rhs)?,
            },
            Node::Cmp(op, lhs, rhs) => Expr::Cmp {
                op,
                lhs: tree(lhs)?,
                rhs: tree(rhs)?,
            },
            Node::Logic(op, lhs, rhs) => Expr::Logic {
                op,
                lhs: tree(lhs)?,
                rhs: tree(rhs)?,
            },
            Node::Not(v) => Expr::Not(tree(v)?),
            Node::Neg(v) => Expr::Neg(tree(v)?),
            Node::Unary(op, value) => Expr::Unary {
                op,
                value: tree(value)?,
            },
            Node::Fma(a, b, c) => Expr::Fma {
                a: tree(a)?,
                b: tree(b)?,
                c: tree(c)?,
            },
            Node::Select(cond, if_true, if_false) => Expr::Select {
                cond: tree(cond)?,
                if_true: tree(if_true)?,
                if_false: tree(if_false)?,
            },
            Node::Cast(to, value) => Expr::Cast {
                to,
                value: tree(value)?,
            },
            Node::Bitcast(to, value) => Expr::Bitcast {
                to,
                value: tree(value)?,
            },
            Node::Bits(op, value) => Expr::Bits {
                op,
                value: tree(value)?,
            },
        })
    }
}
