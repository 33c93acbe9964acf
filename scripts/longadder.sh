#!/usr/bin/env bash
# `Striped` side by side with Java 17's `LongAdder` (the design it follows) and `AtomicLong`,
# and with `Sharded` and `Single`, in one run: the picker's `--anchors` table (the threads
# workload at 1, 2, 4, 8 threads, every contender sized once and the repetitions interleaved,
# medians and the ratios Striped's targets name). The Java side is
# benches/java/PairsProbe.java, driven by the picker through a JVM it starts.
#
# Installs a JDK from the package registry first if `javac` is missing (apt: Java 17's
# headless JDK, else Debian's default one; `apt-get update` first) and fails loudly if it
# cannot: a table without its Java rows is not what this script is for.
#
# Usage: scripts/longadder.sh [picker args...]   e.g. --budget 120 --reps 7
#        (default: --budget 60 --reps 5; writes target/livecount-picker/<machine>/anchors.md,
#        or results/<machine>/anchors.md with --update-results)
set -euo pipefail
cd "$(dirname "$0")/.."

as_root() { if [[ $(id -u) == 0 ]]; then "$@"; else sudo "$@"; fi; }

if ! command -v javac >/dev/null 2>&1; then
    echo "longadder.sh: no JDK; installing one with apt-get" >&2
    as_root apt-get update -q
    as_root apt-get install -y -q openjdk-17-jdk-headless \
        || as_root apt-get install -y -q default-jdk-headless \
        || { echo "longadder.sh: could not install a JDK (openjdk-17-jdk-headless or default-jdk-headless)" >&2; exit 1; }
fi
command -v java >/dev/null 2>&1 || { echo "longadder.sh: a JDK was installed but \`java\` is not on PATH" >&2; exit 1; }
java -version 2>&1 | head -1 >&2

# The probe must run on its own before the picker relies on it: a JRE without the compiler
# (the single-file source launcher needs jdk.compiler) fails here, with the JVM's message.
java benches/java/PairsProbe.java --seconds 0.05 --reps 1 1 >/dev/null \
    || { echo "longadder.sh: benches/java/PairsProbe.java does not run on this JDK" >&2; exit 1; }

exec cargo run --release -p livecount-picker -- --anchors --budget 60 --reps 5 "$@"
