"""Run a traffic pattern on a running fabric: one worker process per host involved, every QP
of the pattern at once, and the per-flow results gathered into a :class:`TrafficReport`."""

from __future__ import annotations

import json
import time
from collections.abc import Callable

from ...endpoint.choices import check_transport
from ...errors import MrcError
from ..common import JsonLinesProcess
from .patterns import Flow
from .report import FlowResult, TrafficReport
from .worker import MODULE

READY_TIMEOUT_S = 180.0
"""How long a worker may take to start and create its QPs and regions (a loaded machine
starts 16 Python processes slowly)."""


def default_timeout_exp(endpoint: str) -> int:
    """The writers' RTO exponent for ``endpoint`` when none is given: the native endpoint's
    2^8 (262 us), or the Python endpoint's 2^16 (67 ms), which its timers hold on a loaded
    machine (docs/endpoint.md)."""
    from ...endpoint.native import NATIVE_TIMEOUT_EXP
    from ...endpoint.requestor import RetryConfig

    return NATIVE_TIMEOUT_EXP if endpoint == "native" else RetryConfig().timeout_exp


class _Worker(JsonLinesProcess):
    """A traffic worker whose ``placed`` lines are kept in order, as ``[t_ns, bytes]``."""

    def __init__(self, host):
        self.placed: list[list[int]] = []
        super().__init__(host, [], module=MODULE, role="traffic worker")

    def _take(self, msg: dict) -> None:
        if "placed" in msg:
            self.placed.append([msg.pop("t_ns"), msg.pop("placed")])


def _plans(fabric, flows: list[Flow], endpoint: str, seed: int, timeout: float,
           timeout_exp: int, progress_s: float, max_cwnd: int, transport: str = "mrc") -> dict[str, dict]:
    """Host name -> its worker's plan (see ``worker``)."""
    nic = {name: fabric.host(name).nic_address for name in {f.src for f in flows} | {f.dst for f in flows}}
    plans = {name: {"nic": addr, "endpoint": endpoint, "seed": seed, "timeout": timeout, "timeout_exp": timeout_exp,
                    "progress_s": progress_s, "max_cwnd": max_cwnd, "transport": transport, "send": [], "recv": []}
             for name, addr in nic.items()}
    for f in flows:
        plans[f.src]["send"].append([f.id, nic[f.dst], f.size, f.writes])
        plans[f.dst]["recv"].append([f.id, nic[f.src], f.size, f.writes])
    return plans


def _results(flows: list[Flow], sent: dict[str, dict], recvs: dict[str, dict]) -> list[FlowResult]:
    """One :class:`FlowResult` per flow from the writers' ``sent`` and the receivers' ``recvs``
    (host -> flow id text -> the worker's lists)."""
    out = []
    for f in flows:
        start, end, error, *times = sent[f.src].get(str(f.id), [None, None, "no result from the writer"])
        recv = recvs[f.dst].get(str(f.id))
        verified = bool(recv and recv[1])
        if error is None and recv is None:
            error = "the writer completed but the receiver saw no WRITE_WITH_IMM completion"
        elif error is None and not verified:
            error = "the bytes placed at the receiver differ from the bytes written"
        out.append(FlowResult(id=f.id, src=f.src, dst=f.dst, size=f.size, writes=f.writes, start_ns=start,
                              end_ns=end, writes_ns=times[0] if times else [], arrived=recv is not None,
                              verified=verified, error=error))
    return out


def run_traffic(fabric, pattern: str, flows: list[Flow], *, endpoint: str = "native", seed: int = 0,
                timeout: float = 300.0, timeout_exp: int | None = None, progress_s: float = 0.0,
                on_go: Callable[[int], None] | None = None, max_cwnd: int = 0,
                transport: str = "mrc") -> TrafficReport:
    """Move every flow of ``flows`` across ``fabric`` (a running :class:`mrckit.fabric.Fabric`)
    at once, each as one WRITE_WITH_IMM on its own QP of ``endpoint`` (``native`` or
    ``python``), and verify every byte. ``timeout`` is the seconds the whole run may take once
    started; ``timeout_exp`` sets the writers' RTO, 1.024 us × 2^N (None: the endpoint's
    default, :func:`default_timeout_exp`). ``progress_s`` > 0: every receiving worker reports
    the bytes placed so far every ``progress_s`` s, kept in the report's ``placed``.
    ``on_go(t_ns)``: called with the CLOCK_MONOTONIC ns at which every worker was told to
    start (from this thread; it must return at once, e.g. by setting an event). ``max_cwnd``:
    cap every writer's window at that many full packets (0: the endpoint's own limit).
    ``transport``: what every QP speaks, ``mrc`` or ``rc`` (the RC baseline, native only: each
    QP stays on one EV when the fabric's host agents run in pinned-EV mode,
    ``mrc fabric up --transport rc``).

    Raises:
        MrcError: an unknown endpoint or transport, rc with the Python endpoint, or a worker did not start or died (naming the host);
            flows that fail or time out are reported in the returned report, not raised.
    """
    try:
        check_transport(transport, endpoint)
    except ValueError as exc:
        raise MrcError(str(exc)) from None
    if timeout_exp is None:
        timeout_exp = default_timeout_exp(endpoint)
    plans = _plans(fabric, flows, endpoint, seed, timeout, timeout_exp, progress_s, max_cwnd, transport)
    workers: dict[str, _Worker] = {}
    try:
        for name, plan in plans.items():
            workers[name] = _Worker(fabric.host(name))
            workers[name].send(json.dumps(plan))
        for w in workers.values():
            w.wait("ready", READY_TIMEOUT_S)
        started = time.monotonic_ns()
        for w in workers.values():
            w.send("go")
        if on_go:
            on_go(started)
        sent = {name: w.wait("sent", timeout + READY_TIMEOUT_S)["sent"] for name, w in workers.items()}
        finished = time.monotonic_ns()
        for w in workers.values():
            w.send("stop")  # every writer has ended: what has not arrived will not
        done = {name: w.wait("done", READY_TIMEOUT_S)["recvs"] for name, w in workers.items()}
    finally:
        for w in workers.values():
            w.close()
    return TrafficReport(pattern=pattern, fabric=fabric.name, endpoint=endpoint, transport=transport, seed=seed,
                         started_ns=started, finished_ns=finished, flows=_results(flows, sent, done),
                         placed={name: w.placed for name, w in workers.items() if w.placed})
