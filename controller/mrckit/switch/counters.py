"""The eBPF switch's indirect counters (design section 4): ``rx_port``, ``tx_port``,
``trim_port``, ``ecn_port``, ``drop_port`` (per port) and ``drop_reason`` (per
``DropReason``), each a per-CPU array of packets-and-bytes cells, read summed over CPUs."""

from __future__ import annotations

from ..bpf.maps import Map
from ..errors import MrcError
from ..wire import pipeline as P
from . import tables as T


class Counters:
    """The counters of one eBPF switch, through its maps (``maps``: map name -> ``Map``, as
    ``SwitchTables`` holds them). Names may carry a P4Info control prefix."""

    def __init__(self, maps: dict[str, Map]):
        self.maps = maps

    def read(self, name: str, index: int) -> tuple[int, int]:
        """(packets, bytes) of counter ``name`` at ``index``, summed over CPUs.

        Raises:
            MrcError: unknown counter or index out of range.
        """
        cmap = self._map(name)
        if not isinstance(index, int) or not 0 <= index < cmap.max_entries:
            raise MrcError(f"counter {name}: index {index!r} outside 0..{cmap.max_entries - 1}")
        total = cmap.lookup_sum(index)
        return total.packets, total.bytes

    def nonzero(self, name: str) -> dict[int, tuple[int, int]]:
        """Non-zero cells of counter ``name``: index -> (packets, bytes). Raises MrcError for an
        unknown counter."""
        out = {}
        for index, total in self._map(name).items_sum():
            if total.packets or total.bytes:
                out[index] = (total.packets, total.bytes)
        return out

    def cells(self, name: str) -> list[tuple[int, int]]:
        """Every cell of counter ``name`` as (packets, bytes), by index (the counter's size in
        the pipeline contract). Raises MrcError for an unknown counter."""
        cells = [(0, 0)] * self._map(name).max_entries
        for index, cell in self.nonzero(name).items():
            cells[index] = cell
        return cells

    def reset(self) -> None:
        """Zero every counter cell on every CPU."""
        for name in P.COUNTER_NAMES:
            cmap = self.maps[name]
            zero = [T.Counter() for _ in range(cmap.ncpus)]
            for index in range(cmap.max_entries):
                cmap.update(index, zero)

    def _map(self, name: str) -> Map:
        short = T.short_name(name)
        if short not in P.COUNTER_NAMES:
            raise MrcError(f"unknown counter {name!r}: the switch has {', '.join(P.COUNTER_NAMES)}")
        return self.maps[short]
