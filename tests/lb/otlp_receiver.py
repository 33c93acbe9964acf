#!/usr/bin/env python3
"""An OTLP/gRPC receiver on the official protobufs (PyPI ``opentelemetry-proto``) and
grpcio, for metrics and traces on one port:

* ``opentelemetry.proto.collector.metrics.v1.MetricsService/Export``: each request appended
  to ``--out`` as one JSON line;
* ``opentelemetry.proto.collector.trace.v1.TraceService/Export``: each request appended to
  ``--traces-out`` as one JSON line (accepted and not written down without that option).

Requests are decoded by the generated message classes and written with
``json_format.MessageToDict`` and the proto field names: 64-bit integers are strings, and so
are doubles here, as Python's shortest round-trip ``repr``, so that a reader parses the
exact value the exporter sent rather than its JSON parser's nearest guess. A span's and a
link's ``trace_id``, ``span_id`` and ``parent_span_id`` are lowercase hex (as W3C
``traceparent`` spells them), not protobuf JSON's base64; a root span has no
``parent_span_id`` (proto3 JSON leaves out an empty field).

No OpenTelemetry Collector is packaged on the registries this project installs from
(Debian, PyPI), so the OTLP end-to-end tests (``crates/server/tests/otlp_e2e.rs``,
``envoy_trace_e2e.rs``) run this instead: the same wire format and the same protobuf
definitions a collector decodes.

It listens on loopback only, on a free port it writes to ``--port-file`` (written whole,
then renamed, so a reader never sees half a number), and exits by itself after
``--max-seconds`` (or on SIGTERM / SIGINT), so it never outlives a test that forgot it.

Usage::

    python tests/lb/otlp_receiver.py --port-file PORT --out requests.jsonl \\
        [--traces-out spans.jsonl] --max-seconds 120
"""

import argparse
import base64
import json
import os
import signal
import threading
from concurrent import futures

import grpc
from google.protobuf import json_format
from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2, metrics_service_pb2_grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc

# The id fields of spans and their links, written as hex.
ID_FIELDS = ("trace_id", "span_id", "parent_span_id")


def exact(value):
    """``value`` with every float replaced by its round-trip ``repr`` string."""
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, dict):
        return {k: exact(v) for k, v in value.items()}
    if isinstance(value, list):
        return [exact(v) for v in value]
    return value


def hex_ids(decoded):
    """``decoded`` (an ``ExportTraceServiceRequest`` as a dict) with every span's and
    link's ids turned from protobuf JSON's base64 into lowercase hex, in place."""

    def fix(item):
        for key in ID_FIELDS:
            if key in item:
                item[key] = base64.b64decode(item[key]).hex()

    for resource in decoded.get("resource_spans", []):
        for scope in resource.get("scope_spans", []):
            for span in scope.get("spans", []):
                fix(span)
                for link in span.get("links", []):
                    fix(link)
    return decoded


class JsonLines:
    """Appends lines to a file, one writer at a time (grpcio serves on a thread pool)."""

    def __init__(self, path):
        self.path = path
        self.lock = threading.Lock()

    def append(self, decoded):
        if self.path is None:
            return
        line = json.dumps(exact(decoded))
        with self.lock, open(self.path, "a", encoding="utf-8") as f:
            f.write(line + "\n")


def decode(request):
    return json_format.MessageToDict(request, preserving_proto_field_name=True)


class Metrics(metrics_service_pb2_grpc.MetricsServiceServicer):
    """Appends every metrics request, decoded, to ``--out``; accepts it whole."""

    def __init__(self, out):
        self.out = out

    def Export(self, request, context):
        self.out.append(decode(request))
        return metrics_service_pb2.ExportMetricsServiceResponse()


class Traces(trace_service_pb2_grpc.TraceServiceServicer):
    """Appends every trace request, decoded and with hex ids, to ``--traces-out``; accepts
    it whole."""

    def __init__(self, out):
        self.out = out

    def Export(self, request, context):
        self.out.append(hex_ids(decode(request)))
        return trace_service_pb2.ExportTraceServiceResponse()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port-file", required=True)
    parser.add_argument("--out", required=True, help="metrics requests, one JSON line each")
    parser.add_argument("--traces-out", help="trace requests, one JSON line each")
    parser.add_argument("--max-seconds", type=float, default=120.0)
    args = parser.parse_args()

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    metrics_service_pb2_grpc.add_MetricsServiceServicer_to_server(
        Metrics(JsonLines(args.out)), server
    )
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(
        Traces(JsonLines(args.traces_out)), server
    )
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    tmp = args.port_file + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(str(port))
    os.replace(tmp, args.port_file)

    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    stop.wait(args.max_seconds)
    server.stop(grace=1).wait(2)


if __name__ == "__main__":
    main()
