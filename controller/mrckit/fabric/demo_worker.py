"""The demo's two endpoint processes, run inside the hosts' namespaces (``nsenter --net``).

Each side of the write runs in its own process, as ``mrc write`` and ``mrc listen`` do, so
neither the other endpoint nor the demo's sampling and gRPC threads delay its SACKs (one Python
process for everything stalls for longer than an agent RTO and retires healthy EVs).

The processes talk JSON lines on stdout; the demo writes commands on stdin:

- ``respond``: registers a region of ``--size`` bytes (rkey ``--rkey``), creates the QP, prints
  ``{"ready": ...}``, then ``{"placed": BYTES, "t_ns": ...}`` every ``--every`` seconds, with
  ``"ev_rx": {EV: packets}`` (every packet from the peer, counted by the EV it arrived on) at
  most every ``EV_REPORT_S``; after the WRITE_WITH_IMM completion, it compares the region with
  the data that ``--seed`` gives and prints ``{"done": ..., "sha256": ..., "verified": BYTES,
  "stats": {...}}``; when its stdin closes it prints ``{"final": ..., "stats": ..., "ev_rx":
  ...}`` (counts that include the requestor's last retransmissions) and exits.
- ``write``: creates the QP, prints ``{"ready": ...}``, waits for the line ``go``, posts one
  WRITE_WITH_IMM of the ``--seed`` data, and prints ``{"done": ..., "started_ns": ...,
  "finished_ns": ..., "stats": {...}}`` or ``{"error": TEXT}``.

The data is ``random.Random(seed).randbytes(size)``: both sides and the demo derive it.
:class:`WorkerProcess` is the demo's side: it starts one of these in a host's namespace and
follows its lines.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import random
import subprocess
import sys
import threading
import time

import numpy as np

from ..errors import MrcError

MODULE = "mrckit.fabric.demo_worker"
EV_REPORT_S = 0.02
"""How often the responder reports its per-EV packet counts: every progress line (``--every``
0.02 s), so the demo pairs each EV-table sample with counts at most this old."""
SACK_EVERY_PACKET = 1
"""Responder SACK coalescing, bytes: a SACK (and so an echoed EV) per packet, which is what
the host agent's per-EV ack times need."""


def demo_data(seed: int, size: int) -> bytes:
    """The ``size`` bytes the demo writes for ``seed`` (deterministic)."""
    return random.Random(seed).randbytes(size)


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
    design 3.3, as the responder itself reads it): the receiving side of the demo's loss
    accounting (``mrckit.fabric.loss``). Wraps ``responder.handle``; the counts are read from
    another thread, hence the lock."""

    def __init__(self, responder):
        self._counts: dict[int, int] = {}
        self._lock = threading.Lock()
        inner = responder.handle

        def handle(buf, n, tclass, flowinfo, sport, peer):
            ev = (sport << 16) | (flowinfo & 0xFFFF)
            with self._lock:
                self._counts[ev] = self._counts.get(ev, 0) + 1
            inner(buf, n, tclass, flowinfo, sport, peer)

        responder.handle = handle

    def snapshot(self) -> dict[str, int]:
        """EV (decimal text, a JSON key) -> packets received so far."""
        with self._lock:
            return {str(ev): n for ev, n in self._counts.items()}


def respond(args) -> int:
    from ..endpoint import Endpoint

    ep = Endpoint(args.nic, sack_coalesce_bytes=SACK_EVERY_PACKET)
    tally = EvTally(ep.responder)
    try:
        mr = ep.register_mr(args.size, rkey=args.rkey)
        ep.create_qp(args.peer, qpn=args.qpn, remote_qpn=args.remote_qpn)
        _say(ready=True)
        closed = threading.Event()
        threading.Thread(target=lambda: (sys.stdin.read(), closed.set()), daemon=True).start()
        done, last_ev_report = False, 0.0
        while not closed.is_set():
            now = time.monotonic()
            if now - last_ev_report >= EV_REPORT_S:
                last_ev_report = now
                _say(placed=mr.placed_bytes, t_ns=time.monotonic_ns(), ev_rx=tally.snapshot())
            else:
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
        _say(final=True, t_ns=time.monotonic_ns(), stats=_stats(ep.responder.stats), ev_rx=tally.snapshot())
    finally:
        ep.close()
    return 0


def write(args) -> int:
    from ..endpoint import Endpoint, QpError
    from ..endpoint.cc import NsccConfig
    from ..endpoint.endpoint import QpConfig
    from ..wire.constants import DEFAULT_PAYLOAD_LEN

    ep = Endpoint(args.nic)
    try:
        config = None
        if args.max_cwnd:
            config = QpConfig(cc=NsccConfig(initial_cwnd=args.max_cwnd * DEFAULT_PAYLOAD_LEN,
                                            max_cwnd=args.max_cwnd * DEFAULT_PAYLOAD_LEN))
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


class WorkerProcess:
    """One endpoint process (``mrckit.fabric.demo_worker``) in a host's namespace: its JSON
    lines are merged into ``state``; :meth:`wait` blocks until a key appears."""

    def __init__(self, host, argv: list[str]):
        self.name = f"{argv[0]} on {host.name}"
        self.proc = host.popen([sys.executable, "-m", MODULE, *argv], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.state: dict = {}
        self.ev_rx_log: list[tuple[int, dict[int, int]]] = []
        """Per-EV packet counts the responder reported, ``(t_ns, {EV: packets})``, oldest first."""
        self._cv = threading.Condition()
        self._reader = threading.Thread(target=self._read, name=f"demo-{argv[0]}", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            try:
                msg = json.loads(line)
            except ValueError:
                continue
            with self._cv:
                if "ev_rx" in msg:
                    self.ev_rx_log.append((msg["t_ns"], {int(ev): n for ev, n in msg.pop("ev_rx").items()}))
                self.state.update(msg)
                self._cv.notify_all()
        with self._cv:
            self.state.setdefault("exited", True)
            self._cv.notify_all()

    def wait(self, key: str, timeout: float) -> dict:
        """The state once ``key`` is in it. Raises MrcError if the process exits or times out."""
        with self._cv:
            self._cv.wait_for(lambda: key in self.state or "exited" in self.state or "error" in self.state, timeout)
            if key in self.state:
                return dict(self.state)
        why = self.state.get("error") or ("exited" if "exited" in self.state else f"no {key!r} in {timeout:.0f} s")
        raise MrcError(f"the {self.name} process: {why}{self._stderr()}")

    def check_alive(self) -> None:
        """Raises MrcError if the process died before finishing."""
        if "exited" in self.state and "done" not in self.state and "error" not in self.state:
            raise MrcError(f"the {self.name} process exited early{self._stderr()}")

    def _stderr(self) -> str:
        if self.proc.poll() is None:
            return ""
        tail = (self.proc.stderr.read() or "").strip().splitlines()[-3:]
        return (": " + " | ".join(tail)) if tail else ""

    def send(self, line: str) -> None:
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def close(self) -> None:
        """Close its stdin (the responder's cue to exit); terminate it if it lingers."""
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.terminate()
            self.proc.wait(5)
        self._reader.join(5)  # every line it printed is in ``state`` and ``ev_rx_log`` now


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m mrckit.fabric.demo_worker", description=__doc__.splitlines()[0])
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
    args = ap.parse_args(argv)
    return respond(args) if args.role == "respond" else write(args)


if __name__ == "__main__":
    sys.exit(main())
