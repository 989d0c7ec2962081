"""The client of a running controller's northbound (``mrckit/proto/controller.proto``): what the
fabric emulator, the CLI and the demo use to report links and read status (design section 7).

A controller called ``NAME`` listens on ``unix:/run/mrckit/controller/NAME.sock`` unless it
was given another address (``mrc controller run --listen``)::

    with ControllerClient.named("fab1") as ctl:
        ctl.report_link("p0/t0-1/t1-0", up=False, source="fault")
        ctl.status()["denials"]            # {link: time DENIED, ns}
        for kind, item in ctl.watch():     # ("mark", {...}) or ("ev_event", (host, EvEvent))
            ...

Synchronous (plain grpcio): its callers are synchronous. Every call raises :class:`MrcError`
with one line when no controller answers or it refuses the request.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import grpc

from ..errors import MrcError
from ..proto import controller_pb2 as pb
from ..proto import controller_pb2_grpc as pbg

RUN_DIR = Path("/run/mrckit/controller")
"""Where controllers put their socket (``NAME.sock``) and saved state (``NAME.state.json``)."""
RPC_TIMEOUT_S = 30.0
"""A report in EV-hash mode waits for the switches' group rewrites: allow for a loaded machine."""

WATCH_HEADERS = (("mrc-watch", "1"),)
"""The headers the controller's WatchTimeline sends first: a client that got them knows the
controller answered, so a stream that breaks later means it stopped."""


def check_name(name: str) -> str:
    """``name`` if it is usable as a controller name (it names files in the run folder).

    Raises:
        MrcError: ``name`` is empty, holds a ``/`` or starts with ``.``.
    """
    if not name or "/" in name or name.startswith("."):
        raise MrcError(f"controller name {name!r}: use letters, digits, '-' or '_'")
    return name


def controller_address(name: str, run_dir: Path | str = RUN_DIR) -> str:
    """The default northbound address of the controller called ``name``:
    ``unix:<run_dir>/<name>.sock``. Raises MrcError for a bad name (:func:`check_name`)."""
    return f"unix:{Path(run_dir) / check_name(name)}.sock"


def unix_path(address: str) -> Path | None:
    """The socket path of a ``unix:`` address, else None."""
    if not address.startswith("unix:"):
        return None
    path = address[len("unix:"):]
    return Path("/" + path.lstrip("/") if path.startswith("//") else path)


