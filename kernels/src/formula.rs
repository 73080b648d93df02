//! Random elementwise kernels for explored workloads: `dst[i] = f(dst[i], src[j], k)` with
//! `j = (i * stride + shift) % len(src)`, where `f` is a random expression over `u32`. A
//! sharing formula also reads `n`, a neighbour's `dst` value: every invocation stages its
//! `dst[i]` (zero past the end) in a workgroup-shared array, passes a barrier, and reads the
//! word `rotate` lanes further round its workgroup; so the explorer's kernels use shared memory
//! and barriers, and run on the simulator's interleaving engine under its kernel sanitizer.
//!
//! The reference ([`Formula::apply`]) is plain wrapping Rust arithmetic, written independently
//! of the simulator's interpreter, so a kernel and its model can only agree by both being right.

use std::borrow::Cow;

use lockstep::Kernel;
use lockstep::kernel::{Access, Axis, BinOp, ElemType, KernelBuilder, KernelError, Value};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::elementwise::WORKGROUP;

/// A leaf or an operation of the expression `f`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Term {
    /// The output's own element, `dst[i]`.
    Dst,
    /// The gathered source element, `src[j]`.
    Src,
    /// The neighbour's `dst` value, in a sharing formula only.
    Neighbour,
    /// The kernel's parameter `k`.
    K,
    /// A constant.
    Lit(u32),
    /// A binary operation of two terms, with the IR's (wrapping) `u32` semantics.
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
            Term::Dst | Term::Src | Term::Neighbour | Term::K | Term::Lit(_) => {}
        }
    }

    /// This term with each `Dst` leaf turned into `Neighbour` with probability one half.
    fn share(&self, rng: &mut impl Rng) -> Term {
        match self {
            Term::Dst if rng.random_bool(0.5) => Term::Neighbour,
            Term::Op(op, a, b) => Term::Op(*op, Box::new(a.share(rng)), Box::new(b.share(rng))),
            Term::SelectLt(t) => {
                let [a, b, c, d] = &**t;
                Term::SelectLt(Box::new([a, b, c, d].map(|t| t.share(rng))))
            }
            leaf => leaf.clone(),
        }
    }

    /// `f` at every element of `at`, evaluated a node at a time over the whole block (per
    /// element, the tree walk cost more than the simulated kernel). The column returned comes
    /// from `columns`, and every other column this takes goes back there.
    fn eval(&self, at: &Leaves, columns: &mut Columns) -> Vec<u32> {
        match self {
            Term::Dst | Term::Src | Term::Neighbour => columns.copy(self.leaf(at)),
            Term::K => columns.uniform(at.k, at.len()),
            Term::Lit(v) => columns.uniform(*v, at.len()),
            Term::Op(op, a, b) => {
                let (a, b) = (a.eval(at, columns), b.operand(at, columns));
                let a = match op {
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
                };
                b.recycle(columns);
                a
            }
            Term::SelectLt(t) => {
                let [a, b, c, d] = t.each_ref().map(|t| t.column(at, columns));
                let mut out = columns.own(c);
                let lanes = out.iter_mut().zip(a.iter().zip(b.iter()).zip(d.iter()));
                for (out, ((&a, &b), &d)) in lanes {
                    *out = if a < b { *out } else { d };
                }
                for column in [a, b, d] {
                    columns.give(column);
                }
                out
            }
        }
    }

    /// The column a leaf `Dst`, `Src` or `Neighbour` reads.
    fn leaf<'a>(&self, at: &Leaves<'a>) -> &'a [u32] {
        match self {
            Term::Dst => at.dst,
            Term::Src => at.src,
            Term::Neighbour => at.n,
            other => unreachable!("{other:?} is not a column leaf"),
        }
    }

    /// [`eval`](Self::eval), without copying `dst`, `src` or `n` when the term is one of them.
    fn column<'a>(&self, at: &Leaves<'a>, columns: &mut Columns) -> Cow<'a, [u32]> {
        match self {
            Term::Dst | Term::Src | Term::Neighbour => Cow::Borrowed(self.leaf(at)),
            _ => Cow::Owned(self.eval(at, columns)),
        }
    }

    /// [`column`](Self::column), or the one value of a constant term (`k`, a literal) without
    /// a column of it.
    fn operand<'a>(&self, at: &Leaves<'a>, columns: &mut Columns) -> Operand<'a> {
        match self {
            Term::K => Operand::Uniform(at.k),
            Term::Lit(v) => Operand::Uniform(*v),
            _ => Operand::Column(self.column(at, columns)),
        }
    }

    /// `f` over the expressions each leaf reads: `[dst, src, neighbour, k]`.
    fn expr(&self, leaves: [Value; 4]) -> Value {
        let [dst, src, neighbour, k] = leaves;
        match self {
            Term::Dst => dst,
            Term::Src => src,
            Term::Neighbour => neighbour,
            Term::K => k,
            Term::Lit(v) => Value::from(*v),
            Term::Op(op, a, b) => a.expr(leaves).binary(*op, b.expr(leaves)),
            Term::SelectLt(t) => {
                let [a, b, c, d] = &**t;
                a.expr(leaves)
                    .lt(b.expr(leaves))
                    .select(c.expr(leaves), d.expr(leaves))
            }
        }
    }
}

