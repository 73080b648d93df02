//! The translator on WGSL written here: each construct it translates runs on the simulator
//! and is compared with WGSL's rules; each it refuses is refused by name.

use lockstep::{Bytes, ComputeClient, CubeCount, Handle, Kernel, KernelArguments, ServerOptions};
use lockstep_sim::{SimConfig, SimDevice};
use naga::valid::{Capabilities, ValidationFlags, Validator};

use super::{BindingSource, Construct, Translated, Translation, translate};

fn translated(wgsl: &str) -> Translation<Translated> {
    let module =
        naga::front::wgsl::parse_str(wgsl).unwrap_or_else(|e| panic!("{}", e.emit_to_string(wgsl)));
    let info = Validator::new(ValidationFlags::all(), Capabilities::all())
        .validate(&module)
        .expect("valid WGSL");
    translate(&module, &info)
}

/// Runs `wgsl`'s kernel over `workgroups` workgroups with `buffers` as its bindings (each a
/// `u32` array, resource k at `@binding(k)`); returns the buffers afterwards.
fn run(wgsl: &str, buffers: &[Vec<u32>], workgroups: u32) -> Vec<Vec<u32>> {
    let translated = translated(wgsl).expect("translates");
    let kernel = Kernel::new(translated.def).expect("a valid Lockstep kernel");
    let client = ComputeClient::inline(SimDevice::new(SimConfig::new(7)), ServerOptions::default());
    let handles: Vec<Handle> = buffers
        .iter()
        .map(|b| client.create(Bytes::from_elems(b)).unwrap())
        .collect();
    let mut args = KernelArguments::new();
    for source in &translated.plan.bindings {
        let BindingSource::Resource(k) = *source else {
            panic!("these kernels take no info words")
        };
        args = args.binding(&handles[k]);
    }
    client
        .launch(&kernel, CubeCount::Static(workgroups, 1, 1), args)
        .unwrap();
    handles
        .into_iter()
        .map(|h| client.read_one(h).unwrap().to_elems::<u32>())
        .collect()
}

fn refused(wgsl: &str) -> Construct {
    translated(wgsl)
        .expect_err("the translator refuses it")
        .construct
}

fn bits(values: &[i32]) -> Vec<u32> {
    values.iter().map(|&v| v as u32).collect()
}

#[test]
fn integer_division_and_remainder_follow_wgsl() {
    let wgsl = "
        @group(0) @binding(0) var<storage, read> a: array<i32>;
        @group(0) @binding(1) var<storage, read> b: array<i32>;
        @group(0) @binding(2) var<storage, read_write> out: array<i32>;
        @compute @workgroup_size(4)
        fn main(@builtin(local_invocation_index) i: u32) {
            out[2u * i] = a[i] / b[i];
            out[2u * i + 1u] = a[i] % b[i];
        }";
    let a = bits(&[7, 7, i32::MIN, -7]);
    let b = bits(&[2, 0, -1, 2]);
    let out = &run(wgsl, &[a, b, vec![0; 8]], 1)[2];
    let expected = [3, 1, 7, 0, i32::MIN, 0, -3, -1];
    assert_eq!(
        out,
        &bits(&expected),
        "x / 0 = x, x % 0 = 0, MIN / -1 = MIN, MIN % -1 = 0"
    );
}

#[test]
fn vectors_are_scalarised_lane_by_lane() {
    let wgsl = "
        @group(0) @binding(0) var<storage, read> v: array<vec4<u32>>;
        @group(0) @binding(1) var<storage, read_write> out: array<vec4<u32>>;
        @group(0) @binding(2) var<storage, read_write> dots: array<u32>;
        @compute @workgroup_size(2)
        fn main(@builtin(local_invocation_index) i: u32) {
            let x = v[i];
            out[i] = x * 2u + vec4<u32>(1u, 2u, 3u, 4u).wzyx;
            dots[i] = dot(x, x) + x[i + 1u];
        }";
    let v = vec![1, 2, 3, 4, 5, 6, 7, 8];
    let result = run(wgsl, &[v, vec![0; 8], vec![0; 2]], 1);
    assert_eq!(result[1], vec![6, 7, 8, 9, 14, 15, 16, 17]);
    assert_eq!(result[2], vec![30 + 2, 174 + 7]);
}

