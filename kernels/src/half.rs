//! The half floats' kernel (`f16`, `bf16`): every exact operation and conversion of the IR's
//! "Half floats" on whole arrays, with a host reference computed with the `half` crate (each
//! operation on exact `f32` values, rounded once to nearest even), compared bit for bit.
//! Property `f16_arithmetic` / `bf16_arithmetic` runs it where the device declares the type;
//! the CUDA and WGSL lowerings snapshot it and compile it (NVRTC, naga).

use lockstep::half::{bf16, f16};
use lockstep::kernel::{Access, Axis, ElemType, KernelBuilder, Scalar};
use lockstep::{Bytes, ComputeClient, CubeCount, Device, Handle, Kernel, KernelArguments};

/// Invocations per workgroup.
pub const WORKGROUP: u32 = 64;

/// What each row of the kernel's half-float output holds, element `i` of each input:
/// `a + b`, `a - b`, `a * b`, `min(a, b)`, `max(a, b)`, `-a`, `abs(b)`, `wide` rounded to the
/// type, `ints` converted, `ints` as `u32` converted, `a * scale + 0.5`, `a < b ? b : a`.
pub const ROWS: [&str; 12] = [
    "a + b",
    "a - b",
    "a * b",
    "min(a, b)",
    "max(a, b)",
    "-a",
    "abs(b)",
    "f32 -> half",
    "i32 -> half",
    "u32 -> half",
    "a * scale + 0.5",
    "select(a < b, b, a)",
];

/// The kernel over half floats of type `elem` (`F16` or `BF16`). Bindings: `a`, `b` (`elem`),
/// `wide` (`f32`), `ints` (`i32`), all of one length `n`; then the outputs `out` (`elem`,
/// [`ROWS`] rows of `n`), `as_f32` (`a` widened), `as_i32` (`a` converted), `as_u32` (`b`
/// converted), each of `n`. One parameter: `scale` (`elem`).
pub fn half_arithmetic(elem: ElemType) -> Kernel {
    let mut k = KernelBuilder::new(format!("{elem}_arithmetic"), [WORKGROUP, 1, 1]);
    let a = k.binding(elem, Access::Read);
    let b = k.binding(elem, Access::Read);
    let wide = k.binding(ElemType::F32, Access::Read);
    let ints = k.binding(ElemType::I32, Access::Read);
    let out = k.binding(elem, Access::ReadWrite);
    let as_f32 = k.binding(ElemType::F32, Access::ReadWrite);
    let as_i32 = k.binding(ElemType::I32, Access::ReadWrite);
    let as_u32 = k.binding(ElemType::U32, Access::ReadWrite);
    let scale = k.param(elem);
    let half_lit = match elem {
        ElemType::BF16 => Scalar::BF16(bf16::from_f32(0.5)),
        _ => Scalar::F16(f16::from_f32(0.5)),
    };
    let i = k.global_id(Axis::X);
    let n = a.len();
    k.if_(i.lt(n), |k| {
        let (x, y, int) = (a.load(i), b.load(i), ints.load(i));
        let rows = [
            x + y,
            x - y,
            x * y,
            x.min(y),
            x.max(y),
            -x,
            y.abs(),
            wide.load(i).cast(elem),
            int.cast(elem),
            int.cast(ElemType::U32).cast(elem),
            x * scale + half_lit,
            x.lt(y).select(y, x),
        ];
        for (row, value) in rows.into_iter().enumerate() {
            k.store(out, n * (row as u32) + i, value);
        }
        k.store(as_f32, i, x.cast(ElemType::F32));
        k.store(as_i32, i, x.cast(ElemType::I32));
        k.store(as_u32, i, y.cast(ElemType::U32));
    });
    k.build().expect("the half-float kernel is valid IR")
}

/// One run's inputs: half floats as their bits.
#[derive(Clone, Debug, PartialEq)]
pub struct HalfInputs {
    /// `a`, bits of the half type.
    pub a: Vec<u16>,
    /// `b`, bits of the half type (as long as `a`).
    pub b: Vec<u16>,
    /// `f32`s to round to the half type (as long as `a`).
    pub wide: Vec<f32>,
    /// Integers to convert (as long as `a`).
    pub ints: Vec<i32>,
    /// The `scale` parameter, bits of the half type.
    pub scale: u16,
}

