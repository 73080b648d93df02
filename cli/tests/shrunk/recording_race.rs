/// `lockstep explore --recording race.rec --seed 1 --seeds 1 --shrink`: 4 calls shrunk
/// to 2 in 4 runs; it failed at a `read`: the result differs from the recorded run.
pub fn recording_seed_1(options: lockstep::ServerOptions) {
    use lockstep::{Bytes, ComputeClient, StreamId, block_on};
    use lockstep::record::{ReadHashes, chunk_hashes};
    use lockstep_sim::{SimConfig, SimDevice};

    let device0 = SimDevice::new(SimConfig {
        watchdog_ns: 1000000000,
        ..SimConfig::new(1)
    });
    let probe0 = device0.probe();
    let client0 = ComputeClient::inline(device0, options);

    // Recorded thread 0's stream 4294967296 of device 0.
    let mut stream0 = client0.clone();
    stream0.set_stream(StreamId(4294967296));
    // Call 0 (create on thread 0).
    let buffer0 = stream0.create(Bytes::from_elems::<u32>(&[0; 1024])).unwrap();
    // Recorded thread 2's stream 4294967298 of device 0.
    let mut stream1 = client0.clone();
    stream1.set_stream(StreamId(4294967298));
    // Call 2 (read on thread 2).
    assert_eq!(
        block_on(stream1.read_async(vec![buffer0.clone()])).map(|read| read.iter().map(|b| chunk_hashes(b)).collect::<Vec<_>>()).ok(),
        Some(vec![ReadHashes { len: 4096, chunks: vec![0x822bbd133f768483] }]),
        "read of call 2 on thread 2 differs from the recorded run"
    );

    // The explorer's drain: every stream synced until it succeeds.
    for _ in 0..4 { if stream0.sync().is_ok() { break; } }
    for _ in 0..4 { if stream1.sync().is_ok() { break; } }
    drop(buffer0);
    let observed = probe0.observations();
    assert!(!observed.watchdog_fired, "hang: the watchdog fired");
    assert!(observed.reports.is_empty(), "sanitizer: {:?}", observed.reports);
}

/// Passes while the program fails as the explorer found.
#[test]
#[should_panic(expected = "differs from the recorded run")]
fn recording_seed_1_reproduced() {
    recording_seed_1(lockstep::ServerOptions::default());
}
