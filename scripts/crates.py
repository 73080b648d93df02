#!/usr/bin/env python3
"""Checks that every workspace crate depends only on crates below it, as ARCHITECTURE.md draws.

    python3 scripts/crates.py     # exits 1 naming each dependency that climbs

Normal, dev and build dependencies all count: a device crate's tests may not use the suite
above it. `ALLOWED` lists the exceptions the map names, each with its reason. The packages
outside the workspace that depend on its crates (`OUTSIDE`) are checked the same way.
"""

import json
import os
import subprocess
import sys

# Bottom first; a crate may depend on crates of lower rows, or of its own row without a cycle
# (cargo refuses cycles of normal dependencies; a dev-dependency cycle is what this forbids).
LAYERS = [
    ["lockstep-runtime"],
    ["lockstep-kernels"],
    ["lockstep-harness"],
    ["lockstep-sim", "lockstep-wgpu", "lockstep-cuda"],
    ["lockstep-conformance", "lockstep-fuzzing", "lockstep-launch", "lockstep-cubecl"],
    ["lockstep-explore"],
    ["lockstep-cli", "lockstep-bench"],
]

# Manifests outside the workspace (each with its own lock file) whose packages are checked too.
OUTSIDE = ["cubecl-lockstep/Cargo.toml"]

ALLOWED = {
    # The runtime's doc examples need a device; the simulator is the one every machine has.
    ("lockstep-runtime", "lockstep-sim"),
}


def packages(manifest=None):
    command = ["cargo", "metadata", "--format-version", "1", "--no-deps", "--offline"]
    if manifest:
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        command += ["--manifest-path", os.path.join(root, manifest)]
    return json.loads(subprocess.check_output(command, text=True))["packages"]


def main():
    row = {name: i for i, names in enumerate(LAYERS) for name in names}
    found = packages() + [p for manifest in OUTSIDE for p in packages(manifest)]
    members = {p["name"]: p for p in found}
    problems = [f"{name} is in no row of LAYERS" for name in members if name not in row]
    edges = set()
    for name, package in members.items():
        for dep in package["dependencies"]:
            if dep["name"] not in row or name not in row:
                continue
            edges.add((name, dep["name"], dep["kind"] or "normal"))
    for a, b, kind in sorted(edges):
        if (a, b) in ALLOWED:
            continue
        if row[b] > row[a] or (row[b] == row[a] and any(
                (b, a, k) in edges for k in ("normal", "dev", "build"))):
            problems.append(f"{a} depends ({kind}) on {b}, which is not below it")
    print(f"crates.py: {len(members)} crates ({len(OUTSIDE)} outside the workspace), "
          f"{len(edges)} dependencies between them, "
          f"{len(problems)} problems")
    for problem in problems:
        print(f"  {problem}")
    if problems:
        sys.exit(1)


if __name__ == "__main__":
    main()
