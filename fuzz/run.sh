#!/usr/bin/env bash
# Fuzzes every livecount counter on stable Rust (libFuzzer without sanitizers).
#
#   fuzz/run.sh [SECONDS] [TARGET...]     # default: 20 seconds each, every target
#   CMIN=1 fuzz/run.sh 30                 # then minimise each corpus in place (edges only)
#
# Each target runs `livecount_support::check::check_program` on the programs libFuzzer generates
# (real threads, lockstep comparison with Reference, concurrent phases held to the gauge
# read guarantee). New inputs land in fuzz/corpus/<target>/, crashes in
# fuzz/artifacts/<target>/; the `corpus_replay` test in tests/ replays both on every
# `cargo test`. `-s none` is what makes this work on stable: cargo-fuzz passes no `-Z`
# flag then. Exits non-zero on the first crash.
set -euo pipefail
cd "$(dirname "$0")/.."

CARGO_FUZZ_VERSION=0.13.2
seconds="${1:-20}"
shift || true
targets=("$@")
if [[ ${#targets[@]} -eq 0 ]]; then
    targets=(single sharded striped per_thread per_cpu per_cpu_one_cell reference)
fi

if ! cargo fuzz --version 2>/dev/null | grep -qF "$CARGO_FUZZ_VERSION"; then
    echo "fuzz/run.sh: installing cargo-fuzz $CARGO_FUZZ_VERSION" >&2
    cargo install cargo-fuzz --version "$CARGO_FUZZ_VERSION" --locked
fi

cargo fuzz build -s none
mkdir -p fuzz/target
for target in "${targets[@]}"; do
    mkdir -p "fuzz/corpus/$target"
    log="fuzz/target/fuzz-$target.log"
    echo "fuzz/run.sh: $target for ${seconds}s (full log: $log)"
    # -max_len: programs of up to ~85 operations; longer ones add cost, not coverage.
    # With SCRATCH=1 (what scripts/test.sh uses) new inputs go to a throw-away directory and
    # the committed corpus is only read, so a test run leaves the work tree clean.
    corpora=()
    if [[ "${SCRATCH:-0}" == 1 ]]; then
        scratch="$(mktemp -d)"
        corpora=("$scratch" "fuzz/corpus/$target")
    fi
    status=0
    cargo fuzz run -s none "$target" "${corpora[@]}" -- -max_total_time="$seconds" -max_len=512 \
        >"$log" 2>&1 || status=$?
    grep -E '^(#[0-9]+[[:space:]]+(INITED|DONE)|Done [0-9]+ runs|INFO: +[0-9]+ files found)' "$log" || true
    if [[ $status -ne 0 ]]; then
        tail -n 60 "$log" >&2
        echo "fuzz/run.sh: $target failed (exit $status); crash input in fuzz/artifacts/$target/" >&2
        exit "$status"
    fi
    if [[ "${CMIN:-0}" == 1 ]]; then
        # -use_counters=0: keep inputs for new edges only, not for new hit counts; with real
        # threads hit counts vary run to run and would keep hundreds of near-duplicates.
        cargo fuzz cmin -s none "$target" -- -use_counters=0 2>&1 |
            grep -E 'MERGE-OUTER: [0-9]+ new files' || true
    fi
    echo "fuzz/run.sh: $target corpus: $(find "fuzz/corpus/$target" -type f | wc -l) files"
done
