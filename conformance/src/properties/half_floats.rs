//! The half floats (`f16`, `bf16`) compute, bit for bit, what the `half` crate computes on the
//! host by the IR's rules (`lockstep_kernels::half`), on devices that declare the type.

use lockstep::kernel::ElemType;
use proptest::collection::vec;
use proptest::prelude::*;

use super::{Failure, RunConfig, expect_clean, run_cases};
use crate::factory::DeviceFactory;
use lockstep_kernels::half::{self, HalfInputs};

/// One case: the device's seed and the kernel's inputs.
#[derive(Clone, Debug)]
struct Case {
    seed: u64,
    inputs: HalfInputs,
}

/// Inputs of 1 to 200 elements (odd counts end a binding inside a 4-byte word): any bit
/// patterns (subnormals, infinities and NaNs included), `f32`s within a rounding of a half
/// value (so ties and near-ties are common), and integers both within and far beyond `f16`'s
/// range.
fn case(elem: ElemType) -> impl Strategy<Value = Case> {
    // Fraction bits an f32 has beyond the half type: noise in them makes roundings.
    let extra: u32 = if elem == ElemType::BF16 {
        0xffff
    } else {
        0x1fff
    };
    (any::<u64>(), 1usize..200, any::<u16>()).prop_flat_map(move |(seed, n, scale)| {
        let wide = (any::<u16>(), any::<u32>()).prop_map(move |(bits, noise)| {
            let exact = match elem {
                ElemType::BF16 => lockstep::half::bf16::from_bits(bits).to_f32(),
                _ => lockstep::half::f16::from_bits(bits).to_f32(),
            };
            f32::from_bits(exact.to_bits() ^ (noise & extra))
        });
        let int = prop_oneof![any::<i32>(), -70_000i32..70_000];
        (
            vec(any::<u16>(), n),
            vec(any::<u16>(), n),
            vec(wide, n),
            vec(int, n),
        )
            .prop_map(move |(a, b, wide, ints)| Case {
                seed,
                inputs: HalfInputs {
                    a,
                    b,
                    wide,
                    ints,
                    scale,
                },
            })
    })
}

fn half_arithmetic<F: DeviceFactory>(
    factory: &F,
    config: RunConfig,
    elem: ElemType,
    name: &str,
) -> Result<(), Failure> {
    run_cases(config, name, case(elem), |case| {
        let session = factory.open(case.seed);
        let got = half::run(&session.client, elem, &case.inputs)?;
        let expected = half::reference(elem, &case.inputs);
        half::compare(elem, &case.inputs, &got, &expected)?;
        expect_clean(&session)
    })
}

pub(super) fn f16_arithmetic<F: DeviceFactory>(
    factory: &F,
    config: RunConfig,
) -> Result<(), Failure> {
    half_arithmetic(factory, config, ElemType::F16, "f16_arithmetic")
}

pub(super) fn bf16_arithmetic<F: DeviceFactory>(
    factory: &F,
    config: RunConfig,
) -> Result<(), Failure> {
    half_arithmetic(factory, config, ElemType::BF16, "bf16_arithmetic")
}

/// Only devices that declare `f16` can run [`f16_arithmetic`]: elsewhere its kernel is refused.
pub(super) fn with_f16<F: DeviceFactory>(factory: &F) -> bool {
    factory.open(0).client.properties().features.f16
}

/// Only devices that declare `bf16` can run [`bf16_arithmetic`].
pub(super) fn with_bf16<F: DeviceFactory>(factory: &F) -> bool {
    factory.open(0).client.properties().features.bf16
}
