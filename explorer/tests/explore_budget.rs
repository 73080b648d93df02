//! Worlds that draw a device memory budget: the explorer sets it before the workload, and a
//! workload that reaches it is refused legally (counted with the pool caps' refusals).

use lockstep::MemoryPoolsConfig;
use lockstep_explore::{Simulator, World, run_drawn};

/// Seeds scanned for budgeted worlds without a pool list.
const SEEDS: u64 = 48;

#[test]
fn budgeted_worlds_reach_their_budget_and_pass() {
    let mut budgeted = 0;
    let mut refused = 0;
    for seed in 0..SEEDS {
        let world = World::draw(seed, false).with_ops(Some(400));
        // Without a pool list no pool cap refuses: a refusal is the budget's.
        if world.budget_bytes.is_none() || matches!(world.pools, Some(MemoryPoolsConfig::Pools(_)))
        {
            continue;
        }
        let report = run_drawn(&Simulator, &world);
        assert_eq!(report.failure, None, "seed {seed}");
        budgeted += 1;
        refused += report.execution.capped_refusals;
    }
    assert!(budgeted >= 3, "{budgeted} budgeted worlds in {SEEDS} seeds");
    assert!(
        refused >= 1,
        "no budgeted world of {budgeted} reached its budget"
    );
    println!("{budgeted} budgeted worlds, {refused} allocations refused by the budget");
}
