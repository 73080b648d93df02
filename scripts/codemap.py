#!/usr/bin/env python3
"""Checks that ARCHITECTURE.md's code map names every Rust file of the repository.

    python3 scripts/codemap.py            # exits 1 naming each file the map leaves out

The code map is the section `## Code map`; inside it, each `### ` heading opens a folder's
part, and the heading's first `code span` is that folder (`runtime/`, `fuzz/driver/`). A file
under the folder is named when a code span of its part is the file's path relative to the
folder or to the folder's `src/` (`server/capture.rs`, `tests/`, `main.rs`), or a folder that
holds it (a span ending in `/`). A `.rs` file git tracks (or would track) and no part covers
is a failure, as is a name of a file or folder that ends no path inside its part (a file may
be named relative to a folder named before it: `ir.rs` after `kernel/`), so the map cannot
drift either way. The page stays within the line limit below.
"""

import os
import re
import subprocess
import sys

MAP = "ARCHITECTURE.md"
MAX_LINES = 360


def rust_files(root):
    return sorted(p for p in tracked(root, "*.rs") if os.path.exists(os.path.join(root, p)))


def tracked(root, pattern):
    out = subprocess.check_output(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", pattern],
        cwd=root, text=True)
    return out.splitlines()


def is_path(span):
    """Whether a code span names a file or folder (not `n/a` or `a::b`)."""
    return span.endswith((".rs", ".md", "/")) and "::" not in span


def parts(text):
    """{folder: [code spans]} for each `### ` part of the code map."""
    match = re.search(r"^## Code map\n(.*?)(?=^## |\Z)", text, re.S | re.M)
    if not match:
        sys.exit(f"codemap.py: {MAP} has no `## Code map` section")
    out = {}
    for block in re.split(r"^### ", match.group(1), flags=re.M)[1:]:
        heading, _, body = block.partition("\n")
        spans = re.findall(r"`([^`\s]+)`", heading)
        if not spans or not spans[0].endswith("/"):
            sys.exit(f"codemap.py: the part `### {heading}` names no folder first")
        out[spans[0]] = re.findall(r"`([^`\s]+)`", body) + spans[1:]
    return out


def candidates(folder, span):
    """Paths from the repository root that `span`, named in `folder`'s part, may mean."""
    span = span.split("::")[0]
    return [folder + span, folder + "src/" + span]


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    text = open(os.path.join(root, MAP)).read()
    lines = text.count("\n")
    found = parts(text)
    missing, stale = [], []
    files = rust_files(root) + tracked(root, "*.md")
    for folder, spans in found.items():
        if not os.path.isdir(os.path.join(root, folder)):
            stale.append(f"part {folder}: no such folder")
        inside = [p for p in files if p.startswith(folder)]
        for span in filter(is_path, spans):
            # A name may be given relative to the folder, its src/, or a folder named before it
            # in the same sentence (`ir.rs` of `kernel/`): it must end a path inside the part.
            if not any(("/" + p).endswith("/" + span) or ("/" + p).count("/" + span) for p in inside):
                stale.append(f"part {folder}: `{span}` names nothing")
    for path in rust_files(root):
        folder = max((f for f in found if path.startswith(f)), key=len, default=None)
        if folder is None:
            missing.append(f"{path} (no part of the map holds its folder)")
            continue
        named = set()
        for span in found[folder]:
            for c in candidates(folder, span):
                named.add(c)
        if path not in named and not any(n.endswith("/") and path.startswith(n) for n in named):
            missing.append(path)
    print(f"codemap.py: {MAP} has {lines} lines; its map has {len(found)} parts; "
          f"{len(missing)} Rust files unnamed, {len(stale)} names stale")
    for m in missing:
        print(f"  unnamed: {m}")
    for s in stale:
        print(f"  stale: {s}")
    if missing or stale or lines > MAX_LINES:
        if lines > MAX_LINES:
            print(f"  {MAP} is over {MAX_LINES} lines: the map fits on a few screens")
        sys.exit(1)


if __name__ == "__main__":
    main()
