#!/usr/bin/env python3
"""The import graph of a crate's modules: its cycles, and imports that run up its layers.

    python3 scripts/imports.py runtime/src              # cycles and back-arrows, counted
    python3 scripts/imports.py runtime/src --list       # ... and each one named
    python3 scripts/imports.py runtime/src --check      # exits 1 past the goals below

A file imports another when it names a path into it: a `use` (braces expanded) or a path in
code (`crate::a::B`, `super::C`), resolved to the deepest module file the path reaches, then
through that module's `pub use` re-exports to the file that defines the item. `mod x;`
declarations, the crate root (`lib.rs`, which only declares and re-exports) and test modules
(`tests.rs`, `tests/`, an inline `mod tests`) are not imports: tests look at everything.

A cycle is a strongly connected set of two or more files. The layers are those ARCHITECTURE.md
draws, listed in `LAYERS` below, bottom first; a back-arrow is an import from a file of a
lower layer into a file of a higher one. `--check` fails on a cycle of more than two files (a
module and its own child may name each other) or on any back-arrow.
"""

import os
import re
import sys
from collections import defaultdict

# runtime/src's layers, bottom first: each module (a file or a folder, by its path under src
# without `.rs`) may import its own layer and those below. Keep in step with ARCHITECTURE.md.
LAYERS = [
    # The vocabulary: ids and small values every layer speaks, and the concurrency primitives
    # (std's or loom's); imports nothing of the runtime but each other.
    (
        "vocabulary",
        ["ids", "properties", "stream", "invariant", "sync", "oneshot", "block_on", "dry_run"],
    ),
    # Kernels: the IR, its builder, validation and reference semantics.
    ("kernel", ["kernel"]),
    # Values that cross the device boundary or come back from the runtime: errors, bytes and
    # host blocks, collectives' types, profiling's and tuning's results, recorded calls.
    (
        "values",
        ["collective", "error", "bytes", "host_pool", "profiling", "throughput", "record"],
    ),
    # The hardware trait and its contract.
    ("device", ["device"]),
    # The actor: one thread (or a lock, inline) that runs a state's tasks in order.
    ("actor", ["actor"]),
    # The runtime's books and rules above the trait: the pools, then the server.
    ("memory", ["memory"]),
    ("server", ["server"]),
    # The user-facing client and what it hands out.
    (
        "client",
        [
            "registry", "handle", "graph", "layout", "launch", "resource", "client",
        ],
    ),
    # Processes: the rendezvous, over the client's errors.
    ("distributed", ["distributed"]),
    # Every error behind one type, for application code; a recording replayed on any device.
    ("application", ["app_error", "replay"]),
]


def module_of(rel):
    """`a/b.rs` -> ('a', 'b'); `a/mod.rs` -> ('a',); `lib.rs` -> ()."""
    parts = rel[:-3].split("/")
    if parts[-1] in ("mod", "lib", "main"):
        parts = parts[:-1]
    return tuple(parts)


def strip(src):
    """Source without comments and string or char literals (so paths in them do not count)."""
    out, i, n = [], 0, len(src)
    while i < n:
        c = src[i]
        if src.startswith("//", i):
            j = src.find("\n", i)
            i = n if j < 0 else j
        elif src.startswith("/*", i):
            depth, i = 1, i + 2
            while i < n and depth:
                if src.startswith("/*", i):
                    depth, i = depth + 1, i + 2
                elif src.startswith("*/", i):
                    depth, i = depth - 1, i + 2
                else:
                    i += 1
        elif c == "r" and re.match(r'r#*"', src[i:i + 10]) and not re.match(r"\w", src[i - 1]):
            hashes = re.match(r'r(#*)"', src[i:]).group(1)
            end = src.find('"' + hashes, i + len(hashes) + 2)
            i = n if end < 0 else end + 1 + len(hashes)
            out.append('""')
        elif c == '"':
            i += 1
            while i < n and src[i] != '"':
                i += 2 if src[i] == "\\" else 1
            i += 1
            out.append('""')
        elif c == "'" and re.match(r"'(\\.|[^\\'])'", src[i:i + 4]):
            i = src.find("'", i + 2) + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def drop_test_modules(src):
    """Removes `#[cfg(test)] mod name { ... }` blocks (after strip, so braces balance)."""
    while True:
        m = re.search(r"#\[cfg\((all\()?test[^\]]*\]\s*(pub(\([^)]*\))?\s+)?mod\s+\w+\s*\{", src)
        if not m:
            return src
        depth, i = 1, m.end()
        while depth and i < len(src):
            depth += {"{": 1, "}": -1}.get(src[i], 0)
            i += 1
        src = src[:m.start()] + src[i:]


def expand(tree):
    """`a::{b, c::{d, e}}` -> ['a::b', 'a::c::d', 'a::c::e'] (whitespace removed)."""
    tree = re.sub(r"\s+", " ", re.sub(r"\s*(::|\{|\}|,)\s*", r"\1", tree.strip()))
    m = re.search(r"\{", tree)
    if not m:
        return [tree]
    prefix, depth, items, start = tree[:m.start()], 0, [], m.start() + 1
    for i in range(m.start(), len(tree)):
        if tree[i] == "{":
            depth += 1
        elif tree[i] == "}":
            depth -= 1
            if depth == 0:
                items.append(tree[start:i])
                break
        elif tree[i] == "," and depth == 1:
            items.append(tree[start:i])
            start = i + 1
    return [p for item in items if item for p in expand(prefix + item)]


