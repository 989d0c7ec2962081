"""The eBPF switch's ports (target settings, not P4 tables): admin state, and the wiring of
switch port numbers to interfaces (the DEVMAP ``tx_ports`` and its reverse ``ifindex_port``
with the ``ifindex_slots`` cache). Design sections 4 and 9."""

from __future__ import annotations

from ..bpf.maps import Map
from ..errors import MrcError
from ..wire import pipeline as P
from . import tables as T
from .port_state import PortField


def check_port(port: int) -> int:
    """Return ``port`` if it is a switch port (0..511), else raise MrcError naming it (a bool,
    an int to Python, is not a port)."""
    if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port < P.PORT_COUNT:
        raise MrcError(f"switch port {port!r} outside 0..{P.PORT_COUNT - 1}")
    return port


class Ports:
    """The ports of one eBPF switch: the wiring through its maps (``maps``: map name -> ``Map``,
    as ``SwitchTables`` holds them), the admin state through the ``down`` part of each port's
    ``port_state`` (``mrckit.switch.port_state``)."""

    def __init__(self, maps: dict[str, Map], down: PortField):
        self.maps, self.down = maps, down

    def set_up(self, port: int, up: bool) -> None:
        """Set the admin state of ``port``; a down port drops (reason port_down).
        Raises MrcError for a port outside 0..511."""
        self.down.update(check_port(port), 0 if up else 1)

    def is_up(self, port: int) -> bool:
        """The admin state of ``port``. Raises MrcError for a port outside 0..511."""
        return self.down.lookup(check_port(port)) == 0

    def bind(self, port: int, ifindex: int) -> None:
        """Wire switch ``port`` to interface ``ifindex``: the DEVMAP entry for redirects and the
        reverse entry for the ingress port. Call it inside the switch's namespace: the kernel
        resolves DEVMAP ifindexes in the caller's namespace (design section 9)."""
        self.maps["tx_ports"].update(check_port(port), ifindex)
        self.maps["ifindex_port"].update(ifindex, port)
        slot = ifindex % P.IFINDEX_SLOTS
        if self.maps["ifindex_slots"].lookup(slot).ifindex in (0, ifindex):
            self.maps["ifindex_slots"].update(slot, T.IfindexSlot(ifindex, port))

    def unbind(self, port: int) -> None:
        """Remove ``port``'s DEVMAP and ingress entries (absent entries are fine)."""
        for ifindex, p in list(self.maps["ifindex_port"].items()):
            if p == port:
                self.maps["ifindex_port"].delete(ifindex)
                slot = ifindex % P.IFINDEX_SLOTS
                if self.maps["ifindex_slots"].lookup(slot).ifindex == ifindex:
                    self.maps["ifindex_slots"].update(slot, T.IfindexSlot())
        self.maps["tx_ports"].delete(check_port(port))
