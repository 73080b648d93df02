//! Worlds that draw a device memory budget: the explorer sets it before the workload, and a
//! workload that reaches it is refused legally (counted with the pool caps' refusals).

use lockstep::MemoryPoolsConfig;
use lockstep_explore::{Simulator, World, run_drawn};

#[test]
fn a_budgeted_world_reaches_its_budget_and_passes() {
    let world = World::draw(0, false).with_ops(Some(400));
    assert_eq!(world.budget_bytes, Some(16 << 20));
    // No pool list is installed, so no pool cap refuses: the refusal is the budget's.
    assert!(!matches!(world.pools, Some(MemoryPoolsConfig::Pools(_))));
    let report = run_drawn(&Simulator, &world);
    assert_eq!(report.failure, None);
    assert_eq!(report.execution.capped_refusals, 1);
}
