#!/usr/bin/env bash
# The contention audit (docs/verification.md): under --cfg livecount_audit the
# counters' and the session tracker's sync shims record which thread writes which cache line,
# and the tests assert each design's claim about who shares what.
#
#   scripts/audit.sh            the audit tests at 8 and 64 threads (seconds; scripts/test.sh)
#   scripts/audit.sh --report   the same at 1, 2, 8, 16, 64 and 128 threads, saved to
#                               results/contention-audit/ (audit.tsv, shared-lines.md), then the
#                               line-transfer and 1-/2-thread timings and the model
#                               (model.md), from a normal release build; only from a
#                               clean tree (scripts/provenance.py), and model.md names the
#                               commit
#
# Release build in its own target subdirectory (like loom's), so switching RUSTFLAGS does not
# rebuild the main target.
set -euo pipefail
cd "$(dirname "$0")/.."

target="${CARGO_TARGET_DIR:-target}"
report=0
case "${1:-}" in
    --report) report=1 ;;
    "") ;;
    *) echo "usage: scripts/audit.sh [--report]" >&2; exit 2 ;;
esac

out=results/contention-audit
if (( report )); then
    # Before the runs: committed results come from a clean commit, the one stamped on them.
    commit=$(python3 scripts/provenance.py "$out") || exit 1
    mkdir -p "$out"
    rm -f "$out/audit.tsv" "$out/shared-lines.md"
    export LIVECOUNT_AUDIT_DIR="$PWD/$out" LIVECOUNT_AUDIT_THREADS=1,2,8,16,64,128
fi

start=$(date +%s)
RUSTFLAGS="--cfg livecount_audit" cargo test --release --target-dir "$target/audit" \
    -p livecount --lib -- --test-threads=1 audit::
RUSTFLAGS="--cfg livecount_audit" cargo test --release --target-dir "$target/audit" \
    -p livecount -p livecount-session --test contention_audit -- --test-threads=1
echo "audit.sh: the audit passed in $(( $(date +%s) - start )) s"

if (( report )); then
    {
        echo "Written by \`scripts/audit.sh --report\` at commit \`$commit\`, with audit.tsv and shared-lines.md."
        echo
        cargo run --release -p livecount-session --example contention_model -- "$out/audit.tsv"
    } | tee "$out/model.md"
fi
