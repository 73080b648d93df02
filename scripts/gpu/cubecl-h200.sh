#!/usr/bin/env bash
# On the H200 (device tool, carry [".gpu-pack", ".gl"], built by scripts/gpu/cubecl.sh): cubecl's
# suite through Lockstep's CUDA device and through its wgpu device on Vulkan, each held to
# cubecl-lockstep/expected.toml, then the speed table of cubecl kernels through Lockstep's CUDA
# device beside cubecl-cuda. Every part runs even if one before it fails; the exit status is
# the first failure's.
set -uo pipefail
cd "$(dirname "$0")/../.."
bin=/tmp/cubecl-gpu
mkdir -p "$bin" && tar -C "$bin" -xJf .gpu-pack/cubecl.tar.xz
for f in .gl/*.deb; do dpkg -x "$f" /; done
ldconfig
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
status=0
step() { echo "== $*"; "$@" || { rc=$?; echo "== failed ($rc): $*"; [ "$status" -ne 0 ] || status=$rc; }; }
step python3 cubecl-lockstep/check_suite.py --device cuda --binary "$bin/suite_cuda"
step env LOCKSTEP_WGPU_BACKEND=vulkan python3 cubecl-lockstep/check_suite.py --device wgpu --binary "$bin/suite_wgpu"
step "$bin/cubecl-peer" lockstep
exit "$status"
