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
# Loom pass: the loom models need their own RUSTFLAGS and take a minute or more a run, so
# they are not run for every mutant. After a crate's plain pass, the mutants it MISSED in the
# files its loom models cover (LOOM_FILES: the ending protocol, the slot table, the counters'
# pair reads and stripes) are tested again with the loom suite (`--iterate` skips the caught
# ones), under target/mutants/<crate>-loom/; the report counts a mutant caught there as
# caught ("by loom"). MUTANTS_LOOM=0 skips the pass.
#
# Doctest pass: nextest runs no doctests, so the mutants the plain pass missed are tested
# again with `cargo test --doc` (target/mutants/<crate>-doc/); the report counts a mutant
# caught there as caught ("by doctests"). MUTANTS_DOC=0 skips it.
#
# After adding tests for survivors: `scripts/mutants.sh CRATE -- --iterate` retests only the
# mutants not caught before.
#
# Results come from a clean commit: the script refuses to start from a tree whose tracked
# files outside results/ differ from HEAD (scripts/provenance.py), and stamps each crate's
# outcomes with the commit it checked (commit.txt). MUTANTS_REPORT=target/mutants/REPORT.md
# writes the report there instead, for a run on uncommitted work (its commit.txt says
# -dirty, and the committed report refuses it until the crate is run again from a commit).
set -euo pipefail
cd "$(dirname "$0")/.."

MUTANTS_VERSION=27.1.0

# The test packages run for each crate's mutants (the crate itself always runs).
declare -A TESTS=(
    [livecount]="livecount-tests livecount-support"
    [livecount-session]=""
    [livecount-capacity]=""
    [livecount-report]=""
    [livecount-tower]=""
)
ALL=(livecount livecount-session livecount-capacity livecount-report livecount-tower)

# The loom suite of a crate (cargo test arguments) and the files its models cover.
declare -A LOOM_TESTS=(
    [livecount]="--lib --test loom_counters"
    [livecount-session]="--test loom_session"
)
declare -A LOOM_FILES=(
    [livecount]="crates/counters/src/pair.rs crates/counters/src/striped.rs crates/counters/src/cell_table.rs crates/counters/src/thread_id.rs crates/counters/src/sync.rs crates/counters/src/loom_model.rs crates/counters/src/per_cpu/mod.rs crates/counters/src/per_cpu/source.rs crates/counters/src/cpu.rs"
    [livecount-session]="crates/session/src/lifecycle.rs crates/session/src/slots.rs crates/session/src/end_signal.rs crates/session/src/tally.rs crates/session/src/reporter.rs"
)

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

