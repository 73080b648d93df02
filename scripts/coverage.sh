#!/usr/bin/env bash
# Region coverage of runtime/src and sim-device/src reached by the explorer and the conformance
# suite on the simulator alone (`lockstep explore`, `lockstep check`), not by unit tests: the
# reach measure of issue 33. Needs `cargo install cargo-llvm-cov` and `rustup component add
# llvm-tools`. The seeds are fixed, so a run's figures are the same on every machine of as many
# cores: on 4 or more, a blocked caller spins first (runtime/src/sync.rs, 17 more regions).
#
#   bash scripts/coverage.sh           # prints each crate's figures and the files that miss most
#   bash scripts/coverage.sh --check   # also fails on a region reach/unreached.toml does not list
#   bash scripts/coverage.sh --update  # rewrites the counts of reach/unreached.toml (keeps reasons)
#
# The JSON export is left in target/llvm-cov-target/reach.json.
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-}
export CARGO_INCREMENTAL=0
cargo llvm-cov clean --workspace
run() {
    cargo llvm-cov run --no-report --release -p lockstep-cli --no-default-features --bin lockstep \
        -- "$@" >/dev/null
}
run explore --seeds 20000 --faults --jobs 2 --seed 1
run explore --seeds 10000 --jobs 2 --seed 2
run explore --seeds 100 --ops 1000 --faults --jobs 2 --seed 3
run check --device sim --cases 64 --seed 4
# A recorded run (issue 32), summarised and replayed: the recorder, the reader and the replay.
recording=$(mktemp -d)
LOCKSTEP_RECORD="$recording/run" run explore --seeds 100 --jobs 1 --seed 5
run recording "$recording/run"
run replay --recording "$recording/run"
# The same run explored (its calls' orders, interleavings and one fault each): the Replayer as
# the explorer feeds it.
run explore --recording "$recording/run" --seeds 4 --seed 6 --faults
rm -rf "$recording"
# A run recorded on an H200 through CUDA (checked in): its kernels' floats differ from the
# simulator's within the tolerance, which the replay's value comparison accepts.
run replay --recording cli/tests/recordings/h200/decode_loop-cuda.rec
json=target/llvm-cov-target/reach.json
cargo llvm-cov report --release --json >"$json"
python3 scripts/reach.py "$json" reach/unreached.toml $mode
