"""The demo's two endpoint processes, run inside the hosts' namespaces (``nsenter --net``).

Each side of the write runs in its own process, as ``mrc write`` and ``mrc listen`` do, so
neither the other endpoint nor the demo's sampling and gRPC threads delay its SACKs (one Python
process for everything stalls for longer than an agent RTO and retires healthy EVs).

The processes talk JSON lines on stdout; the demo writes commands on stdin:

- ``respond``: registers a region of ``--size`` bytes (rkey ``--rkey``), creates the QP, prints
  ``{"ready": ...}``, then ``{"placed": BYTES, "t_ns": ...}`` every ``--every`` seconds; after
  the WRITE_WITH_IMM completion, it compares the region with the data that ``--seed`` gives and
  prints ``{"done": ..., "sha256": ..., "verified": BYTES, "stats": {...}}``; when its stdin
  closes it prints ``{"final": ..., "stats": ..., "ev_rx_sent": {EV: [send times, us]}}``
  (every packet from the peer, by the EV it arrived on, dated when it was sent: ``EvTally``;
  the requestor's last retransmissions included) and exits.
- ``write``: creates the QP, prints ``{"ready": ...}``, waits for the line ``go``, posts one
  WRITE_WITH_IMM of the ``--seed`` data, and prints ``{"done": ..., "started_ns": ...,
  "finished_ns": ..., "stats": {...}}`` or ``{"error": TEXT}``.

Both run ``--endpoint`` (``native`` or ``python``, ``mrckit.endpoint.implementation``); each
responder tallies packets per EV, the Python one by wrapping its ``handle`` (``EvTally``), the
native one from the C endpoint's arrival log (``NativeTally``).

The data is ``random.Random(seed).randbytes(size)``: both sides and the demo derive it.
:class:`WorkerProcess` is the demo's side: it starts one of these in a host's namespace and
follows its lines.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import sys
import threading
import time

import numpy as np

from ...wire.ev import ev_from_flowinfo
from ...wire.headers import data_tx_timestamp, unwrap_timestamp
from ..common import JsonLinesProcess, seeded_bytes

MODULE = "mrckit.apps.demo.worker"
SACK_EVERY_PACKET = 1
"""Responder SACK coalescing, bytes: a SACK (and so an echoed EV) per packet, which is what
the host agent's per-EV ack times need."""


def demo_data(seed: int, size: int) -> bytes:
    """The ``size`` bytes the demo writes for ``seed`` (deterministic)."""
    return seeded_bytes(seed, size)


def _set_when_stdin_closes(closed: threading.Event) -> None:
    """The demo closes the worker's stdin to stop it."""
    sys.stdin.read()
    closed.set()


def _say(**msg) -> None:
    sys.stdout.write(json.dumps(msg) + "\n")
    sys.stdout.flush()


def _stats(obj) -> dict:
    """A stats dataclass as JSON-ready data: counters keyed by text (``nack_trimmed``, ``0x1``)."""
    # Not dataclasses.asdict: it rebuilds a Counter from (key, count) pairs, counting the pairs.
    return {f.name: _plain(getattr(obj, f.name)) for f in dataclasses.fields(obj)}


def _plain(value):
    if isinstance(value, dict):
        return {getattr(k, "name", None) or str(k): n for k, n in value.items()}
    return value


