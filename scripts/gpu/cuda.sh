#!/usr/bin/env bash
# Builds, here (no GPU needed), everything the CUDA device is checked with on a GPU machine that
# has the NVIDIA driver and NVRTC but no Rust: the `lockstep` CLI, the GPU test binary and the
# runtime-vs-raw benchmark. Strips them into .gpu/ (ignored by git) and prints the command to run
# there from the repository root. The binaries load libcuda and libnvrtc at run time (dlopen);
# they need nothing else but the C library, which this script checks. The command sets
# LOCKSTEP_REQUIRE_GPU=1, so a test that finds no GPU there fails instead of skipping.
set -euo pipefail
cd "$(dirname "$0")/../.."
export CARGO_TERM_COLOR=never

out=.gpu
mkdir -p "$out"

# The path of the one executable a `cargo --message-format=json` build produced.
executable() {
  jq -r 'select(.reason == "compiler-artifact" and .executable != null) | .executable' | tail -n 1
}

echo "== building (release)"
cp "$(cargo build --release -p lockstep-cli --bin lockstep --message-format=json | executable)" "$out/lockstep"
tests=$(cargo test --release -p lockstep-cuda --test gpu --no-run --message-format=json | executable)
cp "$tests" "$out/cuda_tests"
suite=$(cargo test --release -p lockstep-conformance --test on_cuda --no-run --message-format=json | executable)
cp "$suite" "$out/suite_tests"
bench=$(cargo bench -p lockstep-cuda --bench runtime_vs_raw --no-run --message-format=json | executable)
cp "$bench" "$out/bench"

echo "== stripping and checking run-time dependencies"
for binary in lockstep cuda_tests suite_tests bench; do
  strip "$out/$binary"
  # A whole executable (another build rewriting target/ while it was copied would cut it short),
  # linking only the C runtime: CUDA is loaded at run time.
  needed=$(readelf -d "$out/$binary" 2>&1 | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | tr '\n' ' ')
  if readelf -d "$out/$binary" 2>&1 | grep -q Error || [[ " $needed" != *" libc.so.6 "* ]]; then
    echo "error: $out/$binary is not a whole executable linking libc; run this script again" >&2
    exit 1
  fi
  for lib in $needed; do
    case "$lib" in
      libc.so.*|libm.so.*|libgcc_s.so.*|ld-linux*|libdl.so.*|libpthread.so.*|librt.so.*) ;;
      *) echo "error: $binary links $lib; only the C runtime may be linked" >&2; exit 1 ;;
    esac
  done
  printf '%-12s %6s KiB  needs: %s\n' "$binary" "$(( $(stat -c %s "$out/$binary") / 1024 ))" "$needed"
done
total=$(du -sk "$out" | cut -f1)
echo "total: ${total} KiB in $out/"
if [ "$total" -gt $((32 * 1024)) ]; then
  echo "error: $out/ holds ${total} KiB; keep it far under 64 MiB" >&2
  exit 1
fi

cat <<'CMD'

== run on the GPU machine, from the repository root:
export LOCKSTEP_REQUIRE_GPU=1 LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}/usr/local/cuda/lib64"; .gpu/lockstep check --device cuda --cases 64 --seed 7 && .gpu/cuda_tests && .gpu/suite_tests && .gpu/bench
CMD
