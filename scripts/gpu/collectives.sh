#!/usr/bin/env bash
# Builds, here (no GPU needed), what the collectives pass runs on a two-GPU machine: the
# `lockstep` CLI, the collectives GPU tests and benchmark, stripped into .gpu/nccl/ (ignored by
# git). Then, with the device tool (kind nvidia-h200-x2), carry [".gpu"] and run
# scripts/gpu/run-collectives.sh there.
set -euo pipefail
cd "$(dirname "$0")/../.."
export CARGO_TERM_COLOR=never
out=.gpu/nccl
mkdir -p "$out"
executable() {
  jq -r 'select(.reason == "compiler-artifact" and .executable != null) | .executable' | tail -n 1
}
cp "$(cargo build --release -p lockstep-conformance --bin lockstep --message-format=json | executable)" "$out/lockstep"
cp "$(cargo test --release -p lockstep-cuda --test collectives --no-run --message-format=json | executable)" "$out/collectives_tests"
cp "$(cargo bench -p lockstep-cuda --bench collectives --no-run --message-format=json | executable)" "$out/collectives_bench"
strip "$out"/*
du -sh "$out"
