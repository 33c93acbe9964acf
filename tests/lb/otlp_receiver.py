#!/usr/bin/env python3
"""An OTLP/gRPC metrics receiver on the official protobufs (PyPI ``opentelemetry-proto``)
and grpcio: ``opentelemetry.proto.collector.metrics.v1.MetricsService/Export``, decoded by
the generated message classes, each request appended to ``--out`` as one JSON line
(``json_format.MessageToDict`` with the proto field names: 64-bit integers are strings, and
so are doubles here, as Python's shortest round-trip ``repr``, so that a reader parses the
exact value the exporter sent rather than its JSON parser's nearest guess).

No OpenTelemetry Collector is packaged on the registries this project installs from
(Debian, PyPI), so the OTLP end-to-end test (``crates/server/tests/otlp_e2e.rs``) runs
this instead: the same wire format and the same protobuf definitions a collector decodes.

It listens on loopback only, on a free port it writes to ``--port-file`` (written whole,
then renamed, so a reader never sees half a number), and exits by itself after
``--max-seconds`` (or on SIGTERM / SIGINT), so it never outlives a test that forgot it.

Usage::

    python tests/lb/otlp_receiver.py --port-file PORT --out requests.jsonl --max-seconds 120
"""

import argparse
import json
import os
import signal
import threading
from concurrent import futures

import grpc
from google.protobuf import json_format
from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2, metrics_service_pb2_grpc


def exact(value):
    """``value`` with every float replaced by its round-trip ``repr`` string."""
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, dict):
        return {k: exact(v) for k, v in value.items()}
    if isinstance(value, list):
        return [exact(v) for v in value]
    return value


class Receiver(metrics_service_pb2_grpc.MetricsServiceServicer):
    """Appends every request, decoded, to a JSON-lines file; accepts it whole."""

    def __init__(self, out):
        self.out = out
        self.lock = threading.Lock()

    def Export(self, request, context):
        decoded = json_format.MessageToDict(request, preserving_proto_field_name=True)
        line = json.dumps(exact(decoded))
        with self.lock, open(self.out, "a", encoding="utf-8") as f:
            f.write(line + "\n")
        return metrics_service_pb2.ExportMetricsServiceResponse()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port-file", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--max-seconds", type=float, default=120.0)
    args = parser.parse_args()

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    metrics_service_pb2_grpc.add_MetricsServiceServicer_to_server(Receiver(args.out), server)
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
