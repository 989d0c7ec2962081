"""Typed access to BPF maps by file descriptor: lookup, update, delete, iterate, pin.

Keys and values are ``bytes`` of exactly the map's key/value size, or ctypes objects of that
size (a ``ctypes.Structure`` proven equal to the C layout with :func:`mrckit.bpf.btf_struct_layout`),
or Python ``int`` for integer-sized keys (native byte order, as the C side sees them).
A :class:`Map` built with ``key_type``/``value_type`` returns those types from lookups; plain
integer ctypes (``c_uint32``) come back as ``int``; without types, ``bytes``.

Per-CPU maps (``percpu_hash``, ``percpu_array``, ``lru_percpu_hash``) hold one value per
possible CPU. Their ``lookup`` returns a list with one value per CPU; :meth:`Map.lookup_sum`
and :func:`sum_values` add them up field by field, the usual way to read per-CPU counters.
"""

from __future__ import annotations

import ctypes
import os
import sys
from collections.abc import Iterator, Sequence
from typing import Any

from . import _libbpf as L
from .errors import BpfError
from .fs import unpin as _unpin


def _is_simple(ctype: type | None) -> bool:
    return ctype is not None and issubclass(ctype, ctypes._SimpleCData)


def _add(a: Any, b: Any) -> Any:
    """Field-by-field sum of two ctypes values (structs, arrays and integers nest)."""
    if isinstance(a, int):
        return a + b
    if isinstance(a, ctypes.Structure):
        out = type(a)()
        for field in a._fields_:
            name = field[0]
            setattr(out, name, _add(getattr(a, name), getattr(b, name)))
        return out
    if isinstance(a, ctypes.Array):
        arr = type(a)()
        for i in range(len(a)):
            arr[i] = _add(a[i], b[i])
        return arr
    if isinstance(a, ctypes._SimpleCData):
        return type(a)(a.value + b.value)
    raise TypeError(f"cannot sum values of type {type(a).__name__}")


def sum_values(values: Sequence[Any]) -> Any:
    """Sum per-CPU values: ints add, ctypes structs/arrays add field by field.

    Raises:
        ValueError: ``values`` is empty. TypeError: a value type that cannot be summed (bytes).
    """
    if not values:
        raise ValueError("sum_values: no values to sum")
    total = values[0]
    for value in values[1:]:
        total = _add(total, value)
    return total


def _map_info(fd: int) -> L.MapInfo:
    """The kernel's ``bpf_map_info`` prefix of the map behind ``fd``; BpfError if it is none."""
    info = L.MapInfo()
    size = ctypes.c_uint32(ctypes.sizeof(info))
    L.check(L.require().bpf_obj_get_info_by_fd(fd, ctypes.byref(info), ctypes.byref(size)),
            f"map info of fd {fd}")
    return info


