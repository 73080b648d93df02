//! Worlds whose only fault is the explored device's loss have peers: all-reduces and copies
//! meet a lost device, whose peers' waits time out (`PeerTimeout`) instead of hanging, and the
//! explorer accepts a timeout only from a world that lost its device.

use lockstep_explore::{Simulator, World, run_drawn};

/// Seeds scanned for worlds with peers that may lose the explored device.
const SEEDS: u64 = 200;

#[test]
fn worlds_that_lose_a_device_with_peers_pass() {
    let (mut lossy, mut lost) = (0, 0);
    for seed in 0..SEEDS {
        let world = World::draw(seed, true).with_ops(Some(400));
        if world.peers == 0 || world.faults.device_loss == 0.0 {
            continue;
        }
        assert_eq!(
            world.faults.transfer_failure + world.faults.kernel_fault,
            0.0
        );
        let report = run_drawn(&Simulator, &world);
        assert_eq!(report.failure, None, "seed {seed}");
        lossy += 1;
        lost += u32::from(report.execution.device_lost);
    }
    assert!(
        lossy >= 5,
        "{lossy} worlds with peers lose devices in {SEEDS} seeds"
    );
    assert!(lost >= 3, "{lost} of {lossy} such worlds lost the device");
    println!("{lossy} worlds with peers and device loss, {lost} lost the device");
}
