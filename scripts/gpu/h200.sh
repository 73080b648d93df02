#!/usr/bin/env bash
# Builds here everything the H200 pass runs: the CUDA binaries (scripts/gpu/cuda.sh), the
# collective and staging tests and benchmarks, the wgpu dispatch benchmark, the graph, transfers
# and kernels benchmarks, the actor's and allocation path's tests, the decode_loop, real_kernels
# and faulty_kernels examples (the PyTorch scripts in scripts/gpu/ need no build), the
# launcher's probe and the world example, and the cubecl peer (peers/cubecl), stripped into
# .gpu/, packed into .gpu-pack/gpu.tar.xz (the device tool carries at most 64 MiB; .gpu/ holds
# more), and fetches Debian's Vulkan loader into .gl/ (the H200 machine has the NVIDIA ICD but
# no loader). Then, with the device tool (kind nvidia-h200-x2 for the two-GPU collectives),
# carry [".gpu-pack", ".gl"] and run scripts/gpu/run-h200.sh there (and scripts/gpu/explore-h200.sh for the explorer, and
# scripts/gpu/world-h200.sh for processes of one world).
set -euo pipefail
cd "$(dirname "$0")/../.."
rm -rf .gpu
bash scripts/gpu/cuda.sh

# The executable of the cargo target named $1 in a `--message-format=json` build.
executable() {
  jq -r --arg name "$1" 'select(.reason == "compiler-artifact" and .target.name == $name and .executable != null) | .executable' | tail -n 1
}
cp "$(cargo test --release -p lockstep-cuda --test collectives --no-run --message-format=json | executable collectives)" .gpu/collectives_tests
cp "$(cargo test --release -p lockstep-conformance --test on_cuda --no-run --message-format=json | executable on_cuda)" .gpu/suite_tests
cp "$(cargo bench -p lockstep-cuda --bench collectives --no-run --message-format=json | executable collectives)" .gpu/collectives_bench
cp "$(cargo bench -p lockstep-cuda --bench nccl_groups --no-run --message-format=json | executable nccl_groups)" .gpu/nccl_groups_bench
cp "$(cargo bench -p lockstep-cuda --bench staging --no-run --message-format=json | executable staging)" .gpu/staging_bench
cp "$(cargo bench -p lockstep-wgpu --bench dispatch --no-run --message-format=json | executable dispatch)" .gpu/wgpu_bench
cp "$(cargo bench -p lockstep-bench --bench graph --no-run --message-format=json | executable graph)" .gpu/graph_bench
cp "$(cargo bench -p lockstep-bench --bench transfers --no-run --message-format=json | executable transfers)" .gpu/transfers_bench
# The hand-off's own tests on a machine with cores enough to spin (the build machine has two,
# where the actor and its callers park at once): the actor, and allocations at the call.
cp "$(cargo test --release -p lockstep-runtime --lib --no-run --message-format=json | executable lockstep)" .gpu/runtime_tests
cp "$(cargo test --release -p lockstep-sim --test allocation_at_call --no-run --message-format=json | executable allocation_at_call)" .gpu/allocation_tests
cp "$(cargo bench -p lockstep-bench --bench kernels --no-run --message-format=json | executable kernels)" .gpu/kernels_bench
for example in decode_loop real_kernels faulty_kernels; do
  cp "$(cargo build --release -p lockstep-bench --example "$example" --message-format=json | executable "$example")" ".gpu/$example"
done
# Processes of one world (scripts/gpu/world-h200.sh): the launcher, its GPU-free probe, and the
# CUDA rank that checks and measures collectives across processes.
cp "$(cargo build --release -p lockstep-cli --bin rendezvous-probe --message-format=json | executable rendezvous-probe)" .gpu/rendezvous-probe
cp "$(cargo build --release -p lockstep-cuda --example world --message-format=json | executable world)" .gpu/world
# The cubecl peer (issue 14's table): outside the workspace, built from its own directory so
# that its .cargo/config.toml applies (see there).
cp "$(cd peers/cubecl && cargo build --release --message-format=json | executable lockstep-peer-cubecl)" .gpu/cubecl-peer
strip .gpu/*
du -sh .gpu
mkdir -p .gpu-pack
tar -C .gpu -cf - . | xz -6 -T0 > .gpu-pack/gpu.tar.xz
du -sh .gpu-pack/gpu.tar.xz

if ! ls .gl/libvulkan1_*.deb >/dev/null 2>&1; then
  mkdir -p .gl /tmp/amd64/partial
  o='-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDir::State::Lists=/tmp/amd64'
  apt-get $o update -qq
  (cd .gl && apt-get $o download libvulkan1 libegl1 libglvnd0 libopengl0 libgl1 libglx0 libgles2)
fi