class ControllerClient:
    """A channel to the controller at ``address`` (``unix:/path`` or ``host:port``).

    Args:
        address: where the controller listens.
        timeout_s: limit of each unary call, seconds.
    """

    def __init__(self, address: str, timeout_s: float = RPC_TIMEOUT_S):
        self.address, self.timeout_s = address, timeout_s
        self.channel = grpc.insecure_channel(address)
        self.stub = pbg.ControllerStub(self.channel)

    @classmethod
    def named(cls, name: str, run_dir: Path | str = RUN_DIR, address: str | None = None,
              timeout_s: float = RPC_TIMEOUT_S) -> "ControllerClient":
        """The client of the controller called ``name``, at ``address`` if given, else at its
        default address in ``run_dir``. Raises MrcError for a bad name."""
        return cls(address or controller_address(name, run_dir), timeout_s)

    def _error(self, what: str, exc: grpc.RpcError) -> MrcError:
        code = exc.code()
        if code == grpc.StatusCode.UNAVAILABLE:
            path = unix_path(self.address)
            if path is not None and not path.exists():
                return MrcError(f"no controller socket at {path}: is `mrc controller run` running "
                                "(see --name, --run-dir, --listen)?")
            return MrcError(f"no controller answers at {self.address}: is `mrc controller run` running?")
        if code == grpc.StatusCode.DEADLINE_EXCEEDED:
            return MrcError(f"controller at {self.address}: {what} got no answer in {self.timeout_s:g} s")
        return MrcError(f"controller at {self.address}: {what}: {exc.details()}")

    def report_link(self, link: str, *, up: bool, time_ns: int = 0, source: str = "") -> dict[str, int]:
        """Report that ``link`` (design 3.3 name) went down (``up`` False) or came back, at
        wall-clock ``time_ns`` (0: now, by the controller's clock). Returns switch -> table
        updates written (EV-hash mode; empty in SRv6 mode).

        Raises:
            MrcError: no controller answers, or it refused the link (malformed, or not in its
                fabric), in one line naming it.
        """
        try:
            reply = self.stub.ReportLink(pb.LinkReport(link=link, up=up, time_ns=int(time_ns), source=source),
                                         timeout=self.timeout_s)
        except grpc.RpcError as exc:
            raise self._error(f"report of {link}", exc) from None
        return dict(reply.switch_updates)

    def status(self) -> dict:
        """The controller's status as plain data (:func:`status_from_proto`), with
        ``running`` True.

        Raises:
            MrcError: no controller answers.
        """
        try:
            reply = self.stub.GetStatus(pb.GetStatusRequest(), timeout=self.timeout_s)
        except grpc.RpcError as exc:
            raise self._error("status", exc) from None
        return status_from_proto(reply)

    def watch(self, *, replay: bool = True, ev_events: bool = False) -> Iterator[tuple[str, object]]:
        """Follow the timeline: ``("mark", dict)`` per mark (the ones so far first with
        ``replay``), and with ``ev_events`` ``("ev_event", (host, EvEvent message))`` per host EV
        event. Ends when the controller stops or :meth:`close` is called.

        Raises:
            MrcError: no controller answers (at the start).
        """
        stream = self.stub.WatchTimeline(pb.WatchTimelineRequest(replay=replay, ev_events=ev_events))
        answered = False  # the controller sent its headers: it was there
        try:
            answered = tuple(stream.initial_metadata() or ()) == WATCH_HEADERS
            for item in stream:
                if item.WhichOneof("what") == "mark":
                    yield "mark", mark_from_proto(item.mark)
                else:
                    yield "ev_event", (item.ev_event.host, item.ev_event.event)
        except grpc.RpcError as exc:
            # A controller that stops may close the connection before the stream's last
            # status reaches us: once it had answered, that is the end, not an error.
            if exc.code() == grpc.StatusCode.CANCELLED or (answered and exc.code() == grpc.StatusCode.UNAVAILABLE):
                return
            raise self._error("timeline", exc) from None
        finally:
            stream.cancel()

    def close(self) -> None:
        """Close the channel (ends any :meth:`watch`)."""
        self.channel.close()

    def __enter__(self) -> "ControllerClient":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def read_status(name: str, run_dir: Path | str = RUN_DIR, address: str | None = None) -> dict:
    """The status of the running controller called ``name`` (see :meth:`ControllerClient.status`).

    Raises:
        MrcError: a bad name, or no controller answers.
    """
    with ControllerClient.named(name, run_dir, address) as client:
        return client.status()


def report_link(name: str, link: str, *, up: bool, run_dir: Path | str = RUN_DIR, address: str | None = None,
                time_ns: int = 0, source: str = "") -> dict[str, int]:
    """Tell the running controller called ``name`` that ``link`` went down or came back up
    (see :meth:`ControllerClient.report_link`, same result and errors)."""
    with ControllerClient.named(name, run_dir, address) as client:
        return client.report_link(link, up=up, time_ns=time_ns, source=source)


# --- the wire form of the status, both ways (the server uses status_to_proto) ---------------
def _counts_to_proto(c: dict | None) -> pb.WriteCounts | None:
    if c is None:
        return None
    cookie = c.get("cookie_before")
    return pb.WriteCounts(pipeline_pushed=c["pipeline_pushed"], has_cookie_before=cookie is not None,
                          cookie_before=cookie or 0, entries_read=c["entries_read"], inserted=c["inserted"],
                          modified=c["modified"], deleted=c["deleted"], write_requests=c["write_requests"])


def _counts_from_proto(c: pb.WriteCounts) -> dict:
    return {"pipeline_pushed": c.pipeline_pushed, "cookie_before": c.cookie_before if c.has_cookie_before else None,
            "entries_read": c.entries_read, "inserted": c.inserted, "modified": c.modified, "deleted": c.deleted,
            "write_requests": c.write_requests}


