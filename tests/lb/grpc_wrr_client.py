#!/usr/bin/env python3
"""A stock gRPC C-core client (grpcio) balancing livecount Converse sessions.

One channel to every agent at once (a static ``ipv4:`` target list), the
``weighted_round_robin`` policy with out-of-band ORCA load reports: C-core opens
``xds.service.orca.v3.OpenRcaService/StreamCoreMetrics`` to each backend and weighs it
``rps_fractional / application_utilization`` -- the backend's headroom in sessions (see
``crates/report/src/orca.rs``). C-core balances per call, so every ``Converse`` stream
(one session) is placed on its own.

Each session speaks a few times (``--chunks`` chunks each, reading up to ``done``) and
ends with ``bye`` (counted ``closed``), or -- a ``--kill-share`` of them, chosen by
``--seed`` -- is cancelled abruptly at a random moment (``call.cancel()``: RST_STREAM
CANCEL on the wire, counted ``cancelled``; half of those mid-response). Any other ending
is a failure, counted by status code and details.

The summary (JSON on stdout and in ``--out``) has ``opened``, ``closed``, ``cancelled``,
``failed`` and ``failures``, and, parsed from C-core's own trace
(``GRPC_TRACE=weighted_round_robin_lb``, ``GRPC_VERBOSITY=debug``, which this script sets
before importing grpc and sends to ``--grpc-log``), the weights C-core computed:
``weights.reports`` (per backend address: every ORCA report's qps, utilisation and the
weight set from it), ``weights.not_updating`` (reports C-core ignored: qps or
utilisation not positive) and ``weights.schedulers`` (each new set of weights a picker
was built with, by backend address).

``--no-oob`` turns out-of-band reporting off: C-core then weighs each backend by the
report in every call's trailing metadata (``endpoint-load-metrics-bin``, per call: gRFC
A51), which a ``Converse`` session sends only when it ends; ``--health-every S`` adds a
``grpc.health.v1.Health/Check`` call every S seconds on the same channel (not a session;
it ends at once and reports). The summary then has ``first_call_at`` / ``ready_at`` and
each scheduler's ``at``, local seconds of the day from C-core's log prefix, to time how
fast a backend's weight moved.

``--probe`` instead makes one short call and reports its status: with
``--authority ''`` (C-core's default ``:authority``, the whole comma-separated target)
that shows the agent's HTTP/2 layer refusing the stream.

Every wait is bounded: each call has a deadline (``--call-timeout``), the channel must be
ready within ``--connect-timeout``, and threads are joined with timeouts.

Usage (the end-to-end test ``crates/server/tests/grpc_wrr_e2e.rs`` runs it)::

    python tests/lb/grpc_wrr_client.py --stubs DIR --targets 127.0.0.1:P1,127.0.0.1:P2 \\
        --sessions 60 --ramp 6 --hold-min 4 --hold-max 6 --kill-share 0.3 --seed 7 \\
        --out summary.json --grpc-log grpc.log

``--stubs`` is a directory holding ``livecount/agent/v1/agent_pb2{,_grpc}.py``,
generated from ``crates/server/proto`` with ``python -m grpc_tools.protoc``.
"""

import argparse
import json
import os
import queue
import random
import re
import sys
import threading
import time
from collections import Counter, defaultdict

