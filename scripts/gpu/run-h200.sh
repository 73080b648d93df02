#!/usr/bin/env bash
# Runs on the H200 machine (no Rust there) from the repository root, with .gpu/ and .gl/ carried
# from scripts/gpu/h200.sh: the conformance suite on CUDA and on Vulkan (wgpu), the CUDA device
# tests, the example and every benchmark. Logs go to $OUT when set.
set -uo pipefail
out=${OUT:-/tmp}
for f in .gl/*.deb; do dpkg -x "$f" /; done
ldconfig
export LOCKSTEP_WGPU_BACKEND=vulkan
status=0
run() {
  echo "== $*"
  "$@" 2>&1 | grep -v XDG_RUNTIME_DIR | tee -a "$out/h200.log" || status=1
}
run .gpu/lockstep check --device cuda --cases 64 --seed 7
run .gpu/lockstep check --device wgpu --cases 64 --seed 7
run .gpu/cuda_tests
run .gpu/decode_loop cuda
run .gpu/decode_loop wgpu
run .gpu/bench
run .gpu/wgpu_bench
run .gpu/graph_bench cuda 2000
run .gpu/graph_bench wgpu 500
exit $status
