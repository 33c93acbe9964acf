#!/usr/bin/env bash
# Mutation testing: runs cargo-mutants over the library crates, each mutant tested with the
# packages whose tests exercise that crate, then writes results/mutants/REPORT.md (caught /
# missed / unviable / timeout per crate and per file, and the kill rate) from cargo-mutants'
# outcomes.json files (scripts/mutants_report.py).
#
#   scripts/mutants.sh                      # every crate below (hours on 2 cores)
#   scripts/mutants.sh livecount            # one crate
#   scripts/mutants.sh livecount -- -f crates/counters/src/single.rs   # extra cargo-mutants args
#
# Too slow for every .ci/run: run it when these crates change and commit the report.
# Installs cargo-mutants (pinned) when missing. Outcomes go to target/mutants/<crate>/.
#
# The loom and shuttle models are not run per mutant here: they need their own RUSTFLAGS,
# which would rebuild the whole tree for every mutant. Mutants they would catch (orderings,
# the state word) show as missed until a loom pass for the files they cover is added.
set -euo pipefail
cd "$(dirname "$0")/.."

MUTANTS_VERSION=27.1.0

# The test packages run for each crate's mutants (the crate itself always runs).
declare -A TESTS=(
    [livecount]="livecount-tests livecount-check"
    [livecount-session]=""
    [livecount-capacity]=""
    [livecount-report]=""
    [livecount-tower]=""
)
ALL=(livecount livecount-session livecount-capacity livecount-report livecount-tower)

crates=()
extra=()
while (($#)); do
    if [[ $1 == -- ]]; then
        shift
        extra=("$@")
        break
    fi
    [[ -v TESTS[$1] ]] || { echo "mutants.sh: unknown crate $1 (one of: ${ALL[*]})" >&2; exit 2; }
    crates+=("$1")
    shift
done
((${#crates[@]})) || crates=("${ALL[@]}")

if [[ $(cargo mutants --version 2>/dev/null) != "cargo-mutants $MUTANTS_VERSION" ]]; then
    echo "mutants.sh: installing cargo-mutants $MUTANTS_VERSION" >&2
    cargo install cargo-mutants --version "$MUTANTS_VERSION" --locked
fi

for crate in "${crates[@]}"; do
    test_args=()
    for t in ${TESTS[$crate]}; do
        test_args+=(-p "$t")
    done
    echo "=== $crate (tests: $crate ${TESTS[$crate]})"
    mkdir -p "target/mutants/$crate"
    status=0
    # cargo-mutants applies `--test-package` only to the mutated package in 27.1, so the
    # other packages go to the test command after `--`.
    cargo mutants -p "$crate" --test-tool nextest --no-shuffle -o "target/mutants/$crate" \
        "${extra[@]}" -- "${test_args[@]}" || status=$?
    # 0: all caught; 2: some missed; 3: some timed out — all three are results to report.
    case $status in
        0 | 2 | 3) ;;
        *) echo "mutants.sh: cargo-mutants failed on $crate (exit $status)" >&2; exit "$status" ;;
    esac
done

commit=$(git rev-parse --short HEAD)
git diff --quiet HEAD -- crates || commit="$commit + uncommitted changes"
MUTANTS_COMMIT=$commit python3 scripts/mutants_report.py target/mutants results/mutants/REPORT.md
echo "mutants.sh: wrote results/mutants/REPORT.md"