#[test]
fn loops_run_their_continuing_block_at_every_continue() {
    let wgsl = "
        @group(0) @binding(0) var<storage, read_write> out: array<u32>;
        @compute @workgroup_size(1)
        fn main() {
            var sum = 0u;
            var i = 0u;
            loop {
                if i % 2u == 1u { continue; }
                sum += i;
                continuing {
                    i += 1u;
                    break if i >= 10u;
                }
            }
            out[0] = sum;
            out[1] = i;
        }";
    assert_eq!(run(wgsl, &[vec![0; 2]], 1)[0], vec![20, 10]);
}

#[test]
fn switches_are_if_chains_with_the_default_last() {
    let wgsl = "
        @group(0) @binding(0) var<storage, read_write> out: array<u32>;
        @compute @workgroup_size(5)
        fn main(@builtin(local_invocation_index) i: u32) {
            var r = 0u;
            switch i {
                case 0u, 3u: { r = 10u; }
                default: { r = 99u; }
                case 1u: { r = 11u; }
            }
            out[i] = r;
        }";
    assert_eq!(run(wgsl, &[vec![0; 5]], 1)[0], vec![10, 11, 99, 10, 99]);
}

#[test]
fn booleans_live_in_u32_locals_and_convert_as_wgsl_says() {
    let wgsl = "
        @group(0) @binding(0) var<storage, read> x: array<f32>;
        @group(0) @binding(1) var<storage, read_write> out: array<u32>;
        @compute @workgroup_size(4)
        fn main(@builtin(local_invocation_index) i: u32) {
            var flag: bool;
            if x[i] > 1.0 { flag = true; }
            out[3u * i] = select(5u, 6u, flag);
            out[3u * i + 1u] = u32(bool(x[i]));
            out[3u * i + 2u] = u32(x[i]);
        }";
    let x: Vec<u32> = [2.5f32, -0.0, f32::NAN, -3.0]
        .iter()
        .map(|f| f.to_bits())
        .collect();
    let out = &run(wgsl, &[x, vec![0; 12]], 1)[1];
    assert_eq!(
        out,
        &vec![6, 1, 2, 5, 0, 0, 5, 1, 0, 5, 1, 0],
        "u32(-3.0) saturates to 0"
    );
}

#[test]
fn atomics_and_uniform_loads_of_shared_memory() {
    let wgsl = "
        var<workgroup> total: atomic<u32>;
        @group(0) @binding(0) var<storage, read_write> out: array<u32>;
        @compute @workgroup_size(64)
        fn main(@builtin(local_invocation_index) i: u32) {
            atomicAdd(&total, i + 1u);
            atomicSub(&total, 1u);
            workgroupBarrier();
            let seen = workgroupUniformLoad(&total);
            if seen > 0u { workgroupBarrier(); }
            out[i] = seen;
        }";
    assert_eq!(run(wgsl, &[vec![0; 64]], 1)[0], vec![64 * 65 / 2 - 64; 64]);
}

#[test]
fn what_the_ir_cannot_express_is_refused_by_name() {
    let float_rem = "
        @group(0) @binding(0) var<storage, read_write> out: array<f32>;
        @compute @workgroup_size(1) fn main() { out[0] = out[1] % out[2]; }";
    assert_eq!(refused(float_rem), Construct::Semantics("f32 %".to_owned()));
    let array_init = "
        @group(0) @binding(0) var<storage, read_write> out: array<u32>;
        @compute @workgroup_size(1)
        fn main() { var a = array<u32, 2>(1u, 2u); a[out[0]] = 1u; out[1] = a[0]; }";
    assert_eq!(
        refused(array_init),
        Construct::Expression("local array initializer".to_owned())
    );
    let private = "
        var<private> p: u32;
        @group(0) @binding(0) var<storage, read_write> out: array<u32>;
        @compute @workgroup_size(1) fn main() { p = 1u; out[0] = p; }";
    assert!(matches!(refused(private), Construct::Global(_)));
    let exp2 = "
        @group(0) @binding(0) var<storage, read_write> out: array<f32>;
        @compute @workgroup_size(1) fn main() { out[0] = exp2(out[1]); }";
    assert_eq!(refused(exp2), Construct::Math("Exp2".to_owned()));
    let float_atomic = "
        @group(0) @binding(0) var<storage, read_write> out: array<atomic<f32>>;
        @compute @workgroup_size(1) fn main() { atomicStore(&out[0], 1.0); }";
    assert_eq!(
        refused(float_atomic),
        Construct::Type("atomic<Float32>".to_owned())
    );
}

