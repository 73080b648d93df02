#!/usr/bin/env bash
# Runs on a GPU host (no Rust there) from the repository root, with .gpu-pack/ carried from
# scripts/gpu/h200.sh: processes of one world, one GPU each, through `lockstep launch`. The
# launcher and rendezvous alone (no GPU), then the exact all-reduce and ring copy on 2 GPUs (and
# on every GPU when there are more), a rank that stalls or vanishes after one all-reduce (the
# others must fail typed, in bounded time), then all-reduce bandwidth across 2 processes beside
# torch.distributed.all_reduce at the same sizes. Logs go to $OUT when set.
#
# On a host of one GPU it rehearses instead, and says so: both ranks open GPU 0, and a
# different NCCL_HOSTID per rank makes NCCL take them for two hosts (it refuses two ranks of one
# GPU on one host) and connect them over sockets on the loopback interface. The same checks run
# through NCCL's network transport, not NVLink, and the bandwidth runs too, so that the two-GPU
# run meets no untried bench; their figures are the sockets', said so, and measure nothing of
# the goal. That is a rehearsal of the two-GPU run, not a substitute for it.
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
launch=(.gpu/lockstep launch --nproc 2 --)
if [ "$gpus" -eq 1 ]; then
  echo "REHEARSAL on one GPU: ranks share GPU 0, NCCL connects them over loopback sockets"
  export NCCL_SOCKET_IFNAME=lo
  # Each rank on GPU 0, as a host of its own to NCCL.
  launch+=(sh -c 'LOCAL_RANK=0 NCCL_HOSTID="lockstep-rank-$RANK" exec "$@"' rank)
fi
run 30 "${launch[@]}" .gpu/rendezvous-probe
run 120 "${launch[@]}" .gpu/world check
run 120 "${launch[@]}" .gpu/world stall
run 120 "${launch[@]}" .gpu/world vanish
if [ "$gpus" -gt 2 ]; then
  run 120 .gpu/lockstep launch --nproc "$gpus" -- .gpu/world check
  run 120 .gpu/lockstep launch --nproc "$gpus" -- .gpu/world stall
fi
if [ "$gpus" -eq 1 ]; then
  echo "REHEARSAL figures below: loopback sockets on one GPU, not NVLink; not the goal's"
fi
run 180 "${launch[@]}" .gpu/world bench
run 180 "${launch[@]}" python3 scripts/gpu/torch_all_reduce.py
exit $status
