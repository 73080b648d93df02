#!/usr/bin/env bash
# Runs on a GPU host's CPU cores (no Rust there) from the repository root, with .gpu-pack/ carried
# from scripts/gpu/h200.sh: the explorer's rate on one core, beside a build of an earlier commit
# when one is carried as .gpu/lockstep-baseline (same machine, same run: simulated operations
# per second compare, since seeds of two builds may draw different workloads), then the
# ensemble on every core. Logs go to $OUT when set.
#
# A baseline, built here before carrying:
#   git worktree add /tmp/base <commit> && (cd /tmp/base && cargo build --release -p lockstep-cli --bin lockstep)
#   cp /tmp/base/target/release/lockstep .gpu/lockstep-baseline && strip .gpu/lockstep-baseline
#   tar -C .gpu -cf - . | xz -6 -T0 > .gpu-pack/gpu.tar.xz
set -uo pipefail
source scripts/gpu/unpack.sh
out=${OUT:-/tmp}
# As in run-h200.sh: on the GPU host nothing may skip for want of hardware.
export LOCKSTEP_REQUIRE_GPU=1
status=0
run() {
  local limit=$1
  shift
  echo "== $*"
  # The summary lines (a coverage report's per-method table goes to the log only).
  timeout "$limit" "$@" >"$out/last.log" 2>&1
  local rc=$?
  cat "$out/last.log" >>"$out/explore.log"
  grep -E '^(explore|throughput|[0-9]+ passed|coverage|never hit|seed [0-9]+ FAILED|  lockstep replay)' "$out/last.log" | head -n 20
  [ "$rc" -eq 0 ] || status=1
}
nproc
for faults in --faults ""; do
  run 200 .gpu/lockstep explore --seeds 4000 --seed 11 $faults --jobs 1
  if [ -x .gpu/lockstep-baseline ]; then
    run 200 .gpu/lockstep-baseline explore --seeds 2000 --seed 11 $faults --jobs 1
  fi
done
jobs=$(nproc)
run 300 .gpu/lockstep explore --seeds 100000 --seed 1000000 --faults --coverage --jobs "$jobs"
run 300 .gpu/lockstep explore --seeds 50000 --seed 2000000 --jobs "$jobs"
run 300 .gpu/lockstep explore --seeds 2000 --seed 3000000 --ops 1000 --faults --jobs "$jobs"
exit $status