#[test]
fn bitcasts_keep_every_bit_of_floats_and_integers() {
    let wgsl = "
        @group(0) @binding(0) var<storage, read> x: array<u32>;
        @group(0) @binding(1) var<storage, read_write> out: array<u32>;
        @compute @workgroup_size(4)
        fn main(@builtin(local_invocation_index) i: u32) {
            let f = bitcast<f32>(x[i]);
            out[3u * i] = bitcast<u32>(f);
            out[3u * i + 1u] = bitcast<u32>(bitcast<i32>(f) >> 31u);
            out[3u * i + 2u] = bitcast<vec2<u32>>(vec2<f32>(f, f * 2.0)).y;
        }";
    let nan_payload = 0x7fc0_1234;
    let x = vec![
        1.5f32.to_bits(),
        (-0.0f32).to_bits(),
        nan_payload,
        f32::INFINITY.to_bits(),
    ];
    let out = &run(wgsl, &[x.clone(), vec![0; 12]], 1)[1];
    for (i, &word) in x.iter().enumerate() {
        let f = f32::from_bits(word);
        assert_eq!(
            out[3 * i],
            word,
            "a round trip keeps every bit, a NaN's payload included"
        );
        assert_eq!(
            out[3 * i + 1],
            ((word as i32) >> 31) as u32,
            "the sign of {word:#x}"
        );
        if !f.is_nan() {
            assert_eq!(
                out[3 * i + 2],
                (f * 2.0).to_bits(),
                "a vector's bitcast is its lanes'"
            );
        }
    }
}

#[test]
fn integer_bit_functions_are_wgsls() {
    let wgsl = "
        @group(0) @binding(0) var<storage, read> x: array<i32>;
        @group(0) @binding(1) var<storage, read_write> out: array<i32>;
        @compute @workgroup_size(4)
        fn main(@builtin(local_invocation_index) i: u32) {
            let v = x[i];
            out[6u * i] = countOneBits(v);
            out[6u * i + 1u] = countLeadingZeros(v);
            out[6u * i + 2u] = countTrailingZeros(v);
            out[6u * i + 3u] = firstTrailingBit(v);
            out[6u * i + 4u] = firstLeadingBit(v);
            out[6u * i + 5u] = bitcast<i32>(reverseBits(bitcast<u32>(v)));
        }";
    let x = [0, -1, 12, i32::MIN];
    let out = &run(wgsl, &[bits(&x), vec![0; 24]], 1)[1];
    #[rustfmt::skip]
    let expected = [
        0, 32, 32, -1, -1, 0,
        32, 0, 0, 0, -1, -1,
        2, 28, 2, 2, 3, 0x3000_0000,
        1, 0, 31, 31, 30, 1,
    ];
    assert_eq!(out, &bits(&expected));
}

