"""Run a traffic pattern on a running fabric: one worker process per host involved, every QP
of the pattern at once, and the per-flow results gathered into a :class:`TrafficReport`."""

from __future__ import annotations

import json
import time

from ...errors import MrcError
from ..common import JsonLinesProcess
from .patterns import Flow
from .report import FlowResult, TrafficReport
from .worker import MODULE

READY_TIMEOUT_S = 180.0
"""How long a worker may take to start and create its QPs and regions (a loaded machine
starts 16 Python processes slowly)."""
ENDPOINTS = ("native", "python")


def default_timeout_exp(endpoint: str) -> int:
    """The writers' RTO exponent for ``endpoint`` when none is given: the native endpoint's
    2^8 (262 us), or the Python endpoint's 2^16 (67 ms), which its timers hold on a loaded
    machine (docs/endpoint.md)."""
    from ...endpoint.native import NATIVE_TIMEOUT_EXP
    from ...endpoint.requestor import RetryConfig

    return NATIVE_TIMEOUT_EXP if endpoint == "native" else RetryConfig().timeout_exp


def _plans(fabric, flows: list[Flow], endpoint: str, seed: int, timeout: float,
           timeout_exp: int) -> dict[str, dict]:
    """Host name -> its worker's plan (see ``worker``)."""
    nic = {name: fabric.host(name).nic_address for name in {f.src for f in flows} | {f.dst for f in flows}}
    plans = {name: {"nic": addr, "endpoint": endpoint, "seed": seed, "timeout": timeout, "timeout_exp": timeout_exp,
                    "send": [], "recv": []} for name, addr in nic.items()}
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
                timeout: float = 300.0, timeout_exp: int | None = None) -> TrafficReport:
    """Move every flow of ``flows`` across ``fabric`` (a running :class:`mrckit.fabric.Fabric`)
    at once, each as one WRITE_WITH_IMM on its own QP of ``endpoint`` (``native`` or
    ``python``), and verify every byte. ``timeout`` is the seconds the whole run may take once
    started; ``timeout_exp`` sets the writers' RTO, 1.024 us × 2^N (None: the endpoint's
    default, :func:`default_timeout_exp`).

    Raises:
        MrcError: an unknown endpoint, or a worker did not start or died (naming the host);
            flows that fail or time out are reported in the returned report, not raised.
    """
    if endpoint not in ENDPOINTS:
        raise MrcError(f"endpoint {endpoint!r}: use {' or '.join(ENDPOINTS)}")
    if timeout_exp is None:
        timeout_exp = default_timeout_exp(endpoint)
    plans = _plans(fabric, flows, endpoint, seed, timeout, timeout_exp)
    workers: dict[str, JsonLinesProcess] = {}
    try:
        for name, plan in plans.items():
            workers[name] = JsonLinesProcess(fabric.host(name), [], module=MODULE, role="traffic worker")
            workers[name].send(json.dumps(plan))
        for w in workers.values():
            w.wait("ready", READY_TIMEOUT_S)
        started = time.monotonic_ns()
        for w in workers.values():
            w.send("go")
        sent = {name: w.wait("sent", timeout + READY_TIMEOUT_S)["sent"] for name, w in workers.items()}
        finished = time.monotonic_ns()
        for w in workers.values():
            w.send("stop")  # every writer has ended: what has not arrived will not
        done = {name: w.wait("done", READY_TIMEOUT_S)["recvs"] for name, w in workers.items()}
    finally:
        for w in workers.values():
            w.close()
    return TrafficReport(pattern=pattern, fabric=fabric.name, endpoint=endpoint, seed=seed, started_ns=started, finished_ns=finished,
                         flows=_results(flows, sent, done))
