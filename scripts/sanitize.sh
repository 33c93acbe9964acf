#!/usr/bin/env bash
# Memory-error checking of every crate with `unsafe` code: their unit and integration tests
# under AddressSanitizer, with LeakSanitizer at exit (use after free, out-of-bounds, double
# free, stack use after return, leaks).
#
# ThreadSanitizer is not run: without an instrumented std it cannot see the synchronisation
# of std's `Mutex`, `Condvar`, thread join or `Arc` drop, and reports every access they
# order (554 reports over the counters' and the session crate's tests, among them the
# `Mutex`-guarded totals of the `Reference` counter); a suppressions file short enough to
# review would not hide them without hiding ours too. Races in the `unsafe` protocols are
# loom's and shuttle's to find (scripts/loom.sh, scripts/shuttle.sh).
#
# The sanitizers need a nightly toolchain with their runtimes (`-Zsanitizer` is unstable);
# it is used only to check, never to build the product. Without `-Zbuild-std` (it needs the
# rust-src component, which cannot be fetched here) std itself is not instrumented: ASan
# still sees every heap block (it replaces malloc and free) and every access our crates
# make, which is what the `unsafe` code touches. Each sanitizer builds into its own target
# directory (target/sanitize-*), so the stable build is never invalidated.
#
# Where no nightly with the runtime exists this fails and says what is missing: it never
# skips silently.
set -euo pipefail
cd "$(dirname "$0")/.."

# The crates with `unsafe` code (each denies `unsafe_code` and allows it per site):
# found by grep, so a new one is never left out.
crates=()
for dir in $(grep -rl --include='*.rs' 'allow(unsafe_code)' crates | sed -E 's#/(src|tests|benches|examples)/.*##' | sort -u); do
    crates+=(-p "$(sed -n 's/^name = "\(.*\)"/\1/p' "$dir/Cargo.toml" | head -1)")
done

target=$(rustc -vV | sed -n 's/^host: //p')
need() {
    local sanitizer=$1
    if ! nightly=$(rustup toolchain list 2>/dev/null | grep -o '^nightly[^ ]*' | head -1) || [[ -z "$nightly" ]]; then
        echo "scripts/sanitize.sh: no nightly toolchain (rustup toolchain list); -Zsanitizer=$sanitizer needs one" >&2
        exit 1
    fi
    local sysroot runtime
    sysroot=$(rustc "+$nightly" --print sysroot)
    runtime=$(case $sanitizer in address) echo asan ;; leak) echo lsan ;; thread) echo tsan ;; esac)
    if ! ls "$sysroot/lib/rustlib/$target/lib/"*"rt.$runtime.a" >/dev/null 2>&1; then
        echo "scripts/sanitize.sh: $nightly has no $sanitizer runtime (*rt.$runtime.a) in $sysroot/lib/rustlib/$target/lib" >&2
        exit 1
    fi
}

run() {
    local sanitizer=$1
    shift
    need "$sanitizer"
    echo "== $sanitizer: ${crates[*]} ($nightly)"
    # `--target` keeps the flags off build scripts and proc macros (they run in the compiler,
    # which is not instrumented). Line tables only: the reports name file and line.
    RUSTFLAGS="-Zsanitizer=$sanitizer -Cdebuginfo=line-tables-only --cfg livecount_sanitize" \
    RUSTDOCFLAGS="-Zsanitizer=$sanitizer" \
    CARGO_TARGET_DIR="target/sanitize-$sanitizer" \
        cargo "+$nightly" test --locked --target "$target" "${crates[@]}" --all-features \
        --lib --tests "$@"
}

# A leak is an error (LSan runs at exit) unless scripts/lsan.supp names the test that
# leaks on purpose; every report aborts the test binary.
ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:detect_stack_use_after_return=1:strict_string_checks=1" \
LSAN_OPTIONS="suppressions=$PWD/scripts/lsan.supp:print_suppressions=0" \
    run address

