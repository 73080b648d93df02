//! Random elementwise kernels for explored workloads: `dst[i] = f(dst[i], src[j], k)` with
//! `j = (i * stride + shift) % len(src)`, where `f` is a random expression over `u32`.
//!
//! The reference ([`Formula::apply`]) is plain wrapping Rust arithmetic, written independently
//! of the simulator's interpreter, so a kernel and its model can only agree by both being right.

use lockstep::Kernel;
use lockstep::kernel::{Access, Axis, BinOp, ElemType, Expr, KernelBuilder};
use rand::Rng;

use crate::kernels::WORKGROUP;

/// A leaf or an operation of the expression `f`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Term {
    Dst,
    Src,
    K,
    Lit(u32),
    Op(BinOp, Box<Term>, Box<Term>),
    /// `if a < b { c } else { d }`.
    SelectLt(Box<[Term; 4]>),
}

/// Operators drawn for `f`: those whose `u32` meaning is total and the same on every device.
const OPS: [BinOp; 9] = [
    BinOp::Add,
    BinOp::Sub,
    BinOp::Mul,
    BinOp::Min,
    BinOp::Max,
    BinOp::BitAnd,
    BinOp::BitOr,
    BinOp::BitXor,
    BinOp::Shr,
];

impl Term {
    fn draw(rng: &mut impl Rng, depth: u32) -> Term {
        if depth == 0 || rng.random_ratio(1, 3) {
            return match rng.random_range(0..4) {
                0 => Term::Dst,
                1 => Term::Src,
                2 => Term::K,
                _ => Term::Lit(rng.random_range(0..64)),
            };
        }
        if rng.random_ratio(1, 6) {
            let mut side = || Term::draw(rng, depth - 1);
            return Term::SelectLt(Box::new([side(), side(), side(), side()]));
        }
        let op = OPS[rng.random_range(0..OPS.len())];
        Term::Op(
            op,
            Box::new(Term::draw(rng, depth - 1)),
            Box::new(Term::draw(rng, depth - 1)),
        )
    }

    /// Calls `f` on this term and every term inside it.
    pub fn visit(&self, f: &mut impl FnMut(&Term)) {
        f(self);
        match self {
            Term::Op(_, a, b) => {
                a.visit(f);
                b.visit(f);
            }
            Term::SelectLt(t) => t.iter().for_each(|t| t.visit(f)),
            Term::Dst | Term::Src | Term::K | Term::Lit(_) => {}
        }
    }

    /// `f` at every element: `dst[i]` and the gathered `src[i]`, evaluated a node at a time over
    /// the whole buffer (per element, the tree walk cost more than the simulated kernel).
    fn eval(&self, dst: &[u32], src: &[u32], k: u32) -> Vec<u32> {
        let combine = |a: Vec<u32>, b: Vec<u32>, f: &dyn Fn(u32, u32) -> u32| {
            a.iter().zip(&b).map(|(&a, &b)| f(a, b)).collect()
        };
        match self {
            Term::Dst => dst.to_vec(),
            Term::Src => src.to_vec(),
            Term::K => vec![k; dst.len()],
            Term::Lit(v) => vec![*v; dst.len()],
            Term::Op(op, a, b) => {
                let (a, b) = (a.eval(dst, src, k), b.eval(dst, src, k));
                match op {
                    BinOp::Add => combine(a, b, &u32::wrapping_add),
                    BinOp::Sub => combine(a, b, &u32::wrapping_sub),
                    BinOp::Mul => combine(a, b, &u32::wrapping_mul),
                    BinOp::Min => combine(a, b, &u32::min),
                    BinOp::Max => combine(a, b, &u32::max),
                    BinOp::BitAnd => combine(a, b, &|a, b| a & b),
                    BinOp::BitOr => combine(a, b, &|a, b| a | b),
                    BinOp::BitXor => combine(a, b, &|a, b| a ^ b),
                    BinOp::Shr => combine(a, b, &|a, b| a >> (b % 32)),
                    other => unreachable!("{other:?} is never drawn"),
                }
            }
            Term::SelectLt(t) => {
                let [a, b, c, d] = t.each_ref().map(|t| t.eval(dst, src, k));
                (0..dst.len())
                    .map(|i| if a[i] < b[i] { c[i] } else { d[i] })
                    .collect()
            }
        }
    }