#[test]
fn trunc_round_and_the_inverse_and_hyperbolic_functions() {
    let wgsl = "
        @group(0) @binding(0) var<storage, read> x: array<f32>;
        @group(0) @binding(1) var<storage, read_write> out: array<f32>;
        @compute @workgroup_size(4)
        fn main(@builtin(local_invocation_index) i: u32) {
            let v = x[i];
            out[12u * i] = trunc(v);
            out[12u * i + 1u] = round(v);
            out[12u * i + 2u] = tan(v);
            out[12u * i + 3u] = sinh(v);
            out[12u * i + 4u] = cosh(v);
            out[12u * i + 5u] = asin(v / 4.0);
            out[12u * i + 6u] = acos(v / 4.0);
            out[12u * i + 7u] = atan(v);
            out[12u * i + 8u] = asinh(v);
            out[12u * i + 9u] = acosh(abs(v) + 1.0);
            out[12u * i + 10u] = atanh(v / 4.0);
            out[12u * i + 11u] = atan2(v, 0.5);
        }";
    let x = [2.5f32, -2.5, 0.75, -1.25];
    let input: Vec<u32> = x.iter().map(|f| f.to_bits()).collect();
    let out = &run(wgsl, &[input, vec![0; 48]], 1)[1];
    let out: Vec<f32> = out.iter().map(|&w| f32::from_bits(w)).collect();
    for (i, &v) in x.iter().enumerate() {
        let exact = [v.trunc(), v.round_ties_even()];
        assert_eq!(
            &out[12 * i..12 * i + 2],
            &exact,
            "trunc and round of {v} are exact"
        );
        let host = [
            v.tan(),
            v.sinh(),
            v.cosh(),
            (v / 4.0).asin(),
            (v / 4.0).acos(),
            v.atan(),
            v.asinh(),
            (v.abs() + 1.0).acosh(),
            (v / 4.0).atanh(),
            v.atan2(0.5),
        ];
        for (k, (&got, want)) in out[12 * i + 2..12 * i + 12].iter().zip(host).enumerate() {
            assert!(
                (got - want).abs() <= 1e-5 * want.abs().max(1.0),
                "function {k} of {v}: {got} against {want}"
            );
        }
    }
}

#[test]
fn bitwise_and_compare_exchange_atomics() {
    let wgsl = "
        @group(0) @binding(0) var<storage, read_write> flags: array<atomic<u32>>;
        @group(0) @binding(1) var<storage, read_write> out: array<u32>;
        @compute @workgroup_size(32)
        fn main(@builtin(local_invocation_index) i: u32) {
            atomicOr(&flags[0], 1u << i);
            atomicAnd(&flags[1], ~(1u << i));
            atomicXor(&flags[2], 1u << (i % 4u));
            let won = atomicCompareExchangeWeak(&flags[3], 0u, i + 1u);
            out[2u * i] = won.old_value;
            out[2u * i + 1u] = u32(won.exchanged);
        }";
    let result = run(wgsl, &[vec![0, u32::MAX, 0, 0], vec![0; 64]], 1);
    let winner = result[0][3];
    assert_eq!(&result[0][..3], &[u32::MAX, 0, 0]);
    assert!((1..=32).contains(&winner));
    for (i, pair) in result[1].chunks(2).enumerate() {
        let won = i as u32 + 1 == winner;
        let expected = if won { [0, 1] } else { [winner, 0] };
        assert_eq!(
            pair, &expected,
            "invocation {i}: one exchange wins, the others see its value"
        );
    }
}

#[test]
fn function_arrays_are_local_arrays_zero_at_entry() {
    let wgsl = "
        @group(0) @binding(0) var<storage, read> x: array<u32>;
        @group(0) @binding(1) var<storage, read_write> out: array<u32>;
        @compute @workgroup_size(4)
        fn main(@builtin(local_invocation_index) i: u32) {
            var a: array<vec2<u32>, 3>;
            var flags: array<bool, 2>;
            a[x[i] % 3u].y = i + 10u;
            flags[i & 1u] = true;
            out[4u * i] = a[0].y;
            out[4u * i + 1u] = a[1].y + a[2].x;
            out[4u * i + 2u] = a[2].y;
            out[4u * i + 3u] = u32(flags[0]) + 2u * u32(flags[1]);
        }";
    let out = &run(wgsl, &[vec![0, 1, 2, 4], vec![0; 16]], 1)[1];
    assert_eq!(
        out,
        &vec![10, 0, 0, 1, 0, 11, 0, 2, 0, 0, 12, 1, 0, 13, 0, 2]
    );
}

#[test]
fn an_early_return_ends_the_invocation_and_later_barriers_pass_without_it() {
    let wgsl = "
        var<workgroup> tile: array<u32, 8>;
        @group(0) @binding(0) var<storage, read_write> out: array<u32>;
        @compute @workgroup_size(8)
        fn main(@builtin(local_invocation_index) i: u32) {
            switch i % 3u {
                case 0u: { tile[i] = i; }
                default: { return; }
            }
            workgroupBarrier();
            out[i] = tile[(i + 3u) % 9u] + 100u;
        }";
    assert_eq!(
        run(wgsl, &[vec![0; 8]], 1)[0],
        vec![103, 0, 0, 106, 0, 0, 100, 0]
    );
}
