#!/usr/bin/env bash
# Can a service on an older tokio depend on the library crates? Builds a scratch crate
# that requires tokio ~1.47 (the oldest minor the libraries declare) next to every
# library crate, with its own fresh resolution (no Cargo.lock), and runs it. Fails when a
# library's requirements exclude that tokio (an `=` pin, or a caret above it).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
scratch="$root/target/older-deps-check"
mkdir -p "$scratch/src"
libs=(counters session capacity report)
[[ -d "$root/crates/tower" ]] && libs+=(tower)
[[ -d "$root/crates/balance" ]] && libs+=(balance)
{
    echo '[package]'
    echo 'name = "older-deps-check"'
    echo 'version = "0.0.0"'
    echo 'edition = "2021"'
    echo 'publish = false'
    echo '[workspace]'
    echo '[dependencies]'
    echo 'tokio = { version = "~1.47", features = ["rt", "macros"] }'
    for lib in "${libs[@]}"; do
        name=$(sed -n 's/^name = "\(.*\)"/\1/p' "$root/crates/$lib/Cargo.toml" | head -1)
        echo "$name = { path = \"$root/crates/$lib\" }"
    done
} > "$scratch/Cargo.toml"
cat > "$scratch/src/main.rs" <<'RS'
// Uses each library once so the build links them against the old tokio.
#[tokio::main(flavor = "current_thread")]
async fn main() {
    let tracker: livecount_session::SessionTracker = livecount_session::SessionTracker::default();
    let session = tracker.start();
    let second = std::time::Duration::from_secs(1);
    let config = livecount_capacity::CapacityConfig::new(0.8, 2.0, second, second).unwrap();
    let board = livecount_report::LoadBoard::new("old-tokio", config);
    let report = board.publish(tracker.snapshot());
    assert_eq!(report.active, 1);
    drop(session);
    println!("built and ran against tokio {}", env!("TOKIO_VERSION"));
}
RS
cd "$scratch"
rm -f Cargo.lock
cargo generate-lockfile -q
tokio=$(cargo metadata --format-version 1 | python3 -c 'import json,sys; print(next(p["version"] for p in json.load(sys.stdin)["packages"] if p["name"]=="tokio"))')
case "$tokio" in
    1.47.*) ;;
    *) echo "older_deps: resolved tokio $tokio, expected 1.47.x"; exit 1 ;;
esac
TOKIO_VERSION="$tokio" cargo run -q
