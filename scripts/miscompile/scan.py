#!/usr/bin/env python3
"""Finds the miscompile of rust-lang/rust#158206 in MIR that `rustc-wrapper` dumps.

rustc 1.95's SimplifyComparisonIntegral rewrites `_c = Eq(x, K); ...; switchInt(move _c)` into
a switch on `x` and deletes the comparison, without checking that nothing between the two reads
`_c`. A statement that still reads `_c` then reads an uninitialised local, which LLVM folds to
anything: `self.lost |= lost` became `self.lost = true` in the explorer's model. The pass's
deletions are the comparisons' locals that a function's `after` dump assigns fewer times than
its `before` dump; each deleted local still read (`copy _c`, `move _c`) after is a miscompile.

    python3 scan.py DUMPS            # one crate build's dumps; exit 1 when one is miscompiled
    python3 scan.py --report FOLDER --expect CRATE,...  # totals of the wrapper's summaries;
                                     # exit 1 on a finding or an expected crate never scanned
    python3 scan.py --self-test      # the scan agrees with running FIXTURE, built here
"""
import collections
import os
import pathlib
import re
import subprocess
import sys
import tempfile

COMPARISON = re.compile(r"^\s*(_\d+) = (?:Eq|Ne|Lt|Le|Gt|Ge)\(.*\);$")
DEFINITION = re.compile(r"^\s*(_\d+) = ")
PASS = "SimplifyComparisonIntegral"
# The smallest program rustc 1.95 miscompiles at opt-level 2 or 3, found in the explorer's model:
# once `lost_by` is inlined, the pass deletes `lost = (discriminant == Lost)` while
# `self.lost |= lost` still reads it, and LLVM folds the uninitialised read to `true`. It exits
# 1 when miscompiled.
FIXTURE = """
pub enum Error { Fault(u32), Lost, Other }

pub struct Model { pub lost: bool }

impl Model {
    fn lost_by(&mut self, err: &Error) -> bool {
        let lost = matches!(err, Error::Lost);
        self.lost |= lost;
        lost
    }

    #[inline(never)]
    pub fn failed(&mut self, err: &Error) -> u32 {
        if self.lost_by(err) {
            return 1;
        }
        2
    }
}

fn main() {
    for err in [Error::Fault(7), Error::Other, Error::Lost] {
        let mut model = Model { lost: false };
        model.failed(std::hint::black_box(&err));
        if model.lost != matches!(err, Error::Lost) {
            std::process::exit(1);
        }
    }
}
"""
SUMMARY = re.compile(r"^(\S+): (\d+) functions rewritten, (\d+) miscompiled$")


def definitions(mir: str) -> collections.Counter:
    """How many statements assign each local."""
    return collections.Counter(m.group(1) for m in map(DEFINITION.match, mir.splitlines()) if m)


def deleted_locals(before: str, after: str) -> list[str]:
    """Locals of a comparison whose definitions the pass deleted (fewer in `after`)."""
    compared = {m.group(1) for m in map(COMPARISON.match, before.splitlines()) if m}
    lost = definitions(before) - definitions(after)
    return sorted(local for local in lost if local in compared)


def reads(local: str, mir: str) -> list[str]:
    """Statements of `mir` that read `local`."""
    read = re.compile(rf"\b(?:copy|move) {local}\b")
    return [line.strip() for line in mir.splitlines() if read.search(line)]


def body(path: pathlib.Path) -> str:
    """The dump's MIR, without its header comment (which names the pass and the side)."""
    return "\n".join(line for line in path.read_text().splitlines() if not line.startswith("//"))


def scan(dumps: pathlib.Path) -> tuple[int, list[str]]:
    """Functions of one crate build the pass rewrote, and one finding per miscompiled read."""
    rewritten, findings = 0, []
    for before_path in sorted(dumps.glob(f"*.{PASS}.before.mir")):
        after_path = before_path.with_name(before_path.name.replace(".before.", ".after."))
        before, after = body(before_path), body(after_path)
        if before == after:
            continue
        rewritten += 1
        function = before_path.name.split(f".{PASS}")[0]
        for local in deleted_locals(before, after):
            findings += [f"{function}: {local} read after its comparison was deleted: {line}"
                         for line in reads(local, after)]
    return rewritten, findings


def scan_crate(dumps: pathlib.Path) -> int:
    """Prints one crate build's summary line (and findings); no dumps means nothing rewritten."""
    rewritten, findings = scan(dumps) if dumps.is_dir() else (0, [])
    for finding in findings:
        print(f"miscompiled (rust-lang/rust#158206): {dumps.name}: {finding}")
    print(f"{dumps.name}: {rewritten} functions rewritten, {len(findings)} miscompiled")
    return 1 if findings else 0


def report(folder: pathlib.Path, expected: set[str]) -> int:
    """Totals over every crate build the wrapper scanned; a crate of `expected` never scanned
    (a build that bypassed the wrapper) is a failure too."""
    builds = rewritten = miscompiled = 0
    scanned = set()
    for summary in sorted(folder.glob("*.scan")):
        for line in summary.read_text().splitlines():
            if line.startswith("miscompiled"):
                print(line)
            elif m := SUMMARY.match(line):
                builds += 1
                scanned.add(m.group(1).rsplit("-", 1)[0])
                rewritten += int(m.group(2))
                miscompiled += int(m.group(3))
    print(f"{PASS} scan (rust-lang/rust#158206): {builds} crate builds, "
          f"{rewritten} functions rewritten, {miscompiled} miscompiled")
    missing = sorted(expected - scanned)
    if missing:
        wrapper = pathlib.Path(__file__).with_name("rustc-wrapper")
        print(f"never scanned: {', '.join(missing)} (built without RUSTC_WRAPPER={wrapper}?)")
    return 1 if miscompiled or missing else 0


def self_test() -> int:
    """Builds FIXTURE at opt-level 1 (no MIR inlining: built right) and 3 (as release builds)
    and runs each: the scan must find a miscompile exactly when the program shows one, so a
    rustc that fixed the pass passes too."""
    version = subprocess.run(["rustc", "--version"], capture_output=True, text=True).stdout.strip()
    failed = 0
    for level in (1, 3):
        shown, found = build_fixture(level)
        verdict = f"opt-level {level}: the fixture {'is' if shown else 'is not'} miscompiled, "
        verdict += f"the scan finds {found} miscompiled reads"
        failed += shown != bool(found)
        print(f"self-test ({version}): {verdict}{'' if shown == bool(found) else ': FAILED'}")
    return 1 if failed else 0


def build_fixture(level: int) -> tuple[bool, int]:
    """Whether FIXTURE built at `level` misbehaves when run, and what the scan finds in it."""
    with tempfile.TemporaryDirectory() as tmp:
        dumps, program = pathlib.Path(tmp, "fixture"), pathlib.Path(tmp, "fixture-bin")
        fixture = pathlib.Path(tmp, "fixture.rs")
        fixture.write_text(FIXTURE)
        env = dict(os.environ, RUSTC_BOOTSTRAP="1")
        subprocess.run(["rustc", f"-Copt-level={level}", f"-Zdump-mir={PASS}",
                        f"-Zdump-mir-dir={dumps}", str(fixture), "-o", str(program)],
                       check=True, env=env)
        shown = subprocess.run([str(program)]).returncode != 0
        return shown, len(scan(dumps)[1])


def main() -> int:
    match sys.argv[1:]:
        case ["--report", folder, "--expect", crates]:
            return report(pathlib.Path(folder), set(crates.split(",")))
        case ["--self-test"]:
            return self_test()
        case [dumps]:
            return scan_crate(pathlib.Path(dumps))
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