/// What a term reads at every element of a block: `dst[i]`, the gathered `src[i]`, the
/// neighbours' `n[i]` (empty in a formula that does not share, which never reads it), and `k`.
struct Leaves<'a> {
    dst: &'a [u32],
    src: &'a [u32],
    n: &'a [u32],
    k: u32,
}

impl Leaves<'_> {
    /// Elements in the block.
    fn len(&self) -> usize {
        self.dst.len()
    }
}

/// Spare columns for [`Term::eval`], kept across the blocks of a [`Formula::apply`]: a node
/// takes one for its value and gives back its operands' (each block's columns were fresh
/// allocations, 2% of the explorer's instructions). Their contents are never read: each is
/// cleared when taken.
#[derive(Default)]
struct Columns(Vec<Vec<u32>>);

impl Columns {
    /// A column holding `values`.
    fn copy(&mut self, values: &[u32]) -> Vec<u32> {
        let mut column = self.0.pop().unwrap_or_default();
        column.clear();
        column.extend_from_slice(values);
        column
    }

    /// A column of `len` elements, each `value`.
    fn uniform(&mut self, value: u32, len: usize) -> Vec<u32> {
        let mut column = self.0.pop().unwrap_or_default();
        column.clear();
        column.resize(len, value);
        column
    }

    /// `column` as one of these, to be written (a copy of it if it is borrowed).
    fn own(&mut self, column: Cow<[u32]>) -> Vec<u32> {
        match column {
            Cow::Owned(column) => column,
            Cow::Borrowed(values) => self.copy(values),
        }
    }

    /// Takes back `column`, if it is one of these, for a later node.
    fn give(&mut self, column: Cow<[u32]>) {
        if let Cow::Owned(column) = column {
            self.0.push(column);
        }
    }
}

/// A term's value at every element: a column, or one value everywhere.
enum Operand<'a> {
    Column(Cow<'a, [u32]>),
    Uniform(u32),
}

impl Operand<'_> {
    /// Gives a column this operand owns back to `columns`.
    fn recycle(self, columns: &mut Columns) {
        if let Operand::Column(column) = self {
            columns.give(column);
        }
    }
}

/// `f(a[i], b[i])` at every element, into `a`.
fn combine(mut a: Vec<u32>, b: &Operand, f: impl Fn(u32, u32) -> u32) -> Vec<u32> {
    match b {
        Operand::Column(b) => a.iter_mut().zip(b.iter()).for_each(|(a, &b)| *a = f(*a, b)),
        Operand::Uniform(b) => a.iter_mut().for_each(|a| *a = f(*a, *b)),
    }
    a
}

/// `src[j]`, `src[j + stride]` and on, indices modulo `src.len()`, `n` of them into `out`
/// (cleared first); returns the index after the last. `j < src.len()`, and `src` is not empty.
/// A run up to the end of `src` at a time, the index reduced once per run (a division per
/// element cost more than the rest of the model, and a wrap tested per element a tenth of it).
fn gather(src: &[u32], stride: usize, mut j: usize, n: usize, out: &mut Vec<u32>) -> usize {
    out.clear();
    while out.len() < n {
        let (run, wanted) = (&src[j..], n - out.len());
        let count = wanted.min(run.len().div_ceil(stride));
        match stride {
            1 => out.extend_from_slice(&run[..count]),
            _ => out.extend((0..count).map(|i| run[i * stride])),
        }
        j = (j + count * stride) % src.len();
    }
    j
}

