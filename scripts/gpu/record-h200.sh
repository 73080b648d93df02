#!/usr/bin/env bash
# On the H200 (device tool, carry [".gpu-rec", ".gl"], built by scripts/gpu/record.sh): records
# real runs for the simulator (issue 32). The proof programs, buggy and fixed, pass on the GPU
# by luck of its timing and are recorded through Lockstep's CUDA device; decode_loop and
# real_kernels are recorded through CUDA and through the wgpu device on Vulkan. Every recording
# lands in $OUT/recordings; scripts/gpu/explore-recordings.sh replays and explores them. Then
# the overhead of recording is measured (record_overhead), and the CUDA device's GPU tests and
# the conformance suite on CUDA run. Every part runs even if one before it fails; the exit
# status is the first failure's.
set -uo pipefail
cd "$(dirname "$0")/../.."
bin=/tmp/rec-gpu
mkdir -p "$bin" && tar -C "$bin" -xJf .gpu-rec/rec.tar.xz
for f in .gl/*.deb; do dpkg -x "$f" /; done
ldconfig
rec="${OUT:-/tmp/out}/recordings"
mkdir -p "$rec"
status=0
step() { echo "== $*"; "$@" || { rc=$?; echo "== failed ($rc): $*"; [ "$status" -ne 0 ] || status=$rc; }; }
for program in race-threads missing-barrier; do
  step env LOCKSTEP_RECORD="$rec/$program.rec" "$bin/$program" --device cuda
  step env LOCKSTEP_RECORD="$rec/$program-fixed.rec" "$bin/$program" --device cuda --fixed
done
# Their data kept (up to 256 MiB a create, write or read), so the replay checks every read.
keep=$((256 << 20))
for example in decode_loop real_kernels; do
  step env LOCKSTEP_RECORD="$rec/$example-cuda.rec" LOCKSTEP_RECORD_DATA_MAX=$keep "$bin/$example" cuda
  step env LOCKSTEP_RECORD="$rec/$example-vulkan.rec" LOCKSTEP_RECORD_DATA_MAX=$keep \
    LOCKSTEP_WGPU_BACKEND=vulkan "$bin/$example" wgpu
done
ls -l "$rec"
# What recording costs: launches and 256 MiB writes, recorded beside unrecorded.
step "$bin/record_overhead" cuda
step "$bin/cuda_tests" --test-threads 1
step "$bin/suite_tests"
exit "$status"