/// What the kernel writes: the half rows as bits, then the three conversions out.
#[derive(Clone, Debug, PartialEq)]
pub struct HalfOutputs {
    /// [`ROWS`] rows of `n` half-float bit patterns.
    pub out: Vec<u16>,
    /// `a` as `f32`.
    pub as_f32: Vec<f32>,
    /// `a` as `i32` (saturating, NaN to 0).
    pub as_i32: Vec<i32>,
    /// `b` as `u32` (saturating, NaN to 0).
    pub as_u32: Vec<u32>,
}

/// Every 16-bit pattern as `a`, each paired with a scrambled other pattern as `b` (odd
/// multipliers permute the patterns), `f32`s within a rounding of each `a` for `wide`, and
/// integers spread over `i32`: an exhaustive run of [`half_arithmetic`] for `elem`.
pub fn exhaustive_inputs(elem: ElemType) -> HalfInputs {
    let a: Vec<u16> = (0..=u16::MAX).collect();
    let b = a.iter().map(|&x| x.wrapping_mul(40_503) ^ 0x5a5a).collect();
    let noise: u32 = if elem == ElemType::BF16 {
        0xffff
    } else {
        0x1fff
    };
    let wide = a
        .iter()
        .map(|&x| {
            f32::from_bits(
                widen(elem, x).to_bits() ^ (u32::from(x).wrapping_mul(2_654_435_761) & noise),
            )
        })
        .collect();
    let ints = a
        .iter()
        .map(|&x| (i32::from(x) - 32_768).wrapping_mul(if x % 3 == 0 { 65_537 } else { 3 }))
        .collect();
    HalfInputs {
        a,
        b,
        wide,
        ints,
        scale: round(elem, 1.5),
    }
}

/// The exact `f32` value of half bits `bits` of `elem`.
fn widen(elem: ElemType, bits: u16) -> f32 {
    match elem {
        ElemType::BF16 => bf16::from_bits(bits).to_f32(),
        _ => f16::from_bits(bits).to_f32(),
    }
}

/// `v` rounded to `elem`, to nearest even, as bits.
fn round(elem: ElemType, v: f32) -> u16 {
    match elem {
        ElemType::BF16 => bf16::from_f32(v).to_bits(),
        _ => f16::from_f32(v).to_bits(),
    }
}

/// The IR's `min`: a NaN operand yields the other; equal operands the left one.
fn min(a: f32, b: f32) -> f32 {
    if a.is_nan() || b < a { b } else { a }
}

/// The IR's `max`: a NaN operand yields the other; equal operands the left one.
fn max(a: f32, b: f32) -> f32 {
    if a.is_nan() || b > a { b } else { a }
}

/// What the kernel computes from `inputs` in `elem`, by the IR's rules, on the host.
pub fn reference(elem: ElemType, inputs: &HalfInputs) -> HalfOutputs {
    let n = inputs.a.len();
    let r = |v: f32| round(elem, v);
    let w = |bits: u16| widen(elem, bits);
    let (scale, lit) = (w(inputs.scale), 0.5f32);
    let mut rows: Vec<Vec<u16>> = vec![Vec::with_capacity(n); ROWS.len()];
    for i in 0..n {
        let (a, b) = (inputs.a[i], inputs.b[i]);
        let (x, y, int) = (w(a), w(b), inputs.ints[i]);
        let values = [
            r(x + y),
            r(x - y),
            r(x * y),
            r(min(x, y)),
            r(max(x, y)),
            a ^ 0x8000,
            b & 0x7fff,
            r(inputs.wide[i]),
            r(int as f32),
            r(int as u32 as f32),
            r(w(r(x * scale)) + lit),
            if x < y { b } else { a },
        ];
        for (row, v) in rows.iter_mut().zip(values) {
            row.push(v);
        }
    }
    HalfOutputs {
        out: rows.concat(),
        as_f32: inputs.a.iter().map(|&a| w(a)).collect(),
        as_i32: inputs.a.iter().map(|&a| w(a) as i32).collect(),
        as_u32: inputs.b.iter().map(|&b| w(b) as u32).collect(),
    }
}