/// Elements [`Formula::apply`] computes at a time, at least: whole workgroups of at least as
/// many elements.
const MODEL_BLOCK: usize = 1024;

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
    /// In a sharing formula, how many lanes round its workgroup the neighbour is (1 to
    /// `WORKGROUP - 1`, taken modulo `workgroup`: in a workgroup of one, the lane itself).
    pub rotate: Option<u32>,
    /// Invocations per workgroup, along x: [`WORKGROUP`] as drawn, 1 to
    /// [`MAX_WORKGROUP_INVOCATIONS`](lockstep::kernel::MAX_WORKGROUP_INVOCATIONS) in every
    /// formula a kernel is built of.
    pub workgroup: u32,
}

impl Formula {
    /// Draws formula number `index` of a world from `rng`.
    pub fn draw(rng: &mut impl Rng, index: usize) -> Formula {
        Formula {
            name: format!("explore_{index}"),
            f: Term::draw(rng, 3),
            stride: rng.random_range(1..4),
            shift: rng.random_range(0..8),
            rotate: None,
            workgroup: WORKGROUP,
        }
    }

    /// Makes one formula in 16 a sharing one, drawing from `rng`: a stream of its own, so that
    /// every other draw of a world stays what it was before formulas shared. Rare, because a
    /// sharing kernel runs on the simulator's interleaving engine, a step per group of lanes:
    /// at one in 4 (when that engine ran a workgroup at a time) the explorer ran at a third of
    /// its speed.
    pub fn draw_sharing(&mut self, rng: &mut impl Rng) {
        if rng.random_ratio(1, 16) {
            self.rotate = Some(rng.random_range(1..WORKGROUP));
            self.f = self.f.share(rng);
        }
    }

    /// The kernel: bindings `dst` (read-write), `src` (read); parameter `k`. A sharing
    /// formula's invocations read their neighbour's `dst` through a shared array, after a
    /// barrier that every invocation reaches (the guard on `i` comes after it).
    pub fn kernel(&self) -> Kernel {
        let size = self.workgroup;
        let mut b = KernelBuilder::new(self.name.clone(), [size, 1, 1]);
        let dst = b.binding(ElemType::U32, Access::ReadWrite);
        let src = b.binding(ElemType::U32, Access::Read);
        let k = b.param(ElemType::U32);
        let i = b.global_id(Axis::X);
        let neighbour = self.rotate.map_or(Value::from(0u32), |rotate| {
            let staged = b.shared(ElemType::U32, size);
            let own = b.var(ElemType::U32, 0u32);
            b.if_(i.lt(dst.len()), |b| b.assign(own, dst.load(i)));
            let lane = b.local_id(Axis::X);
            b.store(staged, lane, own);
            b.workgroup_barrier();
            staged.load((lane + rotate) % size)
        });
        b.if_(i.lt(dst.len()), |b| {
            let j = (i * self.stride + self.shift) % src.len();
            let leaves = [dst.load(i), src.load(j), neighbour, k];
            b.store(dst, i, self.f.expr(leaves));
        });
        b.build()
            .expect("explore formulas are well-typed u32 expressions of 1 to 1024 invocations")
    }

    /// The kernel with workgroups of `size` instead, as [`Kernel::new`] judges it: refused
    /// with [`KernelError::InvalidWorkgroupSize`] for a size of no invocations or of more
    /// than [`MAX_WORKGROUP_INVOCATIONS`](lockstep::kernel::MAX_WORKGROUP_INVOCATIONS) (its
    /// product taken without wrapping).
    pub fn kernel_sized(&self, size: [u32; 3]) -> Result<Kernel, KernelError> {
        let mut def = self.kernel().def().clone();
        def.workgroup_size = size;
        Kernel::new(def)
    }

    /// Workgroups covering every element of `dst` (more than `u32::MAX` saturates, a count
    /// no device serves).
    pub fn workgroups(&self, dst_len: usize) -> u32 {
        let count = dst_len.div_ceil(self.workgroup as usize);
        u32::try_from(count).unwrap_or(u32::MAX)
    }

