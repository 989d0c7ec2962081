"""The eBPF switch's per-port state: one ``port_state`` map value per port (``struct
port_state`` in ``ebpf/mrc_switch.bpf.c``), so that the program finds a port's admin state,
``port_config`` entry, drain rate and virtual queue with one lookup.

Each part has its own writer: the P4 table ``port_config`` (``DirectTables``), the drain rate
and capacity (``Queues``), the admin state (``Ports``) and the queue itself (the program;
``Queues.reset`` empties it). A writer changes its part in place through the map's mmap
(:class:`mrckit.bpf.mmapped.MmapArray`), never the whole value, so that a table write
leaves a live queue alone and two processes (the P4Runtime server and the manager) never undo
each other's writes.

:class:`PortField` gives each part the ``lookup``/``update``/``items`` of a map keyed by port;
:class:`PortFields` holds the four, one per writer.
"""

from __future__ import annotations

import ctypes
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from ..bpf.errors import BpfError
from ..bpf.maps import Map
from ..bpf.mmapped import MmapArray
from ..errors import MrcError
from . import tables as T

PORT_STATE = "port_state"
"""The map's name in the object and under the switch's pin folder."""


class PortField:
    """One field of every port's ``port_state`` value, keyed by port (0..max_entries-1).

    ``lookup`` returns a copy (an ``int`` for an integer field), ``update`` writes the field
    and nothing else, ``items`` walks every port. Errors are MrcError, naming the part
    (``port_state.rate``...).
    """

    def __init__(self, name: str, array: MmapArray, field: str, ctype: type):
        self.name, self._array, self._field, self._ctype = name, array, field, ctype
        self._simple = issubclass(ctype, ctypes._SimpleCData)

    def lookup(self, port: int) -> Any:
        """The field of ``port``. Raises MrcError for a port outside the map."""
        try:
            value: Any = self._array.read(port, self._field)
        except BpfError as exc:
            raise MrcError(f"{self.name}: {exc}") from None
        return value.value if self._simple else value

    def update(self, port: int, value: Any) -> None:
        """Write the field of ``port`` (a ctypes value of its type, or an int for an integer
        field). Raises MrcError for a port outside the map, an int that does not fit the
        field, or a value of another type."""
        if self._simple and isinstance(value, int):
            bits = 8 * ctypes.sizeof(self._ctype)
            if not 0 <= value < 1 << bits:
                raise MrcError(f"{self.name}: {value} does not fit its {bits} bits")
            value = self._ctype(value)
        try:
            self._array.write(port, self._field, value)
        except BpfError as exc:
            raise MrcError(f"{self.name}: {exc}") from None

    def items(self) -> Iterator[tuple[int, Any]]:
        """(port, field) for every port, in order."""
        for port in range(self._array.max_entries):
            yield port, self.lookup(port)


@dataclass(frozen=True)
class PortFields:
    """The parts of ``port_state``, one per writer, each keyed by port."""

    config: PortField  # the P4 table port_config (T.PortConfig; valid = 0: no entry)
    queue: PortField   # the virtual queue (T.VQueue), the program's
    rate: PortField    # drain rate and capacity (T.QueueRate)
    down: PortField    # admin state: 0 up, 1 down


def port_fields(port_state: Map) -> tuple[MmapArray, PortFields]:
    """Map ``port_state`` (of a loaded object or a pin) and give its parts. Close the
    returned array when done.

    Raises:
        BpfError: the map is not the mmapable ``port_state`` array (a switch pinned by an
            older mrckit: tear it down and set it up again).
    """
    array = MmapArray(port_state, T.PortState)
    part = lambda field, ctype: PortField(f"{PORT_STATE}.{field}", array, field, ctype)  # noqa: E731
    return array, PortFields(config=part("config", T.PortConfig), queue=part("queue", T.VQueue),
                             rate=part("rate", T.QueueRate), down=part("down", ctypes.c_uint32))
