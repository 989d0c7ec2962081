"""Consumer of a ``BPF_MAP_TYPE_RINGBUF`` map through libbpf's ``ring_buffer__*`` API."""

from __future__ import annotations

import ctypes

from . import _libbpf as L
from .errors import BpfError
from .maps import Map

_SAMPLE_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t)


class RingBuffer:
    """Records of ctypes type ``record`` that BPF programs submit to the ring buffer ``ring``.

    A record shorter than ``record`` is skipped; a longer one is cut to its size. ``poll`` hands
    out what arrived since the last call; ``fd`` is an epoll fd that turns readable when records
    wait. Raises BpfError when libbpf cannot set the ring buffer up (not a ring buffer map).
    """

    def __init__(self, ring: Map, record: type[ctypes.Structure]):
        lib = L.require()
        lib.ring_buffer__new.restype = ctypes.c_void_p
        lib.ring_buffer__new.argtypes = [ctypes.c_int, _SAMPLE_FN, ctypes.c_void_p, ctypes.c_void_p]
        lib.ring_buffer__poll.argtypes = [ctypes.c_void_p, ctypes.c_int]
        lib.ring_buffer__consume.argtypes = [ctypes.c_void_p]
        lib.ring_buffer__free.argtypes = [ctypes.c_void_p]
        lib.ring_buffer__epoll_fd.argtypes = [ctypes.c_void_p]
        self._lib, self._record = lib, record
        self._pending: list[ctypes.Structure] = []
        self._cb = _SAMPLE_FN(self._sample)  # keep a reference: libbpf calls it later
        self._rb: int | None = L.check_ptr(lib.ring_buffer__new(ring.fd, self._cb, None, None),
                               f"ring_buffer__new({ring.name})")

    def _sample(self, _ctx, data, size) -> int:
        n = ctypes.sizeof(self._record)
        if size >= n:
            self._pending.append(self._record.from_buffer_copy(ctypes.string_at(data, n)))
        return 0

    def poll(self, timeout_ms: int) -> list:
        """The records that arrived, waiting up to ``timeout_ms`` ms for one (0: do not wait)."""
        if not self._rb:
            return []
        if timeout_ms:
            self._lib.ring_buffer__poll(self._rb, timeout_ms)
        else:
            self._lib.ring_buffer__consume(self._rb)
        out, self._pending = self._pending, []
        return out

    def fd(self) -> int:
        """An epoll fd, readable when records wait. Raises BpfError once closed."""
        if not self._rb:
            raise BpfError("the ring buffer is closed")
        return self._lib.ring_buffer__epoll_fd(self._rb)

    def close(self) -> None:
        """Free libbpf's ring buffer; polling afterwards returns nothing."""
        if self._rb:
            self._lib.ring_buffer__free(self._rb)
            self._rb = None