    /// What the kernel must compute, on host copies. `src` is never empty.
    pub fn apply(&self, dst: &mut [u32], src: &[u32], k: u32) {
        // j = (i * stride + shift) % len(src), from i = 0 on (see `gather`).
        let mut j = self.shift as usize % src.len();
        let lanes = self.workgroup as usize;
        let block_len = MODEL_BLOCK.div_ceil(lanes) * lanes;
        let (mut gathered, mut neighbours) = (Vec::with_capacity(block_len), Vec::new());
        let mut columns = Columns::default();
        // A block of whole workgroups at a time: `f`'s columns stay small enough for the cache
        // and for the allocator's reused memory (whole-buffer columns of up to 256 KiB were
        // fresh pages each time), and each neighbour is in its element's block.
        for block in dst.chunks_mut(block_len) {
            j = gather(src, self.stride as usize, j, block.len(), &mut gathered);
            self.neighbours(block, &mut neighbours);
            let at = Leaves {
                dst: block,
                src: &gathered,
                n: &neighbours,
                k,
            };
            let new = self.f.eval(&at, &mut columns);
            block.copy_from_slice(&new);
            columns.give(Cow::Owned(new));
        }
    }

    /// What each invocation of a sharing formula reads as its neighbour's value, into `out`
    /// (cleared first): `dst` at the index `rotate` lanes further round its workgroup, zero
    /// past the end (nothing, for a formula that does not share, which never reads it).
    fn neighbours(&self, dst: &[u32], out: &mut Vec<u32>) {
        out.clear();
        let Some(rotate) = self.rotate else {
            return;
        };
        let lanes = self.workgroup as usize;
        out.extend((0..dst.len()).map(|i| {
            let at = i - i % lanes + (i % lanes + rotate as usize) % lanes;
            dst.get(at).copied().unwrap_or(0)
        }));
    }
}

/// How many kernels [`sample_kernels`] gives.
pub const SAMPLE_KERNELS: usize = 300;