SENTINEL = object()


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--targets", required=True, help="host:port,host:port,... (the agents' --grpc)")
    p.add_argument("--stubs", required=True, help="directory with the generated livecount stubs")
    p.add_argument("--sessions", type=int, default=60, help="sessions to open")
    p.add_argument("--ramp", type=float, default=6.0, help="seconds over which sessions start")
    p.add_argument("--hold-min", type=float, default=4.0, help="shortest session, seconds")
    p.add_argument("--hold-max", type=float, default=6.0, help="longest session, seconds")
    p.add_argument("--speak-every", type=float, default=0.7, help="seconds between speaks")
    p.add_argument("--chunks", type=int, default=5, help="chunks per response")
    p.add_argument("--kill-share", type=float, default=0.3, help="share of sessions cancelled")
    p.add_argument("--seed", type=int, default=7, help="random seed (start times, kills)")
    p.add_argument("--warmup", type=float, default=2.5,
                   help="seconds between the channel being ready and the first session: "
                        "long enough for an ORCA report and the blackout period")
    p.add_argument("--authority", default="livecount-agents",
                   help="grpc.default_authority ('' leaves C-core's default: the target list)")
    p.add_argument("--call-timeout", type=float, default=30.0, help="deadline of every call, s")
    p.add_argument("--connect-timeout", type=float, default=10.0, help="channel ready within, s")
    p.add_argument("--no-oob", action="store_true",
                   help="enableOobLoadReport false: C-core weighs each backend by the in-band "
                        "report in every call's trailers (endpoint-load-metrics-bin), per call")
    p.add_argument("--health-every", type=float, default=0.0,
                   help="also call grpc.health.v1.Health/Check every this many seconds on the "
                        "same channel, from the channel being ready to the end (0: never); "
                        "each call ends at once and, in-band, reports")
    p.add_argument("--probe", action="store_true",
                   help="make one short call and report its status instead of a run")
    p.add_argument("--out", help="also write the JSON summary here")
    p.add_argument("--grpc-log", help="C-core's trace goes here (parsed for the weights)")
    return p.parse_args()


def redirect_core_log(path):
    """Points fd 2 (where C-core / absl log) at `path`; Python's stderr keeps the terminal.

    Must run before grpc is imported: C-core reads GRPC_TRACE and GRPC_VERBOSITY once.
    """
    os.environ["GRPC_TRACE"] = "weighted_round_robin_lb"
    os.environ["GRPC_VERBOSITY"] = "debug"
    saved = os.dup(2)
    log = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(log, 2)
    os.close(log)
    sys.stderr = os.fdopen(saved, "w", buffering=1)


def service_config(oob=True):
    """The channel's service config: WRR weighing by ORCA reports, out-of-band (a stream per
    backend) or, with ``oob=False``, in-band (each call's trailers)."""
    return {
        "loadBalancingConfig": [
            {
                "weighted_round_robin": {
                    "enableOobLoadReport": oob,
                    "oobReportingPeriod": "1s",
                    "blackoutPeriod": "1s",
                    "weightUpdatePeriod": "0.1s",
                }
            }
        ]
    }


def channel_options(authority, oob=True):
    opts = [
        ("grpc.service_config", json.dumps(service_config(oob))),
        # Without this the :authority is the whole "ipv4:a:p1,b:p2" target, which the
        # agent's HTTP/2 layer (h2 parsing it as a URI authority) refuses: RST_STREAM.
        ("grpc.default_authority", authority),
    ]
    return [o for o in opts if o[1] != ""]


class Session:
    """One Converse call: speaks, then bye or an abrupt cancel."""

    def __init__(self, pb, stub, args, start_at, hold, kill_at, kill_mid_response):
        self.pb, self.stub, self.args = pb, stub, args
        self.start_at, self.hold = start_at, hold
        self.kill_at, self.kill_mid_response = kill_at, kill_mid_response
        self.outcome = None  # "closed" | "cancelled" | "failed"
        self.opened = False
        self.failure = None
        self.requests = queue.Queue()

    def frames(self):
        while True:
            f = self.requests.get()
            if f is SENTINEL:
                return
            yield f

    def send(self, **kw):
        self.requests.put(self.pb.ClientFrame(**kw))

    def run(self, t0):
        import grpc

        delay = t0 + self.start_at - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        began = time.monotonic()
        call = self.stub.Converse(self.frames(), timeout=self.args.call_timeout)
        try:
            while True:
                now = time.monotonic() - began
                killing = self.kill_at is not None and now >= self.kill_at
                if killing and not self.kill_mid_response:
                    call.cancel()
                    self.outcome = "cancelled"
                    return
                if now >= self.hold and self.kill_at is None:
                    self.send(bye=self.pb.Bye())
                    for _ in call:  # the server ends the call OK after bye
                        pass
                    self.outcome = "closed"
                    return
                self.send(speak=self.pb.Speak(chunks=self.args.chunks))
                for frame in call:
                    which = frame.WhichOneof("frame")
                    if which == "chunk" and killing:
                        call.cancel()  # mid-response
                        self.outcome = "cancelled"
                        return
                    if which == "done":
                        self.opened = True
                        break
                    if which == "error":
                        raise RuntimeError("error frame: " + frame.error.message)
                else:
                    raise RuntimeError("response stream ended before done")
                # Until the next speak, or the session's end (bye or kill), if sooner.
                end = self.kill_at if self.kill_at is not None else self.hold
                spoke = time.monotonic() - began
                pause = min(spoke + self.args.speak_every, end) - spoke
                if pause > 0:
                    time.sleep(pause)
        except grpc.RpcError as e:
            if self.outcome is None:
                self.outcome = "failed"
                self.failure = f"{e.code().name}: {e.details()}"
        except Exception as e:  # noqa: BLE001 (counted, reported)
            self.outcome = "failed"
            self.failure = f"client: {e}"
            call.cancel()
        finally:
            self.requests.put(SENTINEL)


WEIGHT_RE = re.compile(
    r"subchannel (?P<addr>\S+): qps=(?P<qps>[-0-9.e+naif]+), eps=(?P<eps>[-0-9.e+naif]+), "
    r"utilization=(?P<util>[-0-9.e+naif]+).*?(?P<rest>setting weight=(?P<w>[-0-9.e+naif]+)|"
    r"\(not updating\))"
)
SCHED_RE = re.compile(r"new weights: (?P<w>[-0-9.e+ naif]+)$")
# absl's log prefix: severity, MMDD, local time of day.
TIME_RE = re.compile(r"^[IWEF]\d{4} (?P<h>\d\d):(?P<m>\d\d):(?P<s>\d\d(?:\.\d+)?)")


def time_of_day(line):
    """Seconds since local midnight from an absl log line's prefix, or None."""
    m = TIME_RE.match(line)
    return int(m["h"]) * 3600 + int(m["m"]) * 60 + float(m["s"]) if m else None


def now_of_day():
    """The local time of day in seconds, as absl's log prefix writes it."""
    import datetime

    t = datetime.datetime.now()
    return t.hour * 3600 + t.minute * 60 + t.second + t.microsecond / 1e6


def parse_weights(path):
    """C-core's weights from its `weighted_round_robin_lb` trace in `path`.

    A scheduler's weights are logged in C-core's endpoint order, which is not the target's
    order; each is labelled with the backend whose latest report set that exact weight (a
    weight of 0 is C-core's "unknown": no report yet, or still in the blackout period).
    """
    reports = defaultdict(list)
    latest = {}  # address -> the weight its latest report set, as C-core printed it
    not_updating = []
    schedulers = []
    lines = 0
    try:
        with open(path, errors="replace") as f:
            for line in f:
                if "WRR" not in line:
                    continue
                lines += 1
                m = WEIGHT_RE.search(line)
                if m:
                    entry = {"qps": float(m["qps"]), "utilization": float(m["util"])}
                    if m["w"] is not None:
                        entry["weight"] = float(m["w"])
                        reports[m["addr"]].append(entry)
                        latest[m["addr"]] = m["w"]
                    else:
                        entry["addr"] = m["addr"]
                        not_updating.append(entry)
                    continue
                m = SCHED_RE.search(line.rstrip())
                if m:
                    labelled, used = {}, set()
                    for i, w in enumerate(m["w"].split()):
                        owner = next(
                            (a for a, lw in latest.items() if lw == w and a not in used), None
                        )
                        if owner is None or float(w) == 0:
                            owner = f"unknown-{i}"
                        used.add(owner)
                        labelled[owner] = float(w)
                    if not schedulers or schedulers[-1]["weights"] != labelled:
                        schedulers.append({"at": time_of_day(line), "weights": labelled})
    except FileNotFoundError:
        return None

    def stats(ws):
        ws = sorted(ws)
        return {"n": len(ws), "min": ws[0], "median": ws[len(ws) // 2], "max": ws[-1]}

    return {
        "trace_lines": lines,
        "reports": {a: r for a, r in sorted(reports.items())},
        "weight_stats": {
            a: stats([e["weight"] for e in r]) for a, r in sorted(reports.items())
        },
        "not_updating": not_updating,
        "schedulers": schedulers,
    }


class HealthCalls:
    """``Health/Check`` (empty service: the server's overall health) on the channel every
    ``every`` seconds on a thread, until ``stop``; counts answers and failures."""

    def __init__(self, grpc, channel, every):
        self.check = channel.unary_unary("/grpc.health.v1.Health/Check",
                                         request_serializer=lambda b: b,
                                         response_deserializer=lambda b: b)
        self.grpc, self.every = grpc, every
        self.ok, self.failed = 0, Counter()
        self.done = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        # Jittered (0.5-1.5 x every): calls at the sessions' own cadence would interleave
        # with them in the scheduler, one backend getting every check and another every
        # session.
        rng = random.Random(5)
        while not self.done.wait(self.every * (0.5 + rng.random())):
            try:
                self.check(b"", timeout=5)  # an empty HealthCheckRequest
                self.ok += 1
            except self.grpc.RpcError as e:
                self.failed[f"{e.code().name}: {e.details()}"] += 1

    def stop(self):
        self.done.set()
        self.thread.join(timeout=10)
        return {"ok": self.ok, "failed": dict(self.failed)}


def start_health_calls(grpc, channel, every):
    return HealthCalls(grpc, channel, every) if every > 0 else None


def main():
    args = parse_args()
    if args.grpc_log:
        redirect_core_log(args.grpc_log)
    sys.path.insert(0, args.stubs)
    import grpc
    from livecount.agent.v1 import agent_pb2 as pb
    from livecount.agent.v1 import agent_pb2_grpc as pb_grpc

    target = "ipv4:" + args.targets
    options = channel_options(args.authority, oob=not args.no_oob)
    summary = {
        "target": target,
        "options": {k: (json.loads(v) if k == "grpc.service_config" else v) for k, v in options},
    }
    started = time.monotonic()
    channel = grpc.insecure_channel(target, options=options)
    stub = pb_grpc.AgentStub(channel)
    try:
        if args.probe:
            # One call: speak, read to done, bye. Reports its status (OK or the error).
            requests = queue.Queue()
            requests.put(pb.ClientFrame(speak=pb.Speak(chunks=1)))
            call = stub.Converse(iter(requests.get, SENTINEL), timeout=args.call_timeout)
            got = []
            try:
                for frame in call:
                    got.append(frame.WhichOneof("frame"))
                    if got[-1] == "done":
                        requests.put(pb.ClientFrame(bye=pb.Bye()))
                summary.update(code="OK", details="")
            except grpc.RpcError as e:
                summary.update(code=e.code().name, details=e.details())
            finally:
                requests.put(SENTINEL)
            summary["frames"] = got
        else:
            grpc.channel_ready_future(channel).result(timeout=args.connect_timeout)
            health = start_health_calls(grpc, channel, args.health_every)
            summary["ready_at"] = now_of_day()
            time.sleep(args.warmup)
            rng = random.Random(args.seed)
            sessions = []
            for i in range(args.sessions):
                start_at = args.ramp * i / max(args.sessions, 1) + rng.uniform(0, 0.05)
                hold = rng.uniform(args.hold_min, args.hold_max)
                killed = rng.random() < args.kill_share
                kill_at = rng.uniform(0.3 * hold, 0.9 * hold) if killed else None
                mid_response = rng.random() < 0.5
                sessions.append(Session(pb, stub, args, start_at, hold, kill_at, mid_response))
            t0 = time.monotonic()
            summary["first_call_at"] = now_of_day()
            threads = [threading.Thread(target=s.run, args=(t0,), daemon=True) for s in sessions]
            for t in threads:
                t.start()
            limit = t0 + args.ramp + args.call_timeout + 5
            for t in threads:
                t.join(timeout=max(0.0, limit - time.monotonic()))
            outcomes = Counter(s.outcome or "unfinished" for s in sessions)
            summary.update(
                sessions=args.sessions,
                opened=sum(s.opened for s in sessions),
                closed=outcomes["closed"],
                cancelled=outcomes["cancelled"],
                failed=outcomes["failed"],
                unfinished=outcomes["unfinished"],
                failures=dict(Counter(s.failure for s in sessions if s.failure)),
            )
            if health is not None:
                summary["health_calls"] = health.stop()
    finally:
        channel.close()
    summary["seconds"] = round(time.monotonic() - started, 2)
    if args.grpc_log:
        sys.stderr.flush()
        summary["weights"] = parse_weights(args.grpc_log)
    text = json.dumps(summary, indent=1)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