def mark_to_proto(m: dict) -> pb.Mark:
    """A timeline mark (``Mark.as_dict()``) on the wire."""
    return pb.Mark(kind=m["kind"], time_ns=m["time_ns"], links=m["links"], detail=m["detail"])


def mark_from_proto(m: pb.Mark) -> dict:
    """A timeline mark as ``Mark.as_dict()`` gives it."""
    return {"kind": m.kind, "time_ns": m.time_ns, "links": list(m.links), "detail": m.detail}


def status_to_proto(st: dict) -> pb.Status:
    """``Controller.status()`` on the wire."""
    out = pb.Status(
        name=st["name"], pid=st["pid"], started_ns=st["started_ns"], updated_ns=st["updated_ns"],
        topology=st["topology"], topology_file=st["topology_file"] or "",
        election_id=pb.Uint128(high=st["election_id"] >> 64, low=st["election_id"] & (1 << 64) - 1),
        p4info=str(st["pipeline"]["p4info"] or ""), cookie=st["pipeline"]["cookie"], ready=st["ready"],
        mode=st["mode"], links_down=st["links_down"], reported_down=st["reported_down"],
        rerouted=st["rerouted"], denials=st["denials"], withheld=st["withheld"],
        timeline=[mark_to_proto(m) for m in st["timeline"]])
    for name, s in st["switches"].items():
        out.switches[name].CopyFrom(pb.SwitchStatus(
            address=s["address"], device_id=s["device_id"], connected=s["connected"], reconciles=s["reconciles"],
            last=_counts_to_proto(s["last"]), total=_counts_to_proto(s["total"]), error=s["error"]))
    for name, h in st["hosts"].items():
        out.hosts[name].CopyFrom(pb.HostStatus(
            address=h["address"], configured=h["configured"], configured_by_us=h["configured_by_us"],
            watching=h["watching"], denied=h["denied"], events=h["events"], error=h["error"]))
    loc = st["localisation"]
    if loc is not None:
        out.localisation.CopyFrom(pb.Localisation(
            describe=loc["describe"], failed=loc["failed"], ambiguous=loc["ambiguous"],
            candidates=[pb.LinkSet(links=c) for c in loc["candidates"]], suspects=loc["suspects"],
            unexplained=loc["unexplained"]))
    return out


def status_from_proto(st: pb.Status) -> dict:
    """The status as plain data, shaped as ``Controller.status()``, plus ``running`` (True:
    the controller answered)."""
    loc = None
    if st.HasField("localisation"):
        lo = st.localisation
        loc = {"describe": lo.describe, "failed": list(lo.failed), "ambiguous": lo.ambiguous,
               "candidates": [list(c.links) for c in lo.candidates], "suspects": list(lo.suspects),
               "unexplained": lo.unexplained}
    return {
        "name": st.name, "pid": st.pid, "running": True, "started_ns": st.started_ns, "updated_ns": st.updated_ns,
        "topology": st.topology, "topology_file": st.topology_file or None, "election_id": st.election_id.high << 64 | st.election_id.low,
        "pipeline": {"p4info": st.p4info, "cookie": st.cookie}, "ready": st.ready, "mode": st.mode,
        "switches": {n: {"address": s.address, "device_id": s.device_id, "connected": s.connected,
                         "reconciles": s.reconciles,
                         "last": _counts_from_proto(s.last) if s.HasField("last") else None,
                         "total": _counts_from_proto(s.total), "error": s.error}
                     for n, s in sorted(st.switches.items())},
        "hosts": {n: {"address": h.address, "configured": h.configured, "configured_by_us": h.configured_by_us,
                      "watching": h.watching, "denied": list(h.denied), "events": h.events, "error": h.error}
                  for n, h in sorted(st.hosts.items())},
        "links_down": list(st.links_down), "reported_down": dict(sorted(st.reported_down.items())),
        "rerouted": dict(sorted(st.rerouted.items())), "denials": dict(sorted(st.denials.items())),
        "withheld": dict(sorted(st.withheld.items())), "localisation": loc,
        "timeline": [mark_from_proto(m) for m in st.timeline],
    }
