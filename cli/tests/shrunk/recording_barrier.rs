/// `lockstep explore --recording barrier.rec --seed 0 --seeds 1 --shrink`: 6 calls shrunk
/// to 3 in 9 runs; it failed at a `launch`: sanitizer: Kernel(Race).
pub fn recording_seed_0(options: lockstep::ServerOptions) {
    use lockstep::{Bytes, ComputeClient, CubeCount, Kernel, KernelArguments, StreamId};
    use lockstep_sim::{SimConfig, SimDevice};

    let device0 = SimDevice::new(SimConfig {
        watchdog_ns: 1000000000,
        ..SimConfig::new(0)
    });
    let probe0 = device0.probe();
    let client0 = ComputeClient::inline(device0, options);
    // `rotate_in_workgroup_missing_barrier`, as recorded.
    let kernel0 = Kernel::new(serde_json::from_str(r##"{"name":"rotate_in_workgroup_missing_barrier","workgroup_size":[32,1,1],"bindings":[{"elem":"U32","access":"Read"},{"elem":"U32","access":"ReadWrite"}],"params":[],"locals":[],"shared":[{"elem":"U32","len":32}],"local_arrays":[],"body":[{"Store":{"array":{"Shared":0},"index":{"Builtin":{"LocalId":"X"}},"value":{"Load":{"array":{"Binding":0},"index":{"Builtin":{"GlobalId":"X"}}}}}},{"Store":{"array":{"Binding":1},"index":{"Builtin":{"GlobalId":"X"}},"value":{"Load":{"array":{"Shared":0},"index":{"Binary":{"op":"Rem","lhs":{"Binary":{"op":"Add","lhs":{"Builtin":{"LocalId":"X"}},"rhs":{"Lit":{"U32":1}}}},"rhs":{"Lit":{"U32":32}}}}}}}}]}"##).unwrap()).unwrap();

    // Recorded thread 0's stream 4294967296 of device 0.
    let mut stream0 = client0.clone();
    stream0.set_stream(StreamId(4294967296));
    // Call 0 (create on thread 0).
    let buffer0 = stream0.create(Bytes::from_elems::<u32>(&[
        2, 9, 16, 23, 30, 37, 44, 51,
        58, 65, 72, 79, 86, 93, 100, 107,
        114, 121, 128, 135, 142, 149, 156, 163,
        170, 177, 184, 191, 198, 205, 212, 219,
        226, 233, 240, 247, 254, 261, 268, 275,
        282, 289, 296, 303, 310, 317, 324, 331,
        338, 345, 352, 359, 366, 373, 380, 387,
        394, 401, 408, 415, 422, 429, 436, 443,
        450, 457, 464, 471, 478, 485, 492, 499,
        506, 513, 520, 527, 534, 541, 548, 555,
        562, 569, 576, 583, 590, 597, 604, 611,
        618, 625, 632, 639, 646, 653, 660, 667,
        674, 681, 688, 695, 702, 709, 716, 723,
        730, 737, 744, 751, 758, 765, 772, 779,
        786, 793, 800, 807, 814, 821, 828, 835,
        842, 849, 856, 863, 870, 877, 884, 891,
    ])).unwrap();
    // Call 1 (create on thread 0).
    let buffer1 = stream0.create(Bytes::from_elems::<u32>(&[0; 128])).unwrap();
    // Call 2 (launch on thread 0).
    stream0.launch(&kernel0, CubeCount::Static(4, 1, 1), KernelArguments::new().binding(&buffer0).binding(&buffer1)).unwrap();

    // The explorer's drain: every stream synced until it succeeds.
    for _ in 0..4 { if stream0.sync().is_ok() { break; } }
    drop(buffer0);
    drop(buffer1);
    let observed = probe0.observations();
    assert!(!observed.watchdog_fired, "hang: the watchdog fired");
    assert!(observed.reports.is_empty(), "sanitizer: {:?}", observed.reports);
}

/// Passes while the program fails as the explorer found.
#[test]
#[should_panic(expected = "sanitizer")]
fn recording_seed_0_reproduced() {
    recording_seed_0(lockstep::ServerOptions::default());
}
