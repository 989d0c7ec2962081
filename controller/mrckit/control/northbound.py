"""The controller's northbound gRPC server (``mrckit/proto/controller.proto``, design section 7).

It runs on the controller's own asyncio loop (grpc.aio), so its handlers read the controller's
state and hand it reports without locks or threads. Like every mrckit server it listens on a
unix socket unless given a TCP address (keep that on loopback: the service has no TLS). A
report handed in wakes the controller; nothing here polls.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

import grpc

from ..errors import MrcError
from ..proto import controller_pb2 as pb
from ..proto import controller_pb2_grpc as pbg
from .client import WATCH_HEADERS, ControllerClient, mark_to_proto, status_to_proto, unix_path
from .reports import LinkReport

if TYPE_CHECKING:
    from .controller import Controller

log = logging.getLogger(__name__)

WATCH_QUEUE = 10_000
"""Timeline items a watcher may fall behind by before its stream is ended (memory bound)."""
PROBE_TIMEOUT_S = 5.0


class Feed:
    """Fans timeline marks and host EV events out to the open WatchTimeline streams."""

    def __init__(self) -> None:
        self._watchers: dict[asyncio.Queue, bool] = {}  # queue -> wants EV events

    def subscribe(self, ev_events: bool) -> asyncio.Queue:
        """A queue that gets every item from now on (None: the feed closed)."""
        q: asyncio.Queue = asyncio.Queue(WATCH_QUEUE)
        self._watchers[q] = ev_events
        return q

    def unsubscribe(self, q: asyncio.Queue) -> None:
        """Stop feeding ``q``."""
        self._watchers.pop(q, None)

    def mark(self, mark) -> None:
        """A new timeline mark (:class:`~mrckit.control.timeline.Mark`)."""
        self._put(pb.TimelineEvent(mark=mark_to_proto(mark.as_dict())), ev=False)

    def ev_event(self, host: str, event) -> None:
        """An EV event (``host_agent.proto`` EvEvent) that ``host`` streamed to us."""
        if any(self._watchers.values()):
            self._put(pb.TimelineEvent(ev_event=pb.HostEvEvent(host=host, event=event)), ev=True)

    def _put(self, item: pb.TimelineEvent, ev: bool) -> None:
        for q, wants_ev in list(self._watchers.items()):
            if ev and not wants_ev:
                continue
            try:
                q.put_nowait(item)
            except asyncio.QueueFull:  # a watcher that stopped reading: end its stream
                self._watchers.pop(q, None)
                q.get_nowait()
                q.put_nowait(None)

    def close(self) -> None:
        """End every stream."""
        for q in list(self._watchers):
            self.unsubscribe(q)
            if q.full():
                q.get_nowait()
            q.put_nowait(None)


class ControllerService(pbg.ControllerServicer):
    """The gRPC front of a running :class:`~mrckit.control.controller.Controller`."""

    def __init__(self, ctl: Controller):
        self.ctl = ctl

    async def ReportLink(self, request, context):
        try:
            self.ctl.check_link(request.link)
        except (MrcError, ValueError) as exc:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"link {request.link!r}: {exc}")
        report = LinkReport(request.link, request.up, request.time_ns, request.source)
        written = await self.ctl.submit_report(report)
        return pb.ReportLinkResponse(switch_updates=written)

    async def GetStatus(self, request, context):
        return status_to_proto(self.ctl.status())

    async def WatchTimeline(self, request, context):
        q = self.ctl.feed.subscribe(request.ev_events)
        try:
            # Headers at once: the client tells a controller that stops mid-stream from none.
            await context.send_initial_metadata(WATCH_HEADERS)
            if request.replay:
                for m in self.ctl.timeline():
                    yield pb.TimelineEvent(mark=mark_to_proto(m.as_dict()))
            while (item := await q.get()) is not None:
                yield item
        finally:
            self.ctl.feed.unsubscribe(q)


def check_not_running(address: str, name: str) -> None:
    """Refuse to start a second controller where one answers already (two would fight over
    the switches' primary role); a stale socket (a controller killed) does not count.

    Raises:
        MrcError: naming the running controller's pid and address.
    """
    path = unix_path(address)
    if path is not None and not path.exists():
        return
    try:
        with ControllerClient(address, timeout_s=PROBE_TIMEOUT_S) as client:
            st = client.status()
    except MrcError:
        return
    pid = st.get("pid", 0)
    raise MrcError(f"controller {st.get('name', name)!r} is already running (pid {pid}, {address}); a second one "
                   f"would take the switches over from it: stop it first (kill {pid}), or use another --name")


async def serve(ctl: Controller, address: str) -> tuple[grpc.aio.Server, str]:
    """Start the northbound of ``ctl`` on ``address`` (``unix:/path`` or ``host:port``; port 0
    picks one). Returns the server and the bound address.

    Raises:
        MrcError: the address cannot be bound.
    """
    path = unix_path(address)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.unlink(missing_ok=True)  # a stale socket: check_not_running found nobody behind it
    # so_reuseport off: a second controller on the same TCP port must fail, not share it.
    server = grpc.aio.server(options=[("grpc.so_reuseport", 0)])
    pbg.add_ControllerServicer_to_server(ControllerService(ctl), server)
    try:
        port = server.add_insecure_port(address)
    except RuntimeError as exc:
        raise MrcError(f"controller northbound cannot listen on {address}: {exc}") from None
    if path is None:
        if port == 0:
            raise MrcError(f"controller northbound cannot listen on {address}")
        address = f"{address.rsplit(':', 1)[0]}:{port}"
    await server.start()
    log.info("northbound listening on %s", address)
    return server, address


async def stop(server: grpc.aio.Server, address: str, feed: Feed) -> None:
    """End the streams, stop ``server`` (unary calls get a second to finish) and remove its
    socket."""
    feed.close()
    await server.stop(1.0)
    path = unix_path(address)
    if path is not None:
        path.unlink(missing_ok=True)
