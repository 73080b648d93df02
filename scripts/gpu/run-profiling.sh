#!/usr/bin/env bash
# Runs on the H200 machine (no Rust there) from the repository root, with .gpu/profiling/ and
# .gl/ carried from scripts/gpu/profiling.sh: the profiling, lazy-read, staging, dry-run,
# resource and throughput properties on CUDA and on Vulkan (wgpu), the CUDA GPU tests of
# staging and get_resource, and the staging benchmark. Logs go to $OUT when set.
set -uo pipefail
out=${OUT:-/tmp}
bin=.gpu/profiling
for f in .gl/*.deb; do dpkg -x "$f" /; done
ldconfig
export LOCKSTEP_WGPU_BACKEND=vulkan
status=0
run() {
  echo "== $*"
  "$@" 2>&1 | grep -v XDG_RUNTIME_DIR | tee -a "$out/profiling.log" || status=1
}
properties="profiling lazy_reads staging dry_runs resources throughput_cache"
for device in cuda wgpu; do
  for property in $properties; do
    run "$bin/lockstep" check --device "$device" --cases "${CASES:-32}" --seed 7 --property "$property"
  done
done
run "$bin/cuda_tests" staged_bytes get_resource
run "$bin/staging_bench"
exit $status
