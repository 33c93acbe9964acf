#!/usr/bin/env bash
# Runs the loom models of crates/counters (the counters), crates/session (the tracker:
# sessions, the cap, the drain) and crates/epp (the endpoint picker's own placement count).
#
#   scripts/loom.sh [extra cargo test args...]
#
# Release build with debug assertions, and a separate target dir so switching RUSTFLAGS does
# not rebuild the main target. Each model sets its own preemption bound (3, or 2 for the
# heavy ones); LOOM_MAX_PREEMPTIONS overrides them all, e.g. for a deeper nightly run.
# LOOM_MAX_DURATION / LOOM_MAX_PERMUTATIONS are refused: hitting them passes silently.
set -euo pipefail
cd "$(dirname "$0")/.."

if [[ -n "${LOOM_MAX_DURATION:-}${LOOM_MAX_PERMUTATIONS:-}" ]]; then
    echo "loom.sh: unset LOOM_MAX_DURATION/LOOM_MAX_PERMUTATIONS (a partial exploration reports a pass)" >&2
    exit 2
fi

export RUSTFLAGS="--cfg livecount_loom -C debug-assertions"
start=$(date +%s)
cargo test -p livecount --release --target-dir target/loom --lib --test loom_counters "$@"
cargo test -p livecount-session --release --target-dir target/loom --test loom_session --test loom_cap --test loom_drain --test loom_trace "$@"
cargo test -p livecount-epp --release --target-dir target/loom --lib own::loom_models "$@"
echo "loom.sh: all models passed (LOOM_MAX_PREEMPTIONS=${LOOM_MAX_PREEMPTIONS:-per model}) in $(( $(date +%s) - start )) s"
