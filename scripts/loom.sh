#!/usr/bin/env bash
# Model-checks the actor, its reply channel and the allocation path with loom: the `loom_tests`
# modules at the bottom of runtime/src/actor.rs and runtime/src/memory/books.rs, compiled with
# `--cfg loom` so that runtime/src/sync.rs hands out loom's primitives. It builds into target/loom, so the ordinary build in target/ is not invalidated.
#
# Each model explores every interleaving with up to 3 preemptions (about 80 s in all on 2
# cores); LOOM_MAX_PREEMPTIONS=4 searches deeper (about 16 minutes). Extra arguments go to
# `cargo test`, e.g. `scripts/loom.sh -- --test-threads=1`.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

# Warnings are errors here too: the loom build leaves out most of the crate, so code that only
# the client uses must say why it is unused there.
export RUSTFLAGS="${RUSTFLAGS:-} --cfg loom -D warnings"
export CARGO_TARGET_DIR=target/loom

exec cargo test -p lockstep-runtime --release --lib loom_tests "$@"