class EvTally:
    """Packets that reach the responder, per EV (``UDP sport << 16 | flow label & 0xFFFF``,
    design 3.3, as the responder itself reads it), each with the time it was SENT: the
    receiving side of the demo's loss accounting (``mrckit.apps.demo.loss``), which then counts
    the packets sent on an EV before a time that never arrived, with no packet in flight to
    blur it. The send time is the data packet's TSETH tx_timestamp (the requestor's
    CLOCK_MONOTONIC in units of 1.024 us, 16 bits, design 3.2), unwrapped against the arrival
    time (a packet that waited more than one wrap, 67 ms, would be dated one wrap late); a
    packet without one (a PROBE) is dated by its arrival. Wraps ``responder.handle``."""

    def __init__(self, responder):
        self._sent: dict[int, list[int]] = {}
        self._lock = threading.Lock()
        inner = responder.handle

        def handle(buf, n, tclass, flowinfo, sport, peer):
            ev = ev_from_flowinfo(flowinfo, sport)
            t_ns = send_time(data_tx_timestamp(buf, n), time.monotonic_ns())
            with self._lock:
                self._sent.setdefault(ev, []).append(t_ns)
            inner(buf, n, tclass, flowinfo, sport, peer)

        responder.handle = handle

    def snapshot(self) -> dict[str, list[int]]:
        """EV (decimal text, a JSON key) -> send times (us, CLOCK_MONOTONIC) of the packets
        received on it, ascending."""
        with self._lock:
            return _as_json(self._sent)


class NativeTally:
    """:class:`EvTally` for the native endpoint, whose packets no Python code sees: the C
    endpoint's arrival log (``NativeEndpoint.arrivals``) notes each datagram handed to the
    responder with its EV, its arrival time and its TSETH tx_timestamp, and this dates it the
    same way."""

    def __init__(self, ep):
        self._ep = ep
        self._sent: dict[int, list[int]] = {}
        ep.log_arrivals(True)

    def snapshot(self) -> dict[str, list[int]]:
        """As :meth:`EvTally.snapshot`."""
        for ev, arrival_ns, ts in self._ep.arrivals():
            self._sent.setdefault(ev, []).append(send_time(ts, arrival_ns))
        return _as_json(self._sent)


def send_time(ts: int | None, arrival_ns: int) -> int:
    """When a packet arriving at ``arrival_ns`` (ns, CLOCK_MONOTONIC) was sent (ns): its TSETH
    tx_timestamp ``ts`` (16 bits, 1.024 us units, design 3.2) unwrapped against the arrival,
    or the arrival itself when it has none (``ts`` None: a PROBE, or BTH ts = 0)."""
    return arrival_ns if ts is None else unwrap_timestamp(ts, arrival_ns)


