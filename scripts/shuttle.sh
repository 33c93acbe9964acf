#!/usr/bin/env bash
# Runs the shuttle models of crates/counters: every counter, eight threads, random and PCT
# schedules (crates/counters/tests/shuttle_counters.rs).
#
#   scripts/shuttle.sh [extra cargo test args...]
#
# Release build in its own target dir, so switching RUSTFLAGS does not rebuild the main target.
# SHUTTLE_ITERATIONS overrides the executions per scheduler and counter (default 10000).
# Shuttle models every atomic as SeqCst: it finds interleaving bugs, not ordering bugs
# (scripts/loom.sh covers those).
set -euo pipefail
cd "$(dirname "$0")/.."

export RUSTFLAGS="--cfg livecount_shuttle"
start=$(date +%s)
cargo test -p livecount --release --test shuttle_counters --target-dir target/shuttle "$@"
echo "shuttle.sh: all models passed (SHUTTLE_ITERATIONS=${SHUTTLE_ITERATIONS:-default}) in $(( $(date +%s) - start )) s"
