//! The server's invariants (`Server::check_invariants`): a defect planted in its books is
//! noticed after the task that planted it, and the device is lost naming the broken invariant,
//! once the work queued before has run (the sanitizer sees no memory freed under it); with
//! checks after every task off, a task that panics over broken books loses the device, while
//! one that panics over sound books changes nothing.

use lockstep::{Bytes, ComputeClient, Handle, PlantedDefect, ServerError, ServerOptions};
use lockstep_sim::{SimConfig, SimDevice, SimProbe};

#[expect(dead_code, reason = "these tests launch no kernel")]
mod common;
use common::pinned;

/// A threaded client of a simulator, a clone on another stream, and the simulator's probe.
fn clients(options: ServerOptions) -> ([ComputeClient<SimDevice>; 2], SimProbe) {
    let device = SimDevice::new(SimConfig::new(3));
    let probe = device.probe();
    let c = ComputeClient::with_options(device, options);
    ([pinned(&c, 0), pinned(&c, 1)], probe)
}

fn create(c: &ComputeClient<SimDevice>) -> Handle {
    c.create(Bytes::from_elems(&[1u32, 2, 3, 4])).unwrap()
}

/// The reason every call on every stream now fails with; each call is checked to fail alike.
fn lost_everywhere(a: &ComputeClient<SimDevice>, b: &ComputeClient<SimDevice>) -> String {
    let reasons: Vec<String> = [a.sync(), b.sync(), b.empty(16).map(drop), a.flush()]
        .into_iter()
        .map(|result| match result {
            Err(ServerError::DeviceLost { reason }) => reason,
            other => panic!("expected the device lost, got {other:?}"),
        })
        .collect();
    assert!(
        reasons.iter().all(|r| *r == reasons[0]),
        "one reason everywhere: {reasons:?}"
    );
    assert!(a.memory_usage().is_ok(), "memory usage still answers");
    reasons[0].clone()
}

/// Plants `defect` in a server whose books hold what it needs (`setup`'s handles stay alive
/// meanwhile, its work possibly still queued) and returns the reason the device was lost for.
fn lost_after_planting(
    defect: PlantedDefect,
    setup: impl FnOnce(&ComputeClient<SimDevice>, &ComputeClient<SimDevice>) -> Vec<Handle>,
) -> String {
    let ([a, b], probe) = clients(ServerOptions::default());
    let alive = setup(&a, &b);
    assert!(
        a.plant_defect(defect),
        "the books held what {defect:?} needs"
    );
    let reason = lost_everywhere(&a, &b);
    // The lost server gives its memory back without waiting: only the drain before the loss
    // keeps it from freeing pages under queued work.
    drop((alive, a, b));
    let reports = probe.observations().reports.clone();
    assert!(reports.is_empty(), "sanitizer reports: {reports:?}");
    reason
}

#[test]
fn a_split_free_range_is_noticed() {
    let reason = lost_after_planting(PlantedDefect::SplitFreeRange, |a, _| vec![create(a)]);
    insta::assert_snapshot!(reason);
}

#[test]
fn miscounted_bytes_in_use_are_noticed() {
    let reason = lost_after_planting(PlantedDefect::MiscountBytesInUse, |a, _| vec![create(a)]);
    insta::assert_snapshot!(reason);
}

#[test]
fn a_live_slice_back_in_its_pool_is_noticed() {
    let reason = lost_after_planting(PlantedDefect::FreeLiveSlice, |a, _| vec![create(a)]);
    insta::assert_snapshot!(reason);
}

#[test]
fn a_deferred_free_without_its_events_is_noticed() {
    let reason = lost_after_planting(PlantedDefect::ForgetDeferredFreeEvents, |a, b| {
        // Stream 1 read the buffer, then started capturing: its release waits for an event
        // from stream 0 and for the end of stream 1's capture.
        let x = create(a);
        b.read_one(x.clone()).unwrap();
        b.graph_prepare().unwrap();
        b.start_capture().unwrap();
        drop(x);
        Vec::new()
    });
    insta::assert_snapshot!(reason);
}

#[test]
fn a_miscounted_graph_reference_is_noticed() {
    let reason = lost_after_planting(PlantedDefect::MiscountGraphRef, |a, _| vec![create(a)]);
    insta::assert_snapshot!(reason);
}

#[test]
fn reserved_bytes_over_the_budget_are_noticed() {
    let reason = lost_after_planting(PlantedDefect::TightenBudget, |a, _| vec![create(a)]);
    assert_eq!(
        reason,
        "runtime invariant broken (reserved bytes stay within the device budget): the pools reserve 1048576 bytes, over the device budget of 1048575 bytes"
    );
}

/// Checks only after a panic, on a threaded and an inline client.
fn after_panic_only() -> Vec<[ComputeClient<SimDevice>; 2]> {
    let options = ServerOptions {
        invariant_checks_every_task: false,
        ..ServerOptions::default()
    };
    let inline = ComputeClient::inline(SimDevice::new(SimConfig::new(3)), options);
    vec![clients(options).0, [pinned(&inline, 0), pinned(&inline, 1)]]
}

/// Runs code outside the runtime that panics, on the device's thread (a task of `a`'s stream).
fn panic_in_a_task(a: &ComputeClient<SimDevice>, h: &Handle) {
    let resource = a.get_resource(h.clone()).unwrap();
    let result = resource.with_buffer(|_, _| panic!("outside code failed"));
    match result {
        Err(ServerError::TaskPanicked { message, .. }) => {
            assert_eq!(message, "outside code failed")
        }
        other => panic!("expected the task's panic, got {other:?}"),
    }
}

#[test]
fn a_panic_over_broken_books_loses_the_device_on_every_stream() {
    for [a, b] in after_panic_only() {
        let h = create(&a);
        assert!(a.plant_defect(PlantedDefect::MiscountGraphRef));
        // Unchecked, the defect goes unnoticed...
        a.sync().unwrap();
        b.sync().unwrap();
        // ...until a task panics: the books are checked then.
        panic_in_a_task(&a, &h);
        assert_eq!(
            lost_everywhere(&a, &b),
            "runtime invariant broken (graph references are counted): buffer 0: counted graph references 1, but graphs, pending graph destructions and open captures holding it 0"
        );
        assert!(matches!(a.read_one(h), Err(ServerError::DeviceLost { .. })));
    }
}

#[test]
fn a_panic_over_sound_books_changes_nothing() {
    for [a, b] in after_panic_only() {
        let h = create(&a);
        panic_in_a_task(&a, &h);
        a.sync().unwrap();
        b.sync().unwrap();
        assert_eq!(a.read_one(h).unwrap().to_elems::<u32>(), vec![1, 2, 3, 4]);
        assert_eq!(create(&b).size(), 16);
    }
}

#[test]
fn a_registered_buffer_back_in_flight_is_noticed() {
    let reason = lost_after_planting(PlantedDefect::ReissueInFlight, |a, _| vec![create(a)]);
    assert_eq!(
        reason,
        "runtime invariant broken (a slice served at the call is registered once): buffer 0 is in flight, but a live buffer has its id"
    );
}
