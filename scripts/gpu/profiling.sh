#!/usr/bin/env bash
# Builds here (no GPU needed) what the profiling/staging pass runs on the H200: the `lockstep`
# CLI, the CUDA GPU tests and the staging benchmark, stripped into .gpu/profiling/. Then, with
# the device tool, carry [".gpu", ".gl"] and run scripts/gpu/run-profiling.sh there.
set -euo pipefail
cd "$(dirname "$0")/../.."
export CARGO_TERM_COLOR=never
out=.gpu/profiling
rm -rf "$out"
mkdir -p "$out"

# The path of the one executable a `cargo --message-format=json` build produced.
executable() {
  jq -r 'select(.reason == "compiler-artifact" and .executable != null) | .executable' | tail -n 1
}

cargo build --release -p lockstep-conformance --bin lockstep
cp target/release/lockstep "$out/lockstep"
cp "$(cargo test --release -p lockstep-cuda --test gpu --no-run --message-format=json | executable)" "$out/cuda_tests"
cp "$(cargo bench -p lockstep-cuda --bench staging --no-run --message-format=json | executable)" "$out/staging_bench"
strip "$out"/*
du -sh "$out"
