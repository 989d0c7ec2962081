"""The values of an mmapable BPF ARRAY map, mapped into this process.

A map created with ``BPF_F_MMAPABLE`` (``__uint(map_flags, BPF_F_MMAPABLE)`` in the C map
definition) can be ``mmap``-ed: its values lie one after the other, each padded to 8 bytes,
in memory that the kernel, its programs and every process that maps it share. Unlike
``bpf_map_update_elem``, which copies a whole value, a write here changes only the bytes it
names: two writers that own different fields of one value never undo each other's writes.
A program's own updates land in the same memory, so reads see them at once.

>>> arr = MmapArray(obj.map("port_state"), PortState)          # doctest: +SKIP
>>> arr.write(3, "down", ctypes.c_uint32(1))                     # doctest: +SKIP
>>> arr.read(3, "config").valid                                  # doctest: +SKIP
"""

from __future__ import annotations

import ctypes
import mmap
from typing import Any

from .errors import BpfError
from .maps import Map, _map_info

BPF_MAP_TYPE_ARRAY = 2
BPF_F_MMAPABLE = 1 << 10


class MmapArray:
    """The values of ARRAY map ``m`` (``BPF_F_MMAPABLE``), each a ``value_type``
    (a ``ctypes.Structure`` of the map's value size), by index 0..max_entries-1.

    The mapping lives until :meth:`close` (or garbage collection), even after ``m``'s fd is
    closed; it keeps the map alive meanwhile.

    Raises:
        BpfError: ``m`` is not an ARRAY map, was not created mmapable, ``value_type`` has
            another size than its values, or the kernel refuses the mapping.
    """

    def __init__(self, m: Map, value_type: type[ctypes.Structure]):
        info = _map_info(m.fd)
        if info.type != BPF_MAP_TYPE_ARRAY or not info.map_flags & BPF_F_MMAPABLE:
            raise BpfError(f"map {m.name}: not an mmapable array (type {m.type_name}, "
                           f"flags {info.map_flags:#x}); define it with BPF_F_MMAPABLE")
        if ctypes.sizeof(value_type) != m.value_size:
            raise BpfError(f"map {m.name}: value type {value_type.__name__} is {ctypes.sizeof(value_type)} "
                           f"bytes, the map's values are {m.value_size}")
        self.name, self.value_type, self.max_entries = m.name, value_type, m.max_entries
        self.stride = (m.value_size + 7) // 8 * 8
        length = -(-self.stride * m.max_entries // mmap.PAGESIZE) * mmap.PAGESIZE
        try:
            self._mm: mmap.mmap | None = mmap.mmap(m.fd, length, mmap.MAP_SHARED,
                                                  mmap.PROT_READ | mmap.PROT_WRITE)
        except OSError as exc:
            raise BpfError(f"map {m.name}: mmap refused: {exc.strerror}") from None

    def _span(self, index: int, field: str) -> tuple[int, Any]:
        """Byte offset and ctypes type of ``field`` of value ``index``."""
        if not isinstance(index, int) or not 0 <= index < self.max_entries:
            raise BpfError(f"map {self.name}: index {index!r} outside 0..{self.max_entries - 1}")
        desc = getattr(self.value_type, field, None)
        ftype = next((f[1] for f in self.value_type._fields_ if f[0] == field), None)
        if desc is None or ftype is None:
            raise BpfError(f"map {self.name}: {self.value_type.__name__} has no field {field!r}")
        return index * self.stride + desc.offset, ftype

    def _memory(self) -> mmap.mmap:
        if self._mm is None:
            raise BpfError(f"map {self.name}: the mapping is closed")
        return self._mm

    def read(self, index: int, field: str) -> Any:
        """A copy of ``field`` of value ``index`` (its ctypes type).

        Raises:
            BpfError: index out of range, no such field, or the mapping is closed.
        """
        offset, ftype = self._span(index, field)
        return ftype.from_buffer_copy(self._memory(), offset)

    def write(self, index: int, field: str, value: Any) -> None:
        """Write ``value`` (an object of the field's ctypes type) over ``field`` of value
        ``index``, and nothing else.

        Raises:
            BpfError: index out of range, no such field, a value of another type, or the
                mapping is closed.
        """
        offset, ftype = self._span(index, field)
        if not isinstance(value, ftype):
            raise BpfError(f"map {self.name}: field {field!r} takes {ftype.__name__}, not {type(value).__name__}")
        data = bytes(value)
        self._memory()[offset:offset + len(data)] = data

    def close(self) -> None:
        """Unmap (idempotent)."""
        if self._mm is not None:
            self._mm.close()
            self._mm = None
