"""The agent's plane ports (design section 5): a port that goes down retires its plane's EVs
at once and every live peer gets an EP_REQ PORT_STATUS_UPDATE. Mixed into
:class:`~mrckit.host.agent.HostAgent`."""

from __future__ import annotations

import ipaddress
import socket
import time

from pyroute2 import IPRoute

from ..wire.constants import EpOp
from ..wire.ev import ev_plane
from ..wire.headers import ep_request, timestamp_units
from .core import AgentCore, opened
from .events import make_event
from .maps import EvSet, Reason
from .state import BAD, GOOD, SKIP

_UP = ("UP", "UNKNOWN")  # UNKNOWN: a driver that does not report operstate


class PortMixin(AgentCore):
    """Link state of the plane ports; needs the agent's ``cfg``, ``dp``, ``_ipr``, ``_port_up``,
    ``_lock``, ``peers`` and ``_send_frame``."""

    def _link_messages(self) -> None:
        ipr = opened(self._ipr)
        try:
            while ipr.recv(65536):
                pass
        except BlockingIOError:
            pass
        for port in self._config().ports:
            try:
                up = link_up(port.ifname)
            except OSError:
                up = False  # the interface is gone
            if up != self._port_up.get(port.plane):
                self.set_port_state(port.plane, up)

    def set_port_state(self, plane: int, up: bool) -> None:
        """A local plane port went down (or up): on down, retire the plane's EVs at once; in
        both cases, tell every live peer with an EP_REQ PORT_STATUS_UPDATE."""
        with self._lock:
            now = time.monotonic_ns()
            self._port_up[plane] = up
            dp = self._dataplane()
            dp.set_port_up(plane, up)
            self._publish(make_event("", 0, GOOD if not up else BAD, BAD if not up else GOOD,
                                     (Reason.PORT_DOWN if not up else Reason.PROBE_OK).name,
                                     ts_ns=now, plane=plane, link=self._port_link(plane)))
            for peer, evset in list(dp.peer_sets()):
                self.peers.setdefault(peer, self._new_peer_state())
                if not up:
                    self._retire_plane(peer, evset, plane, now)
            self._send_port_status()

    def _port_link(self, plane: int) -> str:
        cfg = self._config()
        return f"p{plane}/t0-{cfg.leaf}/down-{cfg.downlink}"

    def _retire_plane(self, peer: ipaddress.IPv6Address, evset: EvSet, plane: int, now: int) -> None:
        changed: set[int] = set()
        for i in range(evset.n):
            s = evset.slots[i]
            if ev_plane(s.ev) == plane and s.state in (GOOD, SKIP):
                self._set_state(peer, s, BAD, Reason.PORT_DOWN, now)
                changed.add(i)
        self._dataplane().merge_slots(peer, evset, changed)

    def _port_mask(self) -> int:
        return sum(1 << p for p, up in self._port_up.items() if up)

    def _send_port_status(self) -> None:
        mask = self._port_mask()
        for peer, evset in list(self._dataplane().peer_sets()):
            ev = next((evset.slots[i].ev for i in range(evset.n)
                       if evset.slots[i].state == GOOD and self._port_up.get(ev_plane(evset.slots[i].ev))), None)
            if ev is None:
                self.counters["port_status_unsent"] += 1
                continue
            l4 = ep_request(EpOp.PORT_STATUS_UPDATE, 0, mask, 0, timestamp_units(time.monotonic_ns()))
            if self._send_frame(peer, ev, l4):
                self.counters["port_status_sent"] += 1


def link_up(ifname: str) -> bool:
    """Whether ``ifname`` (in the caller's namespace) is operationally up. Raises OSError."""
    with IPRoute() as ipr:
        link = ipr.link("get", index=socket.if_nametoindex(ifname))[0]
        return link.get_attr("IFLA_OPERSTATE") in _UP


def link_mtu(ifname: str) -> int:
    """The MTU (bytes) of ``ifname`` in the caller's network namespace, read over netlink
    (under ``nsenter --net``, /sys/class/net still shows the mount namespace's devices).

    Raises:
        OSError: no such interface.
    """
    with IPRoute() as ipr:
        return ipr.link("get", index=socket.if_nametoindex(ifname))[0].get_attr("IFLA_MTU")


def link_exists(ifname: str) -> bool:
    """Whether ``ifname`` exists in the caller's network namespace."""
    try:
        socket.if_nametoindex(ifname)
    except OSError:
        return False
    return True