    fn expr(&self, dst: &Expr, src: &Expr, k: &Expr) -> Expr {
        match self {
            Term::Dst => dst.clone(),
            Term::Src => src.clone(),
            Term::K => k.clone(),
            Term::Lit(v) => Expr::from(*v),
            Term::Op(op, a, b) => Expr::Binary {
                op: *op,
                lhs: Box::new(a.expr(dst, src, k)),
                rhs: Box::new(b.expr(dst, src, k)),
            },
            Term::SelectLt(t) => {
                let [a, b, c, d] = &**t;
                a.expr(dst, src, k)
                    .lt(b.expr(dst, src, k))
                    .select(c.expr(dst, src, k), d.expr(dst, src, k))
            }
        }
    }
}

/// One random kernel of a world.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Formula {
    /// The kernel's name, `explore_<index>`.
    pub name: String,
    /// The value each output element gets, a term over `dst[i]`, `src[j]` and `k`.
    pub f: Term,
    /// `j = (i * stride + shift) % len(src)`: which source element each output reads.
    pub stride: u32,
    /// Offset of the source element read (see `stride`).
    pub shift: u32,
}

impl Formula {
    /// Draws formula number `index` of a world from `rng`.
    pub fn draw(rng: &mut impl Rng, index: usize) -> Formula {
        Formula {
            name: format!("explore_{index}"),
            f: Term::draw(rng, 3),
            stride: rng.random_range(1..4),
            shift: rng.random_range(0..8),
        }
    }

    /// The kernel: bindings `dst` (read-write), `src` (read); parameter `k`.
    pub fn kernel(&self) -> Kernel {
        let mut b = KernelBuilder::new(self.name.clone(), [WORKGROUP, 1, 1]);
        let dst = b.binding(ElemType::U32, Access::ReadWrite);
        let src = b.binding(ElemType::U32, Access::Read);
        let k = b.param(ElemType::U32);
        let i = b.global_id(Axis::X);
        b.if_(i.clone().lt(dst.len()), |b| {
            let j = (i.clone() * self.stride + self.shift) % src.len();
            let value = self.f.expr(&dst.load(i.clone()), &src.load(j), &k);
            b.store(dst, i, value);
        });
        let def = b
            .build()
            .expect("explore formulas are well-typed u32 expressions");
        Kernel::new(def).expect("and validate")
    }

    /// Workgroups covering every element of `dst`.
    pub fn workgroups(dst_len: usize) -> u32 {
        (dst_len as u32).div_ceil(WORKGROUP)
    }

    /// What the kernel must compute, on host copies. `src` is never empty.
    pub fn apply(&self, dst: &mut [u32], src: &[u32], k: u32) {
        let gathered: Vec<u32> = (0..dst.len() as u64)
            .map(|i| {
                src[((i * self.stride as u64 + self.shift as u64) % src.len() as u64) as usize]
            })
            .collect();
        let new = self.f.eval(dst, &gathered, k);
        dst.copy_from_slice(&new);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reference_gathers_and_wraps() {
        let formula = Formula {
            name: "t".into(),
            // if dst < src { dst - src } else { (dst >> k) ^ 3 }
            f: Term::SelectLt(Box::new([
                Term::Dst,
                Term::Src,
                Term::Op(BinOp::Sub, Box::new(Term::Dst), Box::new(Term::Src)),
                Term::Op(
                    BinOp::BitXor,
                    Box::new(Term::Op(BinOp::Shr, Box::new(Term::Dst), Box::new(Term::K))),
                    Box::new(Term::Lit(3)),
                ),
            ])),
            stride: 2,
            shift: 1,
        };
        let mut dst = vec![1, 40, 7];
        // j = (2i + 1) % 2: src[1], src[1], src[1].
        formula.apply(&mut dst, &[100, 5], 33);
        assert_eq!(dst, vec![1u32.wrapping_sub(5), (40 >> 1) ^ 3, (7 >> 1) ^ 3]);
    }
}
