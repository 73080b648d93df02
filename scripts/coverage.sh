#!/usr/bin/env bash
# Region coverage of runtime/src and sim-device/src reached by the explorer and the conformance
# suite on the simulator alone (`lockstep explore`, `lockstep check`), not by unit tests: the
# reach measure of issue 33. Needs `cargo install cargo-llvm-cov` and `rustup component add
# llvm-tools`. Prints each crate's regions, missed and covered share, and the files that miss
# most; the full report is left in target/llvm-cov-target (`cargo llvm-cov report`).
#
#   bash scripts/coverage.sh [SEEDS]     # SEEDS explored with faults (default 20000)
set -euo pipefail
cd "$(dirname "$0")/.."
seeds=${1:-20000}
export CARGO_INCREMENTAL=0
cargo llvm-cov clean --workspace
run() { cargo llvm-cov run --no-report --release -p lockstep-cli --no-default-features --bin lockstep -- "$@" >/dev/null; }
run explore --seeds "$seeds" --faults --jobs 2 --seed 1
run explore --seeds $((seeds / 2)) --jobs 2 --seed 2
run explore --seeds 100 --ops 1000 --faults --jobs 2 --seed 3
run check --device sim --cases 64 --seed 4
cargo llvm-cov report --release --summary-only | python3 -c '
import re, sys
rows = [l.split() for l in sys.stdin if re.match(r"^[a-z].*\.rs\s", l)]
for prefix in ("runtime/src/", "sim-device/src/"):
    mine = [(int(r[2]), int(r[1]), r[0]) for r in rows if r[0].startswith(prefix)]
    regions, missed = sum(m[1] for m in mine), sum(m[0] for m in mine)
    print(f"{prefix}: {regions} regions, {missed} missed, {100 * (regions - missed) / regions:.2f}% covered")
    for missed_here, total, name in sorted(mine, reverse=True)[:10]:
        print(f"  {name}: {missed_here} of {total} missed")
'
