#!/usr/bin/env bash
# Runs every bundled lbsim scenario through every policy over 20 seeds (the scale checks over
# one: they measure speed) and writes results/sim/<scenario>/ and results/sim/SUMMARY.md.
#
#   scripts/sim-all.sh [SCENARIO...]     default: every bundled scenario
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -p livecount-sim
lbsim=target/release/lbsim
if [ $# -eq 0 ]; then
    set -- $("$lbsim" list | awk '{print $1}')
fi
for s in "$@"; do
    case "$s" in
        scale_*) seeds=1 ;;
        *) seeds=20 ;;
    esac
    echo "== $s ($seeds seeds)"
    "$lbsim" run "$s" --seeds "$seeds" --no-progress
done
"$lbsim" summary --out results/sim/SUMMARY.md
