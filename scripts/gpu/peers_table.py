#!/usr/bin/env python3
"""One table of the blocking-path figures with every column: Lockstep, raw driver calls,
cubecl and PyTorch, each peer's speed as a ratio to Lockstep's.

Reads `FIGURE<TAB>key<TAB>column<TAB>value` lines from the logs named on the command line (or
stdin): `.gpu/bench` and `.gpu/graph_bench cuda` (columns lockstep-cuda, raw-cuda), the cubecl
peer (cubecl-cuda, cubecl-wgpu) and scripts/gpu/torch_blocking.py (pytorch, pytorch-pinned).
A ratio above 1.00 means Lockstep is faster; a missing figure reads `-`.

Run: python3 scripts/gpu/peers_table.py LOG...
"""
import fileinput

# key: (what, unit, higher is better)
FIGURES = {
    "read": ("read 256 MiB", "GB/s", True),
    "write_vec": ("write 256 MiB from a Vec / host memory", "GB/s", True),
    "empty_1mib_drop": ("empty(1 MiB) + drop", "us", False),
    "round_trip_4b": ("4-byte create -> launch -> read", "us", False),
    "launches": ("launches of an empty kernel", "launches/s", True),
    "graph_replay_100": ("100-kernel graph replay", "kernels/s", True),
}
COLUMNS = ["lockstep-cuda", "raw-cuda", "cubecl-cuda", "pytorch", "pytorch-pinned", "cubecl-wgpu"]
# Lockstep's CUDA figures are compared with the CUDA peers only (cubecl-wgpu is for reading).
COMPARED = COLUMNS[1:5]


def read_figures(lines):
    figures = {}
    for line in lines:
        parts = line.rstrip("\n").split("\t")
        if len(parts) == 4 and parts[0] == "FIGURE":
            _, key, column, value = parts
            figures[(key, column)] = float(value)
    return figures


def speed_of_lockstep(ours, theirs, higher_is_better):
    return ours / theirs if higher_is_better else theirs / ours


def main():
    figures = read_figures(fileinput.input())
    header = f"{'figure':<40} {'unit':>10}" + "".join(f" {c:>14}" for c in COLUMNS)
    print(header)
    for key, (what, unit, higher) in FIGURES.items():
        cells = [figures.get((key, column)) for column in COLUMNS]
        row = "".join(f" {'-' if v is None else f'{v:.2f}':>14}" for v in cells)
        print(f"{what:<40} {unit:>10}{row}")
    print("\nLockstep's speed over each column's (above 1.00: Lockstep is faster):")
    print(f"{'figure':<40} {'':>10}" + "".join(f" {c:>14}" for c in COMPARED))
    for key, (what, _, higher) in FIGURES.items():
        ours = figures.get((key, "lockstep-cuda"))
        cells = []
        for column in COMPARED:
            theirs = figures.get((key, column))
            ok = ours is not None and theirs is not None
            cells.append(f"{speed_of_lockstep(ours, theirs, higher):.2f}" if ok else "-")
        print(f"{what:<40} {'':>10}" + "".join(f" {c:>14}" for c in cells))


if __name__ == "__main__":
    main()
