#!/usr/bin/env bash
# Runs on the H200 machine (no Rust there) from the repository root, with .gpu-pack/ and .gl/
# carried from scripts/gpu/h200.sh: the whole conformance suite on CUDA (every GPU present: the
# collective properties use two) and on Vulkan (wgpu), the CUDA device and collective tests, the
# examples, the faulty kernels under compute-sanitizer, every benchmark and the PyTorch baseline
# (the explorer's runs on the host's cores: explore-h200.sh). Each step is bounded in time; logs
# go to $OUT when set. CASES sets the cases per property (default 64).
set -uo pipefail
source scripts/gpu/unpack.sh
out=${OUT:-/tmp}
# A test or benchmark that finds no GPU, NCCL, NVRTC or Vulkan adapter here fails instead of
# printing SKIPPED and passing: this run exists to check them.
export LOCKSTEP_REQUIRE_GPU=1
for f in .gl/*.deb; do dpkg -x "$f" /; done
ldconfig
# NVLink multicast stays off: it can take a shared host's GPUs out of service.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
# NCCL comes with the machine's Python (nvidia-nccl-cu13); the runtime loads libnccl.so.
if nccl=$(python3 -c 'import nvidia.nccl as m; print(list(m.__path__)[0])' 2>/dev/null); then
  mkdir -p /tmp/nccl && ln -sf "$nccl/lib/libnccl.so.2" /tmp/nccl/libnccl.so
  export LD_LIBRARY_PATH="/tmp/nccl:$nccl/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
export LOCKSTEP_WGPU_BACKEND=vulkan
nvidia-smi --query-gpu=index,name --format=csv,noheader
status=0
run() {
  local limit=$1
  shift
  echo "== $*"
  timeout "$limit" "$@" 2>&1 | grep -v XDG_RUNTIME_DIR | tee -a "$out/h200.log"
  [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
}
cases=${CASES:-64}
run 150 .gpu/lockstep check --device cuda --cases "$cases" --seed 7
run 150 .gpu/lockstep check --device wgpu --cases "$cases" --seed 7
for property in all_reduce to_client; do
  run 60 env CUDA_VISIBLE_DEVICES=0 .gpu/lockstep check --device cuda --cases 16 --seed 7 --property "$property"
done
run 90 .gpu/cuda_tests
run 150 .gpu/suite_tests --test-threads 1
run 60 .gpu/runtime_tests actor::
run 60 .gpu/allocation_tests
run 60 .gpu/collectives_tests --test-threads 1
run 30 .gpu/decode_loop cuda
run 30 .gpu/decode_loop wgpu
run 60 .gpu/real_kernels cuda
run 60 .gpu/real_kernels wgpu
# The kernel sanitizer's faulty kernels under CUDA's own sanitizer, to compare findings with
# `.gpu/faulty_kernels sim` (printed first). compute-sanitizer exits non-zero when it finds
# what these kernels contain, so its status does not fail the run.
sanitizer=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
run 30 .gpu/faulty_kernels sim
for tool in racecheck synccheck; do
  echo "== compute-sanitizer --tool $tool .gpu/faulty_kernels cuda"
  timeout 120 "$sanitizer" --tool "$tool" .gpu/faulty_kernels cuda 2>&1 | tail -n 60 | tee -a "$out/h200.log"
done
# runtime_vs_raw: read 256 MiB, write 256 MiB from a Vec and from staging bytes, each beside raw
# pinned copies, and the write staging sweep (chunk size x threads).
run 120 .gpu/bench
run 60 .gpu/staging_bench
run 60 .gpu/collectives_bench
# The host's price of an NCCL group on a nonblocking rank (every collective's) and a blocking one.
run 60 .gpu/nccl_groups_bench
run 40 .gpu/wgpu_bench
run 40 .gpu/graph_bench cuda 2000
run 40 .gpu/graph_bench wgpu 500
run 60 .gpu/transfers_bench wgpu
# The real kernels' speed, then PyTorch's on the same shapes and the same decode model.
run 120 .gpu/kernels_bench cuda
run 120 .gpu/kernels_bench wgpu
run 180 python3 scripts/gpu/torch_baseline.py
# The blocking path beside the peers (issue 14): cubecl's client on CUDA and Vulkan, PyTorch
# from Python, then one table of every column from the FIGURE lines of this log.
run 120 .gpu/cubecl-peer cuda
run 120 .gpu/cubecl-peer wgpu
run 180 python3 scripts/gpu/torch_blocking.py
python3 scripts/gpu/peers_table.py "$out/h200.log" | tee -a "$out/h200.log"
exit $status