class Crate:
    def __init__(self, root):
        self.root = root
        self.files = {}  # module path -> rel file
        for dirpath, _, names in os.walk(root):
            for name in names:
                if name.endswith(".rs"):
                    rel = os.path.relpath(os.path.join(dirpath, name), root)
                    self.files[module_of(rel)] = rel
        self.src = {}
        for mod, rel in self.files.items():
            with open(os.path.join(root, rel)) as f:
                self.src[mod] = drop_test_modules(strip(f.read()))
        self.reexports = {mod: self._reexports(mod) for mod in self.files}

    def is_test(self, mod):
        return "tests" in mod or (mod and mod[-1].endswith("_tests"))

    def uses(self, mod):
        """Every path the module's `use` declarations name, as (public, path)."""
        for m in re.finditer(r"(\bpub(\([^)]*\))?\s+)?\buse\s+([^;]+);", self.src[mod]):
            for path in expand(m.group(3)):
                yield bool(m.group(1)), re.sub(r"\s+as\s+\w+$", "", path).strip()

    def absolute(self, mod, path):
        """A path as seen from `mod`, made absolute (a tuple of segments), or None if external."""
        segs = [s for s in path.split("::") if s]
        if not segs:
            return None
        base = list(mod)
        if segs[0] == "crate":
            return tuple(segs[1:])
        if segs[0] == "self":
            return tuple(base + segs[1:])
        if segs[0] == "super":
            while segs and segs[0] == "super":
                base, segs = base[:-1], segs[1:]
            return tuple(base + segs)
        if tuple(base + [segs[0]]) in self.files:
            return tuple(base + segs)
        return None

    def _reexports(self, mod):
        """name -> absolute path of the item a `pub use` in `mod` re-exports ('*' for globs)."""
        out = {}
        for public, path in self.uses(mod):
            if not public:
                continue
            target = self.absolute(mod, path)
            if target is None:
                continue
            out.setdefault(target[-1], []).append(target)
        return out

    def resolve(self, path, seen=()):
        """The file an absolute path lands in: the deepest module it reaches, then re-exports."""
        for k in range(len(path), -1, -1):
            if path[:k] in self.files:
                mod, rest = path[:k], path[k:]
                break
        else:
            return None
        if rest and (mod, rest[0]) not in seen:
            for target in self.reexports[mod].get(rest[0], []) + self.reexports[mod].get("*", []):
                if target[-1] == "*":
                    target = target[:-1] + (rest[0],)
                found = self.resolve(target + rest[1:], seen + ((mod, rest[0]),))
                if found is not None and found != mod:
                    return found
        return mod

    def edges(self):
        graph = defaultdict(set)
        for mod in self.files:
            if mod == () or self.is_test(mod):
                continue
            paths = [p for _, p in self.uses(mod)]
            code = re.sub(r"\buse\s+[^;]+;", "", self.src[mod])
            paths += re.findall(r"\b(?:crate|super|self)(?:::\w+)+", code)
            for path in paths:
                target = self.absolute(mod, path)
                if target is None:
                    continue
                found = self.resolve(target)
                if found not in (None, (), mod) and not self.is_test(found):
                    graph[mod].add(found)
        return graph


def cycles(graph, nodes):
    """Strongly connected components of two or more files (Tarjan's algorithm)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return sorted(out, key=len, reverse=True)


def layer_of(mod):
    for rank, (_, prefixes) in enumerate(LAYERS):
        if mod and mod[0] in prefixes:
            return rank
    return None


def name(crate, mod):
    return crate.files[mod]


def main():
    args = sys.argv[1:]
    root = next(a for a in args if not a.startswith("--"))
    crate = Crate(root)
    graph = crate.edges()
    found = cycles(graph, crate.files)
    back = sorted(
        (crate.files[a], crate.files[b])
        for a, targets in graph.items()
        for b in targets
        if layer_of(a) is not None and layer_of(b) is not None and layer_of(b) > layer_of(a)
    )
    unlayered = sorted(crate.files[m] for m in crate.files if m and layer_of(m) is None)
    big = [c for c in found if len(c) > 2]
    print(f"{root}: {len(found)} import cycles ({len(big)} of more than two files, the largest "
          f"{max((len(c) for c in found), default=0)}), {len(back)} back-arrows, "
          f"{sum(len(t) for t in graph.values())} imports between {len(crate.files)} files")
    if "--list" in args or "--check" in args:
        for comp in found:
            print(f"  cycle of {len(comp)}: " + ", ".join(name(crate, m) for m in comp))
        for a, b in back:
            print(f"  back-arrow: {a} -> {b}")
        for rel in unlayered:
            print(f"  in no layer: {rel}")
    if "--check" in args and (big or back or unlayered):
        print("imports.py: the goal is no cycle of more than two files, no back-arrow, every "
              "module in a layer (LAYERS in scripts/imports.py, drawn in ARCHITECTURE.md)")
        sys.exit(1)


if __name__ == "__main__":
    main()
