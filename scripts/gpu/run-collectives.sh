#!/usr/bin/env bash
# Runs on a machine with two or more GPUs (no Rust there) from the repository root, with
# .gpu/nccl/ carried from scripts/gpu/collectives.sh: the collective properties on CUDA with
# every GPU, the collectives GPU tests and the all-reduce / to_client benchmark. Logs go to $OUT.
set -uo pipefail
out=${OUT:-/tmp}
# NVLink multicast stays off: a program using it can take the host's GPUs out of service.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
# libnccl.so.2 comes from the Python package nvidia-nccl-cu13; cudarc looks for libnccl.so.
nccl=$(python3 -c 'import nvidia.nccl as m; print(list(m.__path__)[0])')/lib
mkdir -p /tmp/nccl && ln -sf "$nccl/libnccl.so.2" /tmp/nccl/libnccl.so
export LD_LIBRARY_PATH="/tmp/nccl:$nccl:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
echo "libnccl: $(ls "$nccl")"
nvidia-smi --query-gpu=index,name --format=csv,noheader
status=0
# Each step is bounded: a collective whose peer never comes waits inside NCCL without a timeout.
run() {
  local limit=$1
  shift
  echo "== $*"
  timeout "$limit" "$@" 2>&1 | tee -a "$out/collectives.log"
  [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
}
run 120 .gpu/nccl/lockstep check --device cuda --cases "${CASES:-32}" --seed 7 --property all_reduce
run 120 .gpu/nccl/lockstep check --device cuda --cases "${CASES:-32}" --seed 7 --property to_client
# One GPU visible: a world of one device, copies by read-then-write between clients of it.
for property in all_reduce to_client; do
  run 120 env CUDA_VISIBLE_DEVICES=0 .gpu/nccl/lockstep check --device cuda --cases 16 --seed 7 --property "$property"
done
run 120 .gpu/nccl/collectives_tests --test-threads 1
run 180 .gpu/nccl/collectives_bench
exit $status