# Before hours of mutants: the commit they run on, refused unless clean when the report goes
# into results/.
report=${MUTANTS_REPORT:-results/mutants/REPORT.md}
commit=$(python3 scripts/provenance.py "$report") || {
    echo "mutants.sh: (or MUTANTS_REPORT=target/mutants/REPORT.md for a report outside results/)" >&2
    exit 1
}

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
    mkdir -p "target/mutants/$crate/history"
    # An --iterate run replaces mutants.out (keeping one .old): save each run's outcomes so the
    # report can still tell the caught from the unviable of every earlier run.
    if [[ -f "target/mutants/$crate/mutants.out/outcomes.json" ]]; then
        n=$(find "target/mutants/$crate/history" -name '*.json' | wc -l)
        cp "target/mutants/$crate/mutants.out/outcomes.json" "target/mutants/$crate/history/$((n + 1)).json"
    fi
    status=0
    # cargo-mutants applies `--test-package` only to the mutated package in 27.1, so the
    # other packages go to the test command after `--`.
    # Every feature on (as CI's --workspace build has them: the server turns on the tower
    # crate's `orca`), so no feature-gated code counts as missed for being left out.
    # Two mutants at a time (a build of one crate leaves a core idle), and 64 proptest cases
    # a property instead of CI's 256: the state machines still cover every transition, and
    # the whole session crate's run fits in half an hour on two cores.
    PROPTEST_CASES=${PROPTEST_CASES:-64} \
        cargo mutants -p "$crate" --all-features --test-tool nextest --no-shuffle --jobs "${MUTANTS_JOBS:-2}" \
        -o "target/mutants/$crate" "${extra[@]}" -- "${test_args[@]}" || status=$?
    # 0: all caught; 2: some missed; 3: some timed out — all three are results to report.
    case $status in
        0 | 2 | 3) ;;
        *) echo "mutants.sh: cargo-mutants failed on $crate (exit $status)" >&2; exit "$status" ;;
    esac
    echo "$commit" > "target/mutants/$crate/commit.txt"
    # The tree's mutants as of this run: the report counts these, so the old names of
    # mutants whose lines moved between an earlier run and an --iterate one drop out.
    cargo mutants --list -p "$crate" --all-features > "target/mutants/$crate/list.txt"

    # The extra arguments for the passes below, which always pass --iterate themselves.
    pass_extra=()
    for a in "${extra[@]}"; do
        [[ $a == --iterate ]] || pass_extra+=("$a")
    done

    # Doctest pass: the test command of .ci/run runs doctests, but nextest cannot, so the
    # mutants the plain pass missed are tested again with the crate's doctests alone (cargo
    # test --doc), under target/mutants/<crate>-doc/; the report counts a mutant caught there
    # as caught ("by doctests"). MUTANTS_DOC=0 skips the pass.
    if [[ ${MUTANTS_DOC:-1} != 0 ]]; then
        echo "=== $crate: doctest pass over the mutants the plain pass missed"
        doc_dir="target/mutants/$crate-doc"
        rm -rf "$doc_dir"
        mkdir -p "$doc_dir"
        cp -r "target/mutants/$crate/mutants.out" "$doc_dir/"
        status=0
        cargo mutants -p "$crate" --all-features --iterate --test-tool cargo --no-shuffle \
            -o "$doc_dir" --cargo-test-arg=--doc "${pass_extra[@]}" || status=$?
        case $status in
            0 | 2 | 3) ;;
            *) echo "mutants.sh: the doctest pass failed on $crate (exit $status)" >&2; exit "$status" ;;
        esac
        echo "$commit" > "$doc_dir/commit.txt"
    fi

    if [[ ${MUTANTS_LOOM:-1} != 0 && -v LOOM_TESTS[$crate] ]]; then
        echo "=== $crate: loom pass over the mutants missed in ${LOOM_FILES[$crate]}"
        loom_dir="target/mutants/$crate-loom"
        rm -rf "$loom_dir"
        mkdir -p "$loom_dir"
        cp -r "target/mutants/$crate/mutants.out" "$loom_dir/"
        files=()
        for f in ${LOOM_FILES[$crate]}; do
            files+=(-f "$f")
        done
        test_args=(--cargo-test-arg=--release)
        for a in ${LOOM_TESTS[$crate]}; do
            test_args+=("--cargo-test-arg=$a")
        done
        status=0
        # Preemption bound 2 (the models' own default is 3; three_enders alone takes 55 s
        # there, 7 s at 2): about 20 s a mutant for the session suite.
        LOOM_MAX_PREEMPTIONS=${LOOM_MAX_PREEMPTIONS:-2} \
            RUSTFLAGS="--cfg livecount_loom -C debug-assertions" \
            cargo mutants -p "$crate" --iterate --test-tool cargo --no-shuffle -o "$loom_dir" \
            "${files[@]}" "${test_args[@]}" "${pass_extra[@]}" || status=$?
        case $status in
            0 | 2 | 3) ;;
            *) echo "mutants.sh: the loom pass failed on $crate (exit $status)" >&2; exit "$status" ;;
        esac
        echo "$commit" > "$loom_dir/commit.txt"
    fi
done

python3 scripts/mutants_report.py target/mutants "$report"
echo "mutants.sh: wrote $report"
