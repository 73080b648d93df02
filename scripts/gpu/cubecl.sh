#!/usr/bin/env bash
# Builds here what issue 34's H200 pass runs (scripts/gpu/cubecl-h200.sh): cubecl's suite through
# Lockstep's CUDA and wgpu devices (cubecl-lockstep's tests/suite_cuda.rs and suite_wgpu.rs) and
# the cubecl peer with its `lockstep` mode (cubecl kernels through Lockstep's CUDA device beside
# cubecl-cuda), stripped and packed into .gpu-pack/cubecl.tar.xz; fetches Debian's Vulkan loader
# into .gl/ as scripts/gpu/h200.sh does. Then, with the device tool: carry [".gpu-pack", ".gl"]
# and run `bash scripts/gpu/cubecl-h200.sh`.
set -euo pipefail
cd "$(dirname "$0")/../.."
# One target folder for both builds: they share most of cubecl's crates.
export CARGO_TARGET_DIR="$PWD/cubecl-lockstep/target"
executable() {
  jq -r --arg name "$1" 'select(.reason == "compiler-artifact" and .target.name == $name and .executable != null) | .executable' | tail -n 1
}
rm -rf .gpu-cubecl && mkdir -p .gpu-cubecl .gpu-pack
for suite in suite_cuda suite_wgpu; do
  cp "$(cargo test --release --manifest-path cubecl-lockstep/Cargo.toml --features wgpu,cuda \
    --test "$suite" --no-run --message-format=json | executable "$suite")" ".gpu-cubecl/$suite"
done
cp "$(cd peers/cubecl && cargo build --release --message-format=json | executable lockstep-peer-cubecl)" .gpu-cubecl/cubecl-peer
strip .gpu-cubecl/*
tar -C .gpu-cubecl -cf - . | xz -6 -T0 > .gpu-pack/cubecl.tar.xz
du -sh .gpu-cubecl .gpu-pack/cubecl.tar.xz
if ! ls .gl/libvulkan1_*.deb >/dev/null 2>&1; then
  mkdir -p .gl /tmp/amd64/partial
  o='-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDir::State::Lists=/tmp/amd64'
  apt-get $o update -qq
  (cd .gl && apt-get $o download libvulkan1 libegl1 libglvnd0 libopengl0 libgl1 libglx0 libgles2)
fi