/// Random kernels as the lowering tests see them: the first [`SAMPLE_KERNELS`] distinct
/// kernels drawn as the explorer draws a world's formulas ([`Formula::draw`], then
/// [`Formula::draw_sharing`], so about one in 16 shares through a workgroup array), from
/// `ChaCha8Rng` seeded 0, 1, … in turn. Each backend's tests lower every one, checked and
/// unchecked, and compile (NVRTC) or validate (naga) it, so a formula that a lowering
/// mistranslates fails where there is no GPU.
pub fn sample_kernels() -> Vec<Kernel> {
    let mut kernels: Vec<Kernel> = Vec::with_capacity(SAMPLE_KERNELS);
    for seed in 0.. {
        if kernels.len() == SAMPLE_KERNELS {
            break;
        }
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut formula = Formula::draw(&mut rng, 0);
        formula.draw_sharing(&mut rng);
        // A kernel is what its body computes: skip a formula drawn before.
        let kernel = formula.kernel();
        if !kernels.iter().any(|k| k.def().body == kernel.def().body) {
            kernels.push(kernel);
        }
    }
    kernels
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
                rotate: None,
                workgroup: WORKGROUP,
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
            rotate: None,
            workgroup: WORKGROUP,
        };
        let mut dst = vec![1, 40, 7];
        // j = (2i + 1) % 2: src[1], src[1], src[1].
        formula.apply(&mut dst, &[100, 5], 33);
        assert_eq!(dst, vec![1u32.wrapping_sub(5), (40 >> 1) ^ 3, (7 >> 1) ^ 3]);
    }

    #[test]
    fn blocks_of_the_reference_give_each_element_its_own_value() {
        // Past one block, with a partial last workgroup: each element as if computed alone.
        let formula = Formula {
            name: "t".into(),
            // (n ^ dst) + src * k
            f: Term::Op(
                BinOp::Add,
                Box::new(Term::Op(
                    BinOp::BitXor,
                    Box::new(Term::Neighbour),
                    Box::new(Term::Dst),
                )),
                Box::new(Term::Op(BinOp::Mul, Box::new(Term::Src), Box::new(Term::K))),
            ),
            stride: 3,
            shift: 5,
            rotate: Some(2),
            workgroup: WORKGROUP,
        };
        let len = 2 * MODEL_BLOCK + 13;
        let before: Vec<u32> = (0..len as u32)
            .map(|i| i.wrapping_mul(2_654_435_761))
            .collect();
        let src: Vec<u32> = (0..77).collect();
        let mut dst = before.clone();
        formula.apply(&mut dst, &src, 9);
        for (i, &got) in dst.iter().enumerate() {
            let lane = i % WORKGROUP as usize;
            let at = i - lane + (lane + 2) % WORKGROUP as usize;
            let n = before.get(at).copied().unwrap_or(0);
            let s = src[(i * 3 + 5) % src.len()];
            assert_eq!(got, (n ^ before[i]).wrapping_add(s * 9), "element {i}");
        }
    }

    #[test]
    fn a_sharing_formula_reads_its_neighbour_round_the_workgroup() {
        let formula = Formula {
            name: "t".into(),
            // n - dst
            f: Term::Op(BinOp::Sub, Box::new(Term::Neighbour), Box::new(Term::Dst)),
            stride: 1,
            shift: 0,
            rotate: Some(3),
            workgroup: WORKGROUP,
        };
        let mut dst: Vec<u32> = (0..10).map(|i| i * 10).collect();
        formula.apply(&mut dst, &[0], 0);
        // Lanes 0..8 read 3 further round (lane 5 reads lane 0); lanes 8 and 9 read past the
        // end (zero), as the launch's second workgroup holds only them.
        let want: Vec<u32> = [
            30,
            30,
            30,
            30,
            30,
            0u32.wrapping_sub(50),
            0u32.wrapping_sub(50),
        ]
        .into_iter()
        .chain([
            0u32.wrapping_sub(50),
            0u32.wrapping_sub(80),
            0u32.wrapping_sub(90),
        ])
        .collect();
        assert_eq!(dst, want);
    }

    #[test]
    fn a_formula_shares_round_a_workgroup_of_its_own_size() {
        let formula = Formula {
            name: "t".into(),
            f: Term::Neighbour,
            stride: 1,
            shift: 0,
            rotate: Some(2),
            workgroup: 3,
        };
        let kernel = formula.kernel();
        assert_eq!(kernel.def().workgroup_size, [3, 1, 1]);
        assert_eq!(kernel.def().shared[0].len, 3);
        assert_eq!(formula.workgroups(7), 3);
        let mut dst: Vec<u32> = (10..17).collect();
        formula.apply(&mut dst, &[0], 0);
        // Workgroups {0, 1, 2}, {3, 4, 5}, {6}: two lanes further round each (past the end: 0).
        assert_eq!(dst, [12, 10, 11, 15, 13, 14, 0]);
        // In a workgroup of one, the neighbour is the lane itself.
        let alone = Formula {
            workgroup: 1,
            ..formula.clone()
        };
        let mut dst: Vec<u32> = (10..17).collect();
        alone.apply(&mut dst, &[0], 0);
        assert_eq!(dst, (10..17).collect::<Vec<u32>>());
        assert_eq!(alone.workgroups(7), 7);
    }

    #[test]
    fn a_size_of_no_invocations_or_past_1024_is_refused() {
        let formula = Formula::draw(&mut ChaCha8Rng::seed_from_u64(3), 0);
        for size in [
            [0, 1, 1],
            [1025, 1, 1],
            [1 << 16, 1 << 16, 1],
            [1024, 1024, 4096],
        ] {
            assert!(
                matches!(
                    formula.kernel_sized(size),
                    Err(KernelError::InvalidWorkgroupSize { size: s, .. }) if s == size
                ),
                "{size:?}"
            );
        }
        let kernel = formula.kernel_sized([1024, 1, 1]).unwrap();
        assert_eq!(kernel.def().workgroup_size, [1024, 1, 1]);
    }

    #[test]
    fn the_sample_kernels_are_the_first_drawn_and_distinct() {
        let sample = sample_kernels();
        assert_eq!(sample.len(), SAMPLE_KERNELS);
        let mut rng = ChaCha8Rng::seed_from_u64(0);
        let mut first = Formula::draw(&mut rng, 0);
        first.draw_sharing(&mut rng);
        assert_eq!(sample[0].def(), first.kernel().def());
        for (i, a) in sample.iter().enumerate() {
            for b in &sample[i + 1..] {
                assert_ne!(a.def().body, b.def().body, "{} twice", a.def().name);
            }
        }
        // The lowering tests see sharing formulas too: shared arrays and barriers.
        let sharing = sample.iter().filter(|k| !k.def().shared.is_empty()).count();
        assert_eq!(sharing, 24);
    }
}
