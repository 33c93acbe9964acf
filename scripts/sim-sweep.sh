#!/usr/bin/env bash
# Where session-awareness starts to pay: scales heterogeneous_fleet, long_vs_short, diurnal
# and multi_proxy from 100 to 20 000 concurrent sessions (the fleet growing with them, the
# load per core constant), 20 seeds per point, and writes results/sim/sweep/ (sweep.json,
# points.csv, REPORT.md, sweep.svg). Committed results need a clean tree (lbsim refuses
# otherwise). Extra arguments go to `lbsim sweep` (e.g. --jobs 1, or other scenarios).
#
#   scripts/sim-sweep.sh [ARGS...]
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -p livecount-sim
exec "${CARGO_TARGET_DIR:-target}/release/lbsim" sweep --no-progress "$@"
