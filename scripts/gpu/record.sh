#!/usr/bin/env bash
# Builds here what issue 32's H200 recordings run (scripts/gpu/record-h200.sh): the proof
# programs (race-threads, missing-barrier), the decode_loop and real_kernels examples, the
# record_overhead example, and the CUDA device's GPU tests and the conformance suite on CUDA
# (which check the checked-mode lowering's fault reports), stripped and packed into
# .gpu-rec/rec.tar.xz. Then, with the device tool: carry [".gpu-rec", ".gl"] (.gl/ from
# scripts/gpu/cubecl.sh or h200.sh) and run `bash scripts/gpu/record-h200.sh`; the recordings
# come back under $OUT/recordings, and scripts/gpu/explore-recordings.sh DIR replays and
# explores them here.
set -euo pipefail
cd "$(dirname "$0")/../.."
executable() {
  jq -r --arg name "$1" 'select(.reason == "compiler-artifact" and .target.name == $name and .executable != null) | .executable' | tail -n 1
}
rm -rf .gpu-rec/bin && mkdir -p .gpu-rec/bin
for bin in race-threads missing-barrier; do
  cp "$(cargo build --release -p lockstep-cli --bin "$bin" --message-format=json | executable "$bin")" ".gpu-rec/bin/$bin"
done
for example in decode_loop real_kernels record_overhead; do
  cp "$(cargo build --release -p lockstep-bench --example "$example" --message-format=json | executable "$example")" ".gpu-rec/bin/$example"
done
cp "$(cargo test --release -p lockstep-cuda --test gpu --no-run --message-format=json | executable gpu)" .gpu-rec/bin/cuda_tests
cp "$(cargo test --release -p lockstep-conformance --test on_cuda --no-run --message-format=json | executable on_cuda)" .gpu-rec/bin/suite_tests
strip .gpu-rec/bin/*
tar -C .gpu-rec/bin -cf - . | xz -6 -T0 > .gpu-rec/rec.tar.xz
rm -rf .gpu-rec/bin
du -sh .gpu-rec/rec.tar.xz
