#!/usr/bin/env python3
"""Runs cubecl's suite on a Lockstep device (tests/suite.rs on the simulator, suite_wgpu.rs,
suite_cuda.rs) and holds it to expected.toml.

Fails when a test outside the list fails, when a listed test passes (take it off the list),
when the list names a test the suite does not have, and when a passing test launched a kernel
that was refused without the list saying it tests a refusal. Counts apart the tests that pass
without launching a kernel (the launch log, `LOCKSTEP_CUBECL_LAUNCH_LOG`, names each launch's
test): those return early because a feature is not declared, unless the list says they test
the server without a kernel.

Prints what the simulator's kernel sanitizer found (races, barriers in divergent control flow,
reads of unwritten shared memory), by test: reported only, unless `--findings fail`, which
makes each finding fail its launch (and so its test).

Usage: python3 cubecl-lockstep/check_suite.py [--device sim|wgpu|cuda] [--binary PATH]
           [--findings report|fail] [--verbose] [-- extra libtest arguments]
`--binary` runs a suite binary built elsewhere (the GPU host has no cargo). Cargo's target
directory is CARGO_TARGET_DIR, else cubecl-lockstep/target.
"""

import argparse

import collections
import os
import re
import subprocess
import sys
import tempfile
import time
import tomllib

HERE = os.path.dirname(os.path.abspath(__file__))
PREFIX = "cubecl::"
RESULT = re.compile(r"^test (\S+) \.\.\. (ok|FAILED|ignored)", re.MULTILINE)


# Per device: the suite's test target and the features it needs.
DEVICES = {"sim": ("suite", []), "wgpu": ("suite_wgpu", ["--features", "wgpu"]), "cuda": ("suite_cuda", ["--features", "cuda"])}


def run_suite(args, log_path):
    env = dict(os.environ, LOCKSTEP_CUBECL_LAUNCH_LOG=log_path, LOCKSTEP_CUBECL_FINDINGS=args.findings)
    env.setdefault("CARGO_TARGET_DIR", os.path.join(HERE, "target"))
    target, features = DEVICES[args.device]
    if args.binary:
        command = [args.binary, *args.extra]
    else:
        command = ["cargo", "test", "--manifest-path", os.path.join(HERE, "Cargo.toml"), *features, "--test", target, "--", *args.extra]
    started = time.monotonic()
    done = subprocess.run(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return done.stdout, time.monotonic() - started


def read_log(path):
    """Per test that launched a kernel, its launches as (stream, kernel); the launches whose
    kernel did not compile, likewise; the sanitizer's findings as (stream, kernel, kind)."""
    launched, refused, findings = collections.defaultdict(set), set(), collections.Counter()
    with open(path) as log:
        for line in log:
            fields = line.rstrip("\n").split("\t")
            if fields[0] == "launched" and len(fields) == 4:
                launched[fields[1].removeprefix(PREFIX)].add((fields[2], fields[3]))
            elif fields[0] == "refused" and len(fields) == 3:
                refused.add((fields[1], fields[2]))
            elif fields[0] == "finding" and len(fields) == 5:
                findings[(fields[1], fields[2], fields[3])] += 1
    return launched, refused, findings


def findings_by_test(launched, findings):
    """Each finding's test (the one that launched its kernel on its stream), as lines."""
    owner = {launch: test for test, launches in launched.items() for launch in launches}
    lines = []
    for (stream, kernel, kind), times in sorted(findings.items()):
        test = owner.get((stream, kernel), f"(stream {stream})")
        lines.append(f"  {test}: {kind} in `{kernel}` ({times} reports)")
    return sorted(lines)


def classify(results, expected, launched, refused):
    """The counts and every disagreement with the list."""
    failures, no_kernel, refusals = (expected.get(k, {}) for k in ("failures", "no-kernel", "refusals"))
    problems, counts, skipped = [], collections.Counter(), []
    for name in sorted(set(failures) | set(no_kernel) | set(refusals)):
        if name not in results:
            problems.append(f"expected.toml names {name}, which the suite does not have")
    for name, outcome in sorted(results.items()):
        if outcome == "ignored":
            counts["ignored"] += 1
        elif outcome == "FAILED" and name in failures:
            counts["failures: " + failures[name].split(":")[0]] += 1
        elif outcome == "FAILED":
            problems.append(f"{name} failed, and expected.toml does not list it")
        elif name in failures:
            problems.append(f"{name} passed, but expected.toml lists it as failing: take it off the list")
        elif name not in launched and name not in no_kernel:
            counts["skipped (undeclared feature)"] += 1
            skipped.append(name)
        elif launched.get(name, set()) & refused and name not in refusals:
            kernels = sorted(kernel for _, kernel in launched[name] & refused)
            problems.append(f"{name} passed although a kernel it launched was refused: {kernels}")
        elif launched.get(name, set()) - refused:
            counts["passed running kernels"] += 1
        elif name in launched:
            counts["passed, its kernels refused as it tests"] += 1
        else:
            counts["passed without a kernel"] += 1
    return counts, problems, skipped


def parse_args():
    argv = sys.argv[1:]
    extra = argv[argv.index("--") + 1:] if "--" in argv else []
    argv = argv[:argv.index("--")] if "--" in argv else argv
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=sorted(DEVICES), default="sim")
    parser.add_argument("--binary", help="a suite binary built elsewhere, run instead of cargo")
    parser.add_argument("--findings", choices=["report", "fail"], default="report")
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args(argv)
    args.extra = extra
    return args


def main():
    args = parse_args()
    with open(os.path.join(HERE, "expected.toml"), "rb") as f:
        expected = tomllib.load(f)
    with tempfile.TemporaryDirectory() as tmp:
        log_path = os.path.join(tmp, "launches.log")
        open(log_path, "w").close()
        output, seconds = run_suite(args, log_path)
        launched, refused, findings = read_log(log_path)
    results = {m.group(1).removeprefix(PREFIX): m.group(2) for m in RESULT.finditer(output)}
    if not results:
        print(output)
        sys.exit("check_suite: the suite did not run (no test results above)")
    counts, problems, skipped = classify(results, expected, launched, refused)
    if args.verbose or problems:
        print("skipped (no kernel launched, not listed as testing the server alone):")
        print("".join(f"  {name}\n" for name in skipped), end="")
    failures = sum(n for k, n in counts.items() if k.startswith("failures"))
    print(f"cubecl suite on Lockstep's {args.device} device, {seconds:.1f} s (cargo included unless --binary):")
    passed = ("passed running kernels", "passed, its kernels refused as it tests", "passed without a kernel")
    print(f"  {sum(counts[k] for k in passed)} passed / {counts['skipped (undeclared feature)']} skipped (undeclared feature)"
          f" / {failures} expected failures / {len(results)} total ({counts['ignored']} ignored)")
    for key in passed:
        print(f"    {key}: {counts[key]}")
    for key in sorted(k for k in counts if k.startswith("failures")):
        print(f"    listed, {key.removeprefix('failures: ')}: {counts[key]}")
    if args.device == "sim":
        found = findings_by_test(launched, findings)
        how = "each failed its launch" if args.findings == "fail" else "reported only; --findings fail fails them"
        print(f"  kernel sanitizer findings ({how}): {len(found)}")
        print("".join(f"  {line}\n" for line in found), end="")
    if problems:
        print("\n".join(["", "check_suite: the run disagrees with expected.toml:"] + [f"  {p}" for p in problems]))
        sys.exit(1)


if __name__ == "__main__":
    main()
