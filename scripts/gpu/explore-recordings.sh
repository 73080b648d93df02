#!/usr/bin/env bash
# Here, on what scripts/gpu/record-h200.sh recorded on the H200 (DIR, default
# .gpu-rec/recordings): each recording's summary, its replay on the simulator with every read
# checked, and the explorer on it: the buggy proof programs within 100 seeds (each must fail),
# their fixed versions over 10,000 seeds (each must pass).
set -uo pipefail
cd "$(dirname "$0")/../.."
dir="${1:-.gpu-rec/recordings}"
lockstep() { cargo run --release -q -p lockstep-cli --bin lockstep -- "$@"; }
status=0
expect() { # expect pass|fail COMMAND...
  local want=$1; shift
  echo "== $* (expected to $want)"
  if "$@"; then got=pass; else got=fail; fi
  [ "$got" = "$want" ] || { echo "== UNEXPECTED: $got"; status=1; }
}
for rec in "$dir"/*.rec; do
  lockstep recording "$rec" || status=1
done
for rec in "$dir"/decode_loop-*.rec "$dir"/real_kernels-*.rec; do
  expect pass lockstep replay --recording "$rec"
done
for program in race-threads missing-barrier; do
  expect fail lockstep explore --recording "$dir/$program.rec" --seeds 100
  expect pass lockstep explore --recording "$dir/$program-fixed.rec" --seeds 10000
done
exit "$status"
