#!/usr/bin/env python3
"""Judges the reach of `lockstep explore` and `lockstep check` measured by code coverage.

Reads the JSON export of `cargo llvm-cov report --json` (scripts/coverage.sh makes it) and the
checked-in list of unreached regions (reach/unreached.toml: per file of runtime/src and
sim-device/src, how many regions the run leaves unreached and why). Prints each crate's region
coverage and the files that miss most; with --check, fails when a file leaves more regions
unreached than the list gives it (naming the functions that miss), or lists no reason; with
--update, rewrites the counts of the list, keeping its reasons.

Usage: python3 scripts/reach.py EXPORT.json reach/unreached.toml [--check | --update]
"""

import collections
import json
import os
import re
import sys
import tomllib

CRATES = ("runtime/src/", "sim-device/src/")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def relative(path):
    return os.path.relpath(path, ROOT)


FN = re.compile(r"\bfn\s+(\w+)")
SOURCES = {}


def enclosing_fn(name, line):
    """`name:line` of the `fn` that encloses `line` of file `name` (the nearest one above it),
    read from the source: the export's symbol names are v0-mangled."""
    if name not in SOURCES:
        SOURCES[name] = open(os.path.join(ROOT, name)).read().split("\n")
    for number in range(line, 0, -1):
        found = FN.search(SOURCES[name][number - 1])
        if found:
            return f"{found.group(1)}:{number}"
    return "(top level)"


def measure(export):
    """Per file of the crates: (regions, unreached) from the file summaries, and the unreached
    code regions per function (a region reached by any instantiation counts as reached)."""
    data = json.load(open(export))["data"][0]
    files = {}
    for f in data["files"]:
        name = relative(f["filename"])
        if name.startswith(CRATES):
            regions = f["summary"]["regions"]
            files[name] = (regions["count"], regions["notcovered"])
    reached, unreached = set(), set()
    for function in data["functions"]:
        filenames = function["filenames"]
        for line, col, end_line, end_col, count, file_id, _, kind in function["regions"]:
            if kind != 0:
                continue
            name = relative(filenames[file_id])
            if not name.startswith(CRATES):
                continue
            span = (name, line, col, end_line, end_col)
            if count > 0:
                reached.add(span)
            else:
                unreached.add(span)
    by_function = collections.defaultdict(collections.Counter)
    for span in sorted(unreached - reached):
        by_function[span[0]][enclosing_fn(span[0], span[1])] += 1
    return files, by_function


def summary(files):
    for prefix in CRATES:
        mine = {name: v for name, v in files.items() if name.startswith(prefix)}
        regions = sum(v[0] for v in mine.values())
        missed = sum(v[1] for v in mine.values())
        share = 100 * (regions - missed) / regions if regions else 0.0
        print(f"reach: {prefix} {regions} regions, {missed} unreached, {share:.2f}% reached")
        worst = sorted(((v[1], v[0], n) for n, v in mine.items() if v[1]), reverse=True)[:8]
        for missed_here, total, name in worst:
            print(f"  {name}: {missed_here} of {total} unreached")


def check(files, by_function, listed):
    problems = []
    for name, (_, missed) in sorted(files.items()):
        entry = listed.get(name, {})
        allowed = entry.get("unreached", 0)
        if missed > 0 and not entry.get("reason", "").strip():
            problems.append(f"{name}: {missed} regions unreached and no reason listed")
        if missed > allowed:
            worst = ", ".join(f"{f} ({n})" for f, n in by_function[name].most_common(6))
            problems.append(f"{name}: {missed} regions unreached, the list allows {allowed}: {worst}")
        elif missed < allowed:
            print(f"note: {name} leaves {missed} regions unreached, the list allows {allowed} "
                  "(lower it: bash scripts/coverage.sh --update)")
    for name in sorted(set(listed) - set(files)):
        problems.append(f"{name}: listed, but no such file was measured")
    return problems


def update(path, files, listed):
    lines = [open(path).read().split("\n[")[0].rstrip() + "\n"] if os.path.exists(path) else []
    for name, (_, missed) in sorted(files.items()):
        if missed == 0:
            continue
        reason = listed.get(name, {}).get("reason", "")
        lines.append(f'\n["{name}"]\nunreached = {missed}\nreason = {json.dumps(reason, ensure_ascii=False)}\n')
    open(path, "w").write("".join(lines))


def main():
    export, list_path, *mode = sys.argv[1:]
    files, by_function = measure(export)
    summary(files)
    listed = tomllib.load(open(list_path, "rb")) if os.path.exists(list_path) else {}
    if mode == ["--update"]:
        update(list_path, files, listed)
        print(f"reach: rewrote {list_path}")
        return 0
    problems = check(files, by_function, listed)
    for problem in problems:
        print(f"reach: {problem}")
    if mode == ["--check"] and problems:
        print(f"reach: {len(problems)} problems (reach/unreached.toml lists what may go unreached)")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