class Map:
    """One BPF map, reached by file descriptor.

    Get one from :meth:`BpfObject.map` (before or after load), :meth:`from_pin`, or
    :meth:`typed` on another map. Maps from an object share the object's fd and die with it;
    a map from :meth:`from_pin` owns its fd (close it, or use it as a context manager).

    Attributes: ``name``, ``map_type`` (int, enum bpf_map_type), ``type_name`` ("hash"...),
    ``key_size``/``value_size`` (bytes), ``max_entries``, ``percpu`` (bool), ``ncpus``.
    """

    def __init__(self, *, name: str, map_type: int, key_size: int, value_size: int,
                 max_entries: int, fd: int = -1, handle: int | None = None, owned: bool = False,
                 key_type: type | None = None, value_type: type | None = None):
        self.name, self.map_type = name, map_type
        self.key_size, self.value_size, self.max_entries = key_size, value_size, max_entries
        self._fd, self._handle, self._owned = fd, handle, owned
        self.percpu = map_type in L.PERCPU_MAP_TYPES
        self.ncpus = L.possible_cpus() if self.percpu else 1
        self._stride = (value_size + 7) // 8 * 8 if self.percpu else value_size
        self.key_type = self._checked_type(key_type, key_size, "key")
        self.value_type = self._checked_type(value_type, value_size, "value")

    # --- construction ---
    @classmethod
    def from_fd(cls, fd: int, *, owned: bool = False, key_type: type | None = None,
                value_type: type | None = None) -> "Map":
        """Describe the map behind ``fd`` with ``bpf_obj_get_info_by_fd``.

        Raises:
            BpfError: ``fd`` is not a BPF map.
        """
        info = _map_info(fd)
        return cls(name=info.name.decode(), map_type=info.type, key_size=info.key_size,
                   value_size=info.value_size, max_entries=info.max_entries, fd=fd, owned=owned,
                   key_type=key_type, value_type=value_type)

    @classmethod
    def from_pin(cls, path: str, *, key_type: type | None = None,
                 value_type: type | None = None) -> "Map":
        """Open the map pinned at ``path`` (``bpf_obj_get``); the returned map owns its fd.

        Raises:
            BpfError: nothing is pinned there (errno ENOENT), or it is not a map.
        """
        fd = L.check(L.require().bpf_obj_get(path.encode()), f"open pinned map {path}")
        try:
            return cls.from_fd(fd, owned=True, key_type=key_type, value_type=value_type)
        except BpfError:
            os.close(fd)
            raise

    @classmethod
    def from_id(cls, map_id: int, *, key_type: type | None = None,
                value_type: type | None = None) -> "Map":
        """Open the map with kernel id ``map_id`` (``bpf_map_get_fd_by_id``); the returned map
        owns its fd.

        Raises:
            BpfError: no map has that id (errno ENOENT: it was freed).
        """
        fd = L.check(L.require().bpf_map_get_fd_by_id(map_id), f"open map id {map_id}")
        try:
            return cls.from_fd(fd, owned=True, key_type=key_type, value_type=value_type)
        except BpfError:
            os.close(fd)
            raise

    def typed(self, key_type: type | None = None, value_type: type | None = None) -> "Map":
        """The same map (same fd, not owned) decoding keys/values as the given ctypes types.

        Raises:
            BpfError: a type's size differs from the map's key or value size.
        """
        other = Map(name=self.name, map_type=self.map_type, key_size=self.key_size,
                    value_size=self.value_size, max_entries=self.max_entries, fd=self._fd,
                    handle=self._handle, key_type=key_type, value_type=value_type)
        return other

    def _checked_type(self, ctype: type | None, size: int, what: str) -> type | None:
        if ctype is not None and ctypes.sizeof(ctype) != size:
            raise BpfError(f"map {self.name}: {what} type {ctype.__name__} is "
                           f"{ctypes.sizeof(ctype)} bytes, the map's {what} is {size} bytes")
        return ctype

    @property
    def fd(self) -> int:
        """The map's file descriptor (valid once its object is loaded)."""
        if self._handle is not None:
            fd = L.require().bpf_map__fd(self._handle)
            if fd < 0:
                raise BpfError(f"map {self.name} has no fd yet: load its object first")
            return fd
        if self._fd < 0:
            raise BpfError(f"map {self.name} is closed")
        return self._fd

    @property
    def id(self) -> int:
        """The kernel's id of the map (``bpf_map_info.id``): unique while the map lives, so a
        re-created map has a new one.

        Raises:
            BpfError: the map is closed or not loaded yet.
        """
        return _map_info(self.fd).id

    @property
    def type_name(self) -> str:
        return L.MAP_TYPE_NAMES.get(self.map_type, str(self.map_type))

    def close(self) -> None:
        """Close an owned fd (from :meth:`from_pin`); a no-op for maps of an object."""
        if self._owned and self._fd >= 0:
            os.close(self._fd)
        self._fd = -1

    def __enter__(self) -> "Map":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return (f"Map({self.name!r}, {self.type_name}, key={self.key_size}B, "
                f"value={self.value_size}B, max_entries={self.max_entries})")

    # --- encoding ---
    def _encode(self, obj: Any, size: int, what: str) -> ctypes.Array:
        if isinstance(obj, int) and not isinstance(obj, bool):
            try:
                raw = obj.to_bytes(size, sys.byteorder)
            except OverflowError:
                raise ValueError(f"map {self.name}: {what} {obj} does not fit in {size} bytes") from None
        elif isinstance(obj, (bytes, bytearray, memoryview)):
            raw = bytes(obj)
        elif isinstance(obj, (ctypes.Structure, ctypes.Union, ctypes.Array, ctypes._SimpleCData)):
            raw = bytes(obj)
        else:
            raise TypeError(f"map {self.name}: {what} must be bytes, int or a ctypes object, "
                            f"not {type(obj).__name__}")
        if len(raw) != size:
            raise ValueError(f"map {self.name}: {what} is {len(raw)} bytes, the map needs {size}")
        return ctypes.create_string_buffer(raw, size)

    def _encode_value(self, value: Any) -> ctypes.Array:
        if not self.percpu:
            return self._encode(value, self.value_size, "value")
        if isinstance(value, (list, tuple)):
            if len(value) != self.ncpus:
                raise ValueError(f"map {self.name}: per-CPU value list has {len(value)} entries, "
                                 f"there are {self.ncpus} possible CPUs")
            per_cpu = value
        else:
            per_cpu = [value] * self.ncpus
        buf = ctypes.create_string_buffer(self._stride * self.ncpus)
        for cpu, item in enumerate(per_cpu):
            raw = self._encode(item, self.value_size, "value").raw
            ctypes.memmove(ctypes.addressof(buf) + cpu * self._stride, raw, len(raw))
        return buf

    def _decode(self, raw: bytes, ctype: Any) -> Any:
        if ctype is None:
            return raw
        obj = ctype.from_buffer_copy(raw)
        return obj.value if _is_simple(ctype) else obj

    def _decode_value(self, buf: ctypes.Array) -> Any:
        raw = buf.raw
        if not self.percpu:
            return self._decode(raw, self.value_type)
        return [self._decode(raw[c * self._stride:c * self._stride + self.value_size], self.value_type)
                for c in range(self.ncpus)]

    def _value_buf(self) -> ctypes.Array:
        return ctypes.create_string_buffer(self._stride * self.ncpus)

    # --- operations ---
    def lookup(self, key: Any) -> Any:
        """The value at ``key``, or None if absent. Per-CPU maps: a list, one value per CPU.

        Raises:
            ValueError/TypeError: the key has the wrong size or type. BpfError: kernel error.
        """
        kbuf, vbuf = self._encode(key, self.key_size, "key"), self._value_buf()
        ret = L.require().bpf_map_lookup_elem(self.fd, kbuf, vbuf)
        if ret < 0 and L.errno_of(ret) == 2:  # ENOENT
            return None
        L.check(ret, f"lookup in map {self.name}")
        return self._decode_value(vbuf)

    def lookup_sum(self, key: Any) -> Any:
        """The value at ``key`` summed over CPUs (for per-CPU counters), or None if absent.
        On a map that is not per-CPU this is :meth:`lookup`."""
        value = self.lookup(key)
        if value is None or not self.percpu:
            return value
        return sum_values(value)

    def update(self, key: Any, value: Any, flags: int = L.BPF_ANY) -> None:
        """Set ``key`` to ``value``. ``flags``: BPF_ANY (default), BPF_NOEXIST, BPF_EXIST.

        Per-CPU maps take a list of one value per CPU, or one value that is written to every
        CPU (fine for configuration; for counters pass a list).

        Raises:
            ValueError/TypeError: wrong size or type. BpfError: the kernel refused (e.g. E2BIG
            when the map is full, EEXIST with BPF_NOEXIST, ENOENT with BPF_EXIST).
        """
        kbuf, vbuf = self._encode(key, self.key_size, "key"), self._encode_value(value)
        L.check(L.require().bpf_map_update_elem(self.fd, kbuf, vbuf, flags),
                f"update of map {self.name}")

    def delete(self, key: Any) -> bool:
        """Delete ``key``; True if it was present. Array maps cannot delete (BpfError EINVAL)."""
        kbuf = self._encode(key, self.key_size, "key")
        ret = L.require().bpf_map_delete_elem(self.fd, kbuf)
        if ret < 0 and L.errno_of(ret) == 2:
            return False
        L.check(ret, f"delete from map {self.name}")
        return True

    def _raw_keys(self) -> Iterator[bytes]:
        lib, fd = L.require(), self.fd
        cur, nxt = None, ctypes.create_string_buffer(self.key_size)
        while True:
            ret = lib.bpf_map_get_next_key(fd, cur, nxt)
            if ret < 0:
                if L.errno_of(ret) == 2:
                    return
                L.check(ret, f"iterate map {self.name}")
            yield nxt.raw
            cur = ctypes.create_string_buffer(nxt.raw, self.key_size)

    def keys(self) -> Iterator[Any]:
        """Iterate over the keys (for arrays: every index). Decoded as ``key_type``."""
        for raw in self._raw_keys():
            yield self._decode(raw, self.key_type)

    def items(self) -> Iterator[tuple[Any, Any]]:
        """Iterate over (key, value); entries deleted meanwhile are skipped."""
        for raw in self._raw_keys():
            value = self.lookup(raw)
            if value is not None:
                yield self._decode(raw, self.key_type), value

    def items_sum(self) -> Iterator[tuple[Any, Any]]:
        """Like :meth:`items`, with per-CPU values summed."""
        for key, value in self.items():
            yield key, (sum_values(value) if self.percpu else value)

    def clear(self) -> int:
        """Delete every key of a hash-like map; returns how many were deleted."""
        return sum(self.delete(raw) for raw in list(self._raw_keys()))

    # --- pinning ---
    def pin(self, path: str) -> str:
        """Pin the map at ``path`` (under bpffs, e.g. from :func:`mrckit.bpf.pin_path`).

        Raises:
            BpfError: the path exists (EEXIST) or bpffs is not mounted there.
        """
        os.makedirs(os.path.dirname(path), exist_ok=True)
        L.check(L.require().bpf_obj_pin(self.fd, path.encode()), f"pin map {self.name} at {path}")
        return path

    @staticmethod
    def unpin(path: str) -> bool:
        """Remove the pin at ``path``; True if it existed."""
        return _unpin(path)
