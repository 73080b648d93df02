//! Half floats (`f16`, `bf16`) on the simulator: 2-byte elements in device memory, arithmetic
//! rounded once per operation (the IR's "Half floats"), and refusal where a device lacks them.

use lockstep::half::{bf16, f16};
use lockstep::kernel::{Access, Axis, ElemType, KernelBuilder, KernelError};
use lockstep::{Bytes, ComputeClient, CubeCount, Device, DeviceError, IoError, KernelArguments};
use lockstep_sim::{SimConfig, SimDevice};

/// `out[i] = a[i] * b[i] + a[i]` in `elem`, and `wide[i] = out[i]` as `f32`.
fn mul_add(elem: ElemType) -> lockstep::Kernel {
    let mut k = KernelBuilder::new("mul_add", [4, 1, 1]);
    let a = k.binding(elem, Access::Read);
    let b = k.binding(elem, Access::Read);
    let out = k.binding(elem, Access::ReadWrite);
    let wide = k.binding(ElemType::F32, Access::ReadWrite);
    let i = k.global_id(Axis::X);
    k.if_(i.lt(out.len()), |k| {
        let x = a.load(i);
        let y = x * b.load(i) + x;
        k.store(out, i, y);
        k.store(wide, i, y.cast(ElemType::F32));
    });
    k.build().unwrap()
}

#[test]
fn f16_kernels_round_every_operation_and_store_two_byte_elements() {
    let c = ComputeClient::new(SimDevice::new(SimConfig::new(5)));
    assert!(c.properties().features.f16 && c.properties().features.bf16);
    let h = |v: f32| f16::from_f32(v);
    // Five elements: an odd count, so the bindings end in the middle of a 4-byte word.
    let a = [h(1.0), h(3.0), h(-0.5), h(1000.0), h(65504.0)];
    let b = [h(2f32.powi(-11)), h(0.1), h(4.0), h(1000.0), h(1.0)];
    let (ha, hb) = (
        c.create(Bytes::from_elems(&a)).unwrap(),
        c.create(Bytes::from_elems(&b)).unwrap(),
    );
    let out = c.empty(2 * 5).unwrap();
    let wide = c.empty(4 * 5).unwrap();
    let args = KernelArguments::new()
        .binding(&ha)
        .binding(&hb)
        .binding(&out)
        .binding(&wide);
    c.launch(&mul_add(ElemType::F16), CubeCount::Static(2, 1, 1), args)
        .unwrap();
    let expected: Vec<f16> = a
        .iter()
        .zip(&b)
        .map(|(&x, &y)| h(h(x.to_f32() * y.to_f32()).to_f32() + x.to_f32()))
        .collect();
    // 1 * 2^-11 + 1 ties to 1; 1000 * 1000 overflows to infinity.
    assert_eq!(expected[0], h(1.0));
    assert_eq!(expected[3], f16::INFINITY);
    assert_eq!(c.read_one(out).unwrap().to_elems::<f16>(), expected);
    let widened: Vec<f32> = expected.iter().map(|v| v.to_f32()).collect();
    assert_eq!(c.read_one(wide).unwrap().to_elems::<f32>(), widened);
}

#[test]
fn bf16_kernels_compute_in_f32_and_round_to_bf16() {
    let c = ComputeClient::new(SimDevice::new(SimConfig::new(6)));
    let v = |x: f32| bf16::from_f32(x);
    let (a, b) = (
        [v(1.0), v(-3.5), v(1e30)],
        [v(2f32.powi(-9)), v(3.0), v(1e10)],
    );
    let (ha, hb) = (
        c.create(Bytes::from_elems(&a)).unwrap(),
        c.create(Bytes::from_elems(&b)).unwrap(),
    );
    let (out, wide) = (c.empty(2 * 3).unwrap(), c.empty(4 * 3).unwrap());
    let args = KernelArguments::new()
        .binding(&ha)
        .binding(&hb)
        .binding(&out)
        .binding(&wide);
    c.launch(&mul_add(ElemType::BF16), CubeCount::Static(1, 1, 1), args)
        .unwrap();
    let expected: Vec<u16> = a
        .iter()
        .zip(&b)
        .map(|(&x, &y)| v(v(x.to_f32() * y.to_f32()).to_f32() + x.to_f32()).to_bits())
        .collect();
    // 1 + 2^-9 rounds back to 1; -3.5 * 3 - 3.5 = -14 exactly.
    assert_eq!(expected[..2], [0x3f80, 0xc160]);
    assert_eq!(c.read_one(out).unwrap().to_elems::<u16>(), expected);
}

#[test]
fn a_device_without_f16_refuses_its_kernels_at_launch_and_compile() {
    let mut c = ComputeClient::new(SimDevice::new(SimConfig::new(7)));
    c.properties_mut().unwrap().features.f16 = false;
    let out = c.empty(8).unwrap();
    let (a, b, wide) = (
        c.empty(8).unwrap(),
        c.empty(8).unwrap(),
        c.empty(16).unwrap(),
    );
    let args = KernelArguments::new()
        .binding(&a)
        .binding(&b)
        .binding(&out)
        .binding(&wide);
    let err = c
        .launch(&mul_add(ElemType::F16), CubeCount::Static(1, 1, 1), args)
        .unwrap_err();
    assert!(
        matches!(
            err,
            IoError::InvalidKernel(KernelError::UnsupportedType {
                elem: ElemType::F16,
                feature: "f16",
                ..
            })
        ),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        "kernel `mul_add`: uses f16, which the device does not support (Features::f16 is false)"
    );

    let mut device = SimDevice::new(SimConfig::new(8).without_half_floats());
    let kernel = mul_add(ElemType::BF16);
    let err = device
        .compile(kernel.def(), lockstep::kernel::CompileOptions::checked(1))
        .unwrap_err();
    assert_eq!(
        err,
        DeviceError::Compile {
            kernel: "mul_add".into(),
            log: "kernel `mul_add`: uses bf16, which the device does not support (Features::bf16 is false)".into(),
        }
    );
}
