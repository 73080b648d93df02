//! Random elementwise kernels for explored workloads: `dst[i] = f(dst[i], src[j], k)` with
//! `j = (i * stride + shift) % len(src)`, where `f` is a random expression over `u32`.
//!
//! The reference ([`Formula::apply`]) is plain wrapping Rust arithmetic, written independently
//! of the simulator's interpreter, so a kernel and its model can only agree by both being right.

use std::borrow::Cow;

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
        match self {
            Term::Dst => dst.to_vec(),
            Term::Src => src.to_vec(),
            Term::K => vec![k; dst.len()],
            Term::Lit(v) => vec![*v; dst.len()],
            Term::Op(op, a, b) => {
                let (a, b) = (a.eval(dst, src, k), b.column(dst, src, k));
                match op {
                    BinOp::Add => combine(a, &b, u32::wrapping_add),
                    BinOp::Sub => combine(a, &b, u32::wrapping_sub),
                    BinOp::Mul => combine(a, &b, u32::wrapping_mul),
                    BinOp::Min => combine(a, &b, u32::min),
                    BinOp::Max => combine(a, &b, u32::max),
                    BinOp::BitAnd => combine(a, &b, |a, b| a & b),
                    BinOp::BitOr => combine(a, &b, |a, b| a | b),
                    BinOp::BitXor => combine(a, &b, |a, b| a ^ b),
                    BinOp::Shr => combine(a, &b, |a, b| a >> (b % 32)),
                    other => unreachable!("{other:?} is never drawn"),
                }
            }
            Term::SelectLt(t) => {
                let [a, b, c, d] = t.each_ref().map(|t| t.column(dst, src, k));
                let mut c = c.into_owned();
                for i in 0..dst.len() {
                    if a[i] >= b[i] {
                        c[i] = d[i];
                    }
                }
                c
            }
        }
    }

    /// [`eval`](Self::eval), without copying `dst` or `src` when the term is one of them.
    fn column<'a>(&self, dst: &'a [u32], src: &'a [u32], k: u32) -> Cow<'a, [u32]> {
        match self {
            Term::Dst => Cow::Borrowed(dst),
            Term::Src => Cow::Borrowed(src),
            _ => Cow::Owned(self.eval(dst, src, k)),
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

/// `f(a[i], b[i])` at every element, into `a`.
fn combine(mut a: Vec<u32>, b: &[u32], f: impl Fn(u32, u32) -> u32) -> Vec<u32> {
    a.iter_mut().zip(b).for_each(|(a, &b)| *a = f(*a, b));
    a
}

/// One random kernel of a world.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Formula {
    pub name: String,
    pub f: Term,
    /// `j = (i * stride + shift) % len(src)`: which source element each output reads.
    pub stride: u32,
    pub shift: u32,
}

impl Formula {
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
        // j = (i * stride + shift) % len(src), stepped from i = 0: a step adds the stride and
        // wraps (a division per element cost more than the rest of the model).
        let (len, stride) = (src.len(), self.stride as usize);
        let mut j = self.shift as usize % len;
        let gathered: Vec<u32> = (0..dst.len())
            .map(|_| {
                let value = src[j];
                j += stride;
                while j >= len {
                    j -= len;
                }
                value
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
    fn the_reference_gathers_src_at_i_times_stride_plus_shift_modulo_its_length() {
        for (len, stride, shift) in (1..=9).flat_map(|len| {
            (1..4).flat_map(move |stride| (0..8).map(move |shift| (len, stride, shift)))
        }) {
            let formula = Formula {
                name: "t".into(),
                f: Term::Src,
                stride,
                shift,
            };
            let src: Vec<u32> = (100..100 + len).collect();
            let mut dst = vec![0; 20];
            formula.apply(&mut dst, &src, 0);
            let expected: Vec<u32> = (0..20)
                .map(|i| src[(i * stride as usize + shift as usize) % len as usize])
                .collect();
            assert_eq!(dst, expected, "len {len}, stride {stride}, shift {shift}");
        }
    }

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
