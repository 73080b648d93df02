#!/usr/bin/env bash
# Runs on a GPU host (no Rust there) from the repository root, with .gpu-pack/ carried from
# scripts/gpu/h200.sh: processes of one world, one GPU each, through `lockstep launch`. The
# launcher and rendezvous alone (no GPU), then the exact all-reduce and ring copy on 2 GPUs (and
# on every GPU when there are more), then all-reduce bandwidth across 2 processes beside
# torch.distributed.all_reduce at the same sizes. Logs go to $OUT when set.
set -uo pipefail
source scripts/gpu/unpack.sh
out=${OUT:-/tmp}
export LOCKSTEP_REQUIRE_GPU=1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
if nccl=$(python3 -c 'import nvidia.nccl as m; print(list(m.__path__)[0])' 2>/dev/null); then
  mkdir -p /tmp/nccl && ln -sf "$nccl/lib/libnccl.so.2" /tmp/nccl/libnccl.so
  export LD_LIBRARY_PATH="/tmp/nccl:$nccl/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
gpus=$(nvidia-smi --query-gpu=index --format=csv,noheader | wc -l)
status=0
run() {
  local limit=$1
  shift
  echo "== $*"
  timeout "$limit" "$@" 2>&1 | tee -a "$out/world.log"
  [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
}
run 30 .gpu/lockstep launch --nproc 2 -- .gpu/rendezvous-probe
run 120 .gpu/lockstep launch --nproc 2 -- .gpu/world check
if [ "$gpus" -gt 2 ]; then
  run 120 .gpu/lockstep launch --nproc "$gpus" -- .gpu/world check
fi
run 180 .gpu/lockstep launch --nproc 2 -- .gpu/world bench
run 180 .gpu/lockstep launch --nproc 2 -- python3 scripts/gpu/torch_all_reduce.py
exit $status
