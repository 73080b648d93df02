# torch.distributed.all_reduce (NCCL backend) bandwidth across processes, the same figures as
# `lockstep launch --nproc N -- world bench`: f32 sum at 1 MiB, 64 MiB and 256 MiB, algbw
# (bytes of one rank's buffer over the time per operation), the median of 5 rounds of 200
# (1 MiB) or 10 operations, printed by rank 0.
# Run: torchrun --standalone --nproc-per-node N scripts/gpu/torch_all_reduce.py
# (or `lockstep launch --nproc N -- python3 scripts/gpu/torch_all_reduce.py`: same variables).
import os
import time

import torch
import torch.distributed as dist

SIZES_BYTES = [1 << 20, 64 << 20, 256 << 20]
ROUNDS = 5


def main():
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    dist.init_process_group("nccl", device_id=torch.device("cuda", local_rank))
    rank, world = dist.get_rank(), dist.get_world_size()
    if rank == 0:
        print(f"torch all_reduce across {world} processes (f32 sum, algbw GB/s, median of {ROUNDS})")
    for size in SIZES_BYTES:
        reps = 200 if size <= 1 << 20 else 10
        buffer = torch.zeros(size // 4, dtype=torch.float32, device="cuda")

        def round_seconds():
            start = time.perf_counter()
            for _ in range(reps):
                dist.all_reduce(buffer)
            torch.cuda.synchronize()
            return time.perf_counter() - start

        round_seconds()  # warm-up
        seconds = sorted(round_seconds() for _ in range(ROUNDS))[ROUNDS // 2]
        if rank == 0:
            print(f"{size >> 20:>6} MiB  {size * reps / seconds / 1e9:8.1f} GB/s")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