/// Runs [`half_arithmetic`] of `elem` on `inputs` (at least one element) and returns what it
/// wrote.
pub fn run<D: Device>(
    c: &ComputeClient<D>,
    elem: ElemType,
    inputs: &HalfInputs,
) -> Result<HalfOutputs, String> {
    let n = inputs.a.len();
    let create = |bytes: Bytes| c.create(bytes).map_err(|e| format!("create: {e}"));
    let empty = |bytes: usize| c.empty(bytes).map_err(|e| format!("empty: {e}"));
    let (a, b) = (
        create(Bytes::from_elems(&inputs.a))?,
        create(Bytes::from_elems(&inputs.b))?,
    );
    let wide = create(Bytes::from_elems(&inputs.wide))?;
    let ints = create(Bytes::from_elems(&inputs.ints))?;
    let out = empty(2 * n * ROWS.len())?;
    let (as_f32, as_i32, as_u32) = (empty(4 * n)?, empty(4 * n)?, empty(4 * n)?);
    let scale = Scalar::from_bits(elem, inputs.scale.into());
    let handles: [&Handle; 8] = [&a, &b, &wide, &ints, &out, &as_f32, &as_i32, &as_u32];
    let args = handles
        .iter()
        .fold(KernelArguments::new(), |args, h| args.binding(h))
        .param(scale);
    let groups = (n as u32).div_ceil(WORKGROUP);
    c.launch(
        &half_arithmetic(elem),
        CubeCount::Static(groups, 1, 1),
        args,
    )
    .map_err(|e| format!("launch: {e}"))?;
    let read = |h: &Handle| c.read_one(h.clone()).map_err(|e| format!("read: {e}"));
    Ok(HalfOutputs {
        out: read(&out)?.to_elems(),
        as_f32: read(&as_f32)?.to_elems(),
        as_i32: read(&as_i32)?.to_elems(),
        as_u32: read(&as_u32)?.to_elems(),
    })
}

/// Compares `got` with `expected` bit for bit (a NaN matches any NaN: its sign and payload
/// may differ across devices); says which row and element differ first.
pub fn compare(
    elem: ElemType,
    inputs: &HalfInputs,
    got: &HalfOutputs,
    expected: &HalfOutputs,
) -> Result<(), String> {
    let n = inputs.a.len();
    let nan = |bits: u16| widen(elem, bits).is_nan();
    let same = |g: u16, e: u16| g == e || (nan(g) && nan(e));
    for (k, (&g, &e)) in got.out.iter().zip(&expected.out).enumerate() {
        if !same(g, e) {
            let (row, i) = (k / n, k % n);
            return Err(format!(
                "{elem} `{}` at {i} (a {:#06x}, b {:#06x}, wide {:?}, int {}): got {g:#06x}, expected {e:#06x}",
                ROWS[row], inputs.a[i], inputs.b[i], inputs.wide[i], inputs.ints[i]
            ));
        }
    }
    let f32_same = |g: &f32, e: &f32| g.to_bits() == e.to_bits() || (g.is_nan() && e.is_nan());
    if let Some(i) = (0..n).find(|&i| !f32_same(&got.as_f32[i], &expected.as_f32[i])) {
        return Err(format!(
            "{elem} -> f32 of {:#06x}: got {:?}, expected {:?}",
            inputs.a[i], got.as_f32[i], expected.as_f32[i]
        ));
    }
    if let Some(i) = (0..n).find(|&i| got.as_i32[i] != expected.as_i32[i]) {
        return Err(format!(
            "{elem} -> i32 of {:#06x}: got {}, expected {}",
            inputs.a[i], got.as_i32[i], expected.as_i32[i]
        ));
    }
    if let Some(i) = (0..n).find(|&i| got.as_u32[i] != expected.as_u32[i]) {
        return Err(format!(
            "{elem} -> u32 of {:#06x}: got {}, expected {}",
            inputs.b[i], got.as_u32[i], expected.as_u32[i]
        ));
    }
    if got.out.len() != expected.out.len() {
        return Err(format!(
            "{} half results read, {} expected",
            got.out.len(),
            expected.out.len()
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reference_rounds_ties_to_even_and_converts_through_f32() {
        let h = |v: f32| f16::from_f32(v).to_bits();
        let inputs = HalfInputs {
            a: vec![h(1.0), h(65504.0)],
            b: vec![h(2f32.powi(-11)), h(-1.0)],
            wide: vec![1.0 + 2f32.powi(-11), 65520.0],
            ints: vec![-70000, 65519],
            scale: h(3.0),
        };
        let out = reference(ElemType::F16, &inputs);
        let row = |r: usize| &out.out[2 * r..2 * r + 2];
        assert_eq!(row(0), [0x3c00, 0x7bff]); // 1 + 2^-11 ties to 1; 65504 - 1 rounds back
        assert_eq!(row(5), [0xbc00, 0xfbff]);
        assert_eq!(row(7), [0x3c00, 0x7c00]); // a tie to even; 65520 overflows
        assert_eq!(row(8), [0xfc00, 0x7bff]);
        assert_eq!(row(10)[0], h(3.5));
        assert_eq!(out.as_i32, [1, 65504]);
        assert_eq!(out.as_u32, [0, 0]);
    }
}
