#!/usr/bin/env bash
# Three livecount-agent backends behind a real HAProxy on loopback, one of them hot (a
# background thread burning 90% of its core), and the driver opening sessions through
# HAProxy while it prints every backend's /load each second.
#
#   deploy/haproxy/run.sh              # 45 sessions, 8 s each, 30% killed without a close
#   SESSIONS=100 HOLD=20 deploy/haproxy/run.sh
#
# Needs haproxy (apt-get install haproxy). Ports: 18080 (HAProxy), 1808[1-3] (agents),
# 1809[1-3] (agent-check); override with BASE=...
set -euo pipefail
cd "$(dirname "$0")/../.."
BASE=${BASE:-18080}
SESSIONS=${SESSIONS:-45}
HOLD=${HOLD:-8}
HAPROXY=$(command -v haproxy || echo /usr/sbin/haproxy)
[[ -x $HAPROXY ]] || { echo "haproxy not found: apt-get install haproxy" >&2; exit 1; }

cargo build --release -q -p livecount-server
AGENT=target/release/livecount-agent
dir=$(mktemp -d)
pids=()
cleanup() { kill "${pids[@]}" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$dir"; }
trap cleanup EXIT

for i in 1 2 3; do
    hot=()
    [[ $i == 3 ]] && hot=(--background-load 0.9)
    $AGENT serve --name "b$i" --http "127.0.0.1:$((BASE + i))" \
        --agent-check "127.0.0.1:$((BASE + 10 + i))" --cores 1 --work-ms 1 "${hot[@]}" \
        2>"$dir/b$i.log" &
    pids+=($!)
done
sed -e "s/@FRONT@/$BASE/" \
    -e "s/@HTTP1@/$((BASE + 1))/" -e "s/@HTTP2@/$((BASE + 2))/" -e "s/@HTTP3@/$((BASE + 3))/" \
    -e "s/@AGENT1@/$((BASE + 11))/" -e "s/@AGENT2@/$((BASE + 12))/" -e "s/@AGENT3@/$((BASE + 13))/" \
    deploy/haproxy/haproxy.cfg.in > "$dir/haproxy.cfg"
$HAPROXY -f "$dir/haproxy.cfg" -db 2>"$dir/haproxy.log" &
pids+=($!)
sleep 3 # agent-check every 500 ms; the agents report every second

$AGENT drive --target "127.0.0.1:$BASE" --sessions "$SESSIONS" --ramp-secs 4 --hold-secs "$HOLD" \
    --speak-every-secs 1 --chunks 5 --kill-share 0.3 \
    --observe "127.0.0.1:$((BASE + 1)),127.0.0.1:$((BASE + 2)),127.0.0.1:$((BASE + 3))"

echo "final /load of each backend:"
for i in 1 2 3; do
    curl -s "http://127.0.0.1:$((BASE + i))/load" 2>/dev/null || \
        python3 -c "import urllib.request,sys; print(urllib.request.urlopen(sys.argv[1]).read().decode())" \
            "http://127.0.0.1:$((BASE + i))/load"
    echo
done
