#!/usr/bin/env python3
"""PyTorch on the figures of Lockstep's blocking-path benchmark (cuda-device/benches/
runtime_vs_raw.rs and bench/benches/graph.rs), on one GPU, called from Python as a
PyTorch user calls it:

- launches per second of the cheapest kernel PyTorch launches from Python (`x.add_(1)` on one
  element; PyTorch has no empty kernel), then a synchronize;
- a 256 MiB device-to-host read (`.cpu()`, pageable; and into a pinned tensor) and a 256 MiB
  host-to-device write (from a pageable tensor; and from a pinned one), medians of 7 after one
  warm-up;
- `torch.empty(1 MiB)` + drop, the mean of a loop (the caching allocator serves it);
- a 4-byte create -> increment -> read (`torch.tensor`, `add_`, `.item()`), the mean of a loop;
- replays of a CUDA graph of 100 `add_(1)` on one element, in kernels per second.

Prints a table and `FIGURE<TAB>key<TAB>column<TAB>value` lines for scripts/gpu/peers_table.py
(column `pytorch` for what a user gets by default, `pytorch-pinned` for pinned host memory).

Run on the GPU host: python3 scripts/gpu/torch_blocking.py
"""
import statistics
import time

import torch

COPY_BYTES = 256 << 20
COPY_REPS = 7
LAUNCHES = 50_000
LAUNCH_ROUNDS = 3
ALLOC_BYTES = 1 << 20
ALLOC_REPS = 2_000
ROUND_TRIPS = 2_000
GRAPH_KERNELS = 100
GRAPH_REPLAYS = 2_000


def sync():
    torch.cuda.synchronize()


def launches():
    x = torch.zeros(1, dtype=torch.int32, device="cuda")
    best = 0.0
    for _ in range(LAUNCH_ROUNDS):
        sync()
        start = time.perf_counter()
        for _ in range(LAUNCHES):
            x.add_(1)
        sync()
        best = max(best, LAUNCHES / (time.perf_counter() - start))
    assert x.item() == LAUNCHES * LAUNCH_ROUNDS
    return best


def gbs(seconds):
    return COPY_BYTES / seconds / 1e9


def timed(action):
    sync()
    start = time.perf_counter()
    action()
    sync()
    return time.perf_counter() - start


def copies():
    """Median GB/s of (read pageable, read pinned, write pageable, write pinned)."""
    host = (torch.arange(COPY_BYTES, dtype=torch.int64) % 251).to(torch.uint8)
    pinned = host.pin_memory()
    device = torch.empty(COPY_BYTES, dtype=torch.uint8, device="cuda")
    pinned_back = torch.empty(COPY_BYTES, dtype=torch.uint8).pin_memory()
    samples = {"read": [], "read_pinned": [], "write": [], "write_pinned": []}
    for rep in range(COPY_REPS + 1):
        write = timed(lambda: device.copy_(host))
        write_pinned = timed(lambda: device.copy_(pinned, non_blocking=True))
        back = []
        read = timed(lambda: back.append(device.cpu()))
        read_pinned = timed(lambda: pinned_back.copy_(device, non_blocking=True))
        assert torch.equal(back[0], host) and torch.equal(pinned_back, host)
        if rep > 0:  # the first repetition warms up, as in Lockstep's bench
            for key, seconds in [("read", read), ("read_pinned", read_pinned),
                                 ("write", write), ("write_pinned", write_pinned)]:
                samples[key].append(gbs(seconds))
    return {key: statistics.median(values) for key, values in samples.items()}


def allocations():
    def loop(reps):
        for _ in range(reps):
            t = torch.empty(ALLOC_BYTES, dtype=torch.uint8, device="cuda")
            del t

    loop(100)  # warm-up: the caching allocator reserves its block
    sync()
    start = time.perf_counter()
    loop(ALLOC_REPS)
    sync()
    return (time.perf_counter() - start) * 1e6 / ALLOC_REPS


def round_trips():
    def once(i):
        t = torch.tensor([i], dtype=torch.int32, device="cuda")
        t.add_(1)
        assert t.item() == i + 1

    for i in range(100):
        once(i)
    start = time.perf_counter()
    for i in range(ROUND_TRIPS):
        once(i)
    return (time.perf_counter() - start) * 1e6 / ROUND_TRIPS


def graph_replays():
    x = torch.zeros(1, dtype=torch.int32, device="cuda")
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):  # warm-up on a side stream, as CUDA graphs ask
        for _ in range(GRAPH_KERNELS):
            x.add_(1)
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(GRAPH_KERNELS):
            x.add_(1)
    for _ in range(10):
        graph.replay()
    sync()
    x.zero_()
    sync()
    start = time.perf_counter()
    for _ in range(GRAPH_REPLAYS):
        graph.replay()
    sync()
    rate = GRAPH_KERNELS * GRAPH_REPLAYS / (time.perf_counter() - start)
    assert x.item() == GRAPH_KERNELS * GRAPH_REPLAYS
    return rate


def main():
    print(f"PyTorch {torch.__version__} on {torch.cuda.get_device_name(0)}")
    copy = copies()
    rows = [
        ("launches", "pytorch", "launches of x.add_(1), one element", launches(), "launches/s"),
        ("read", "pytorch", "read 256 MiB (.cpu(), pageable)", copy["read"], "GB/s"),
        ("read", "pytorch-pinned", "read 256 MiB into pinned", copy["read_pinned"], "GB/s"),
        ("write_vec", "pytorch", "write 256 MiB from pageable", copy["write"], "GB/s"),
        ("write_vec", "pytorch-pinned", "write 256 MiB from pinned", copy["write_pinned"], "GB/s"),
        ("empty_1mib_drop", "pytorch", "torch.empty(1 MiB) + del", allocations(), "us"),
        ("round_trip_4b", "pytorch", "4-byte tensor -> add_ -> item()", round_trips(), "us"),
        ("graph_replay_100", "pytorch", "100-kernel CUDA graph replay", graph_replays(),
         "kernels/s"),
    ]
    for _, _, what, value, unit in rows:
        print(f"{what:<40} {value:>14.2f} {unit}")
    for key, column, _, value, _ in rows:
        print(f"FIGURE\t{key}\t{column}\t{value}")


if __name__ == "__main__":
    main()
