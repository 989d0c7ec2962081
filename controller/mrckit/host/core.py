"""What the host agent's mixins (``sweep``, ``probing``, ``ports``) use of the agent and of one
another: :class:`AgentCore`, the protocol they subclass so that each is checked against the
others' attributes and methods. :class:`~mrckit.host.agent.HostAgent` provides all of it."""

from __future__ import annotations

import ipaddress
import random
import socket
import threading
from collections import Counter
from typing import Protocol

from ..errors import MrcError
from .config import AgentConfig
from .dataplane import HostDataplane
from .events import EvEvent
from .evset import Template
from .maps import EvSet, EvSlot, Reason
from .state import PeerState

NOT_CONFIGURED = "the host agent is not configured: call Configure first"


class AgentCore(Protocol):
    """The agent's state and the methods one mixin calls on another. Subclassed explicitly by
    each mixin: it comes last in the agent's MRO, so its stubs never shadow a definition.

    ``cfg``, ``dp`` and ``template`` are None until ``configure`` (``dp`` again after
    ``close``); code that runs only on a configured agent (the loop, the sweep, the API past
    its check) reads them through :meth:`_config`, :meth:`_dataplane` and :meth:`_template`."""

    cfg: AgentConfig | None
    dp: HostDataplane | None
    template: Template | None
    counters: Counter[str]
    peers: dict[ipaddress.IPv6Address, PeerState]
    _lock: threading.RLock
    _rng: random.Random
    _udp: socket.socket | None
    _raw: dict[int, socket.socket]
    _ipr: socket.socket | None
    _port_up: dict[int, bool]
    _outstanding: dict[int, tuple[ipaddress.IPv6Address, int, int]]  # probe id -> (peer, EV, sent ns)
    _denied_links: set[str]

    # --- the agent's -----------------------------------------------------------------------
    def _config(self) -> AgentConfig:
        """``cfg`` of a configured agent. Raises MrcError: not configured."""
        ...

    def _dataplane(self) -> HostDataplane:
        """``dp`` of a configured agent. Raises MrcError: not configured, or closed."""
        ...

    def _template(self) -> Template:
        """``template`` of a configured agent. Raises MrcError: not configured."""
        ...

    def _publish(self, event: EvEvent, evset: EvSet | None = None) -> None: ...

    def _new_peer_state(self) -> PeerState: ...

    # --- SweepMixin's ----------------------------------------------------------------------
    def _set_state(self, peer: ipaddress.IPv6Address, slot: EvSlot, state: int, reason: Reason, now: int,
                   evset: EvSet | None = None, **extra: object) -> None: ...

    def _plane_dead(self, st: PeerState, plane: int) -> bool: ...

    def _same_leaf(self, peer: ipaddress.IPv6Address) -> bool: ...

    # --- ProbeMixin's ----------------------------------------------------------------------
    def _probe_peer(self, peer: ipaddress.IPv6Address, st: PeerState, evset: EvSet, now: int,
                    budget: list[int]) -> None: ...

    def _send_frame(self, peer: ipaddress.IPv6Address, ev: int, l4: bytes) -> bool: ...

    # --- PortMixin's -----------------------------------------------------------------------
    def _port_mask(self) -> int: ...


def opened(sock: socket.socket | None) -> socket.socket:
    """``sock``, one of the sockets that ``configure`` opens and ``close`` drops: the loop that
    reads them runs only in between.

    Raises:
        MrcError: the agent was closed under the loop (which then stops).
    """
    if sock is None:
        raise MrcError("the host agent is closed")
    return sock