def _as_json(sent: dict[int, list[int]]) -> dict[str, list[int]]:
    """EV -> send times (ns) as a tally's snapshot gives them: decimal EV keys, times in us,
    ascending."""
    return {str(ev): sorted(t // 1000 for t in times) for ev, times in sent.items()}


def timeout_exp(endpoint: str, exp: int | None) -> int:
    """The writer's RTO exponent (RTO = 1.024 us x 2^exp): ``exp`` when given, else the
    endpoint's own default (native 2^8 = 262 us, Python 2^16 = 67 ms)."""
    if exp is not None:
        return exp
    if endpoint == "native":
        from ...endpoint.native import NATIVE_TIMEOUT_EXP

        return NATIVE_TIMEOUT_EXP
    from ...endpoint.requestor import RetryConfig

    return RetryConfig().timeout_exp


def _endpoint(args):
    from ...endpoint import implementation

    try:
        return implementation(args.endpoint)
    except ValueError as exc:
        _say(error=f"cannot start the {args.endpoint} endpoint: {exc}")
        sys.exit(1)


def respond(args) -> int:
    ep = _endpoint(args)(args.nic, sack_coalesce_bytes=SACK_EVERY_PACKET)
    tally = EvTally(ep.responder) if args.endpoint == "python" else NativeTally(ep)
    try:
        mr = ep.register_mr(args.size, rkey=args.rkey)
        ep.create_qp(args.peer, qpn=args.qpn, remote_qpn=args.remote_qpn)
        _say(ready=True)
        closed = threading.Event()
        threading.Thread(target=_set_when_stdin_closes, args=(closed,), daemon=True).start()
        done = False
        while not closed.is_set():
            _say(placed=mr.placed_bytes, t_ns=time.monotonic_ns())
            if not done and ep.poll_recv(timeout=args.every) is not None:
                done = True
                expected = demo_data(args.seed, args.size)
                same = np.frombuffer(expected, np.uint8) == np.frombuffer(mr.buf, np.uint8)
                _say(placed=mr.placed_bytes, t_ns=time.monotonic_ns())
                _say(done=True, sha256=hashlib.sha256(mr.buf).hexdigest(), verified=int(np.count_nonzero(same)),
                     stats=_stats(ep.responder.stats))
            elif done:
                closed.wait(args.every)
        _say(final=True, t_ns=time.monotonic_ns(), stats=_stats(ep.responder.stats), ev_rx_sent=tally.snapshot())
    finally:
        ep.close()
    return 0


def write(args) -> int:
    from ...endpoint import QpError
    from ...endpoint.cc import NsccConfig
    from ...endpoint.endpoint import QpConfig
    from ...endpoint.requestor import INFINITE_RETRIES, RetryConfig

    ep = _endpoint(args)(args.nic)
    try:
        # The QP never gives up by itself (as in ``mrc traffic``): at the native RTO (262 us) its
        # 14 retries last ~70 ms, which a loaded 2-core machine can stall the endpoint for; the
        # demo's WRITE_TIMEOUT_S bounds the write anyway.
        config = QpConfig(retry=RetryConfig(timeout_exp=timeout_exp(args.endpoint, args.timeout_exp),
                                            exp_retries=INFINITE_RETRIES))
        if args.max_cwnd:
            config.cc = NsccConfig.capped(args.max_cwnd)
        qp = ep.create_qp(args.peer, qpn=args.qpn, remote_qpn=args.remote_qpn, config=config)
        data = demo_data(args.seed, args.size)
        _say(ready=True)
        if sys.stdin.readline().strip() != "go":
            return 1
        comp = ep.write(qp, data, 0, args.rkey, imm=args.imm)
        _say(started_ns=comp.started_ns)
        try:
            comp.wait(args.timeout)
        except (QpError, TimeoutError) as exc:
            _say(error=str(exc), stats=_stats(qp.requestor.stats))
            return 1
        _say(done=True, started_ns=comp.started_ns, finished_ns=comp.finished_ns, stats=_stats(qp.requestor.stats))
    finally:
        ep.close()
    return 0


class WorkerProcess(JsonLinesProcess):
    """One of these processes (``module``: this one by default) in a host's namespace, as the
    demo follows it: besides ``state``, the responder's final ``ev_rx_sent`` is kept apart, as
    EV -> send times in ns."""

    def __init__(self, host, argv: list[str], *, module: str = MODULE, role: str | None = None):
        self.ev_rx_sent: dict[int, list[int]] = {}
        """From the responder's final line: EV -> send times (ns) of the packets that reached it."""
        super().__init__(host, argv, module=module, role=role)

    def _take(self, msg: dict) -> None:
        if "ev_rx_sent" in msg:
            self.ev_rx_sent = {int(ev): [t * 1000 for t in ts] for ev, ts in msg.pop("ev_rx_sent").items()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m mrckit.apps.demo.worker", description=__doc__.splitlines()[0])
    ap.add_argument("role", choices=["respond", "write"])
    ap.add_argument("--nic", required=True)
    ap.add_argument("--peer", required=True)
    ap.add_argument("--size", type=int, required=True)
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--qpn", type=int, required=True)
    ap.add_argument("--remote-qpn", type=int, required=True)
    ap.add_argument("--rkey", type=int, required=True)
    ap.add_argument("--imm", type=int, default=1)
    ap.add_argument("--every", type=float, default=0.02)
    ap.add_argument("--timeout", type=float, default=600.0)
    ap.add_argument("--max-cwnd", type=int, default=0, help="cap of the writer's window in packets (0: none)")
    ap.add_argument("--timeout-exp", type=int, default=None,
                    help="the writer's RTO is 1.024 us x 2^N (default: the endpoint's own)")
    ap.add_argument("--endpoint", choices=["native", "python"], default="native")
    args = ap.parse_args(argv)
    return respond(args) if args.role == "respond" else write(args)


if __name__ == "__main__":
    sys.exit(main())
