//! Every 16-bit pattern through the half floats' kernel on the simulator, against the `half`
//! crate's reference (the GPU runs the same in `cuda-device/tests/gpu.rs`).

use lockstep::ComputeClient;
use lockstep::kernel::ElemType;
use lockstep_kernels::half::{compare, exhaustive_inputs, reference, run};
use lockstep_sim::{SimConfig, SimDevice};

#[test]
fn every_half_float_bit_pattern_computes_the_reference() {
    let c = ComputeClient::new(SimDevice::new(SimConfig::new(2)));
    for elem in [ElemType::F16, ElemType::BF16] {
        let inputs = exhaustive_inputs(elem);
        let got = run(&c, elem, &inputs).unwrap();
        compare(elem, &inputs, &got, &reference(elem, &inputs)).unwrap();
    }
}
