"""Registered memory regions: the only places a responder writes (design section 6).

A region is a bytearray with a base virtual address (VA) and an rkey. Placement checks the
rkey and that [VA, VA + length) lies inside the region before a single byte is written.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass, field


@dataclass
class MemoryRegion:
    """``length`` bytes at virtual address ``base_va``, reachable by remote writes with ``rkey``.

    ``buf`` is the backing bytearray; ``placed_bytes`` counts bytes written by remote writes
    (duplicates excluded).
    """

    rkey: int
    base_va: int
    buf: bytearray
    placed_bytes: int = 0
    view: memoryview = field(init=False, repr=False)

    def __post_init__(self):
        self.view = memoryview(self.buf)

    @property
    def length(self) -> int:
        """Region size in bytes."""
        return len(self.buf)

    def contains(self, va: int, length: int) -> bool:
        """Whether bytes [va, va + length) all lie inside the region."""
        return self.base_va <= va and va + length <= self.base_va + len(self.buf)

    def sha256(self) -> str:
        """Hex SHA-256 of the whole region."""
        return hashlib.sha256(self.buf).hexdigest()


class MemoryTable:
    """The regions of one endpoint, keyed by rkey."""

    def __init__(self):
        self._by_rkey: dict[int, MemoryRegion] = {}
        self._listeners: list = []

    def add_listener(self, fn) -> None:
        """Call ``fn(region)`` after each register; the native responder follows the table
        this way."""
        self._listeners.append(fn)

    def remove_listener(self, fn) -> None:
        """Stop calling ``fn``."""
        if fn in self._listeners:
            self._listeners.remove(fn)

    def regions(self) -> list[MemoryRegion]:
        """Every registered region."""
        return list(self._by_rkey.values())

    def register(self, length: int, *, base_va: int = 0, rkey: int | None = None) -> MemoryRegion:
        """Register a zero-filled region of ``length`` bytes at ``base_va``.

        ``rkey`` defaults to a random unused 32-bit value.

        Raises:
            ValueError: length <= 0, the VA range exceeds 64 bits, or ``rkey`` is out of range
                or already registered.
        """
        if length <= 0:
            raise ValueError(f"memory region length must be positive, got {length}")
        if base_va < 0 or base_va + length > 1 << 64:
            raise ValueError(f"memory region [{base_va:#x}, +{length}) exceeds the 64-bit VA space")
        if rkey is None:
            rkey = secrets.randbits(32)
            while rkey in self._by_rkey:
                rkey = secrets.randbits(32)
        if not 0 <= rkey <= 0xFFFFFFFF:
            raise ValueError(f"rkey {rkey} is not a 32-bit value")
        if rkey in self._by_rkey:
            raise ValueError(f"rkey {rkey:#x} is registered already")
        mr = MemoryRegion(rkey, base_va, bytearray(length))
        self._by_rkey[rkey] = mr
        for fn in self._listeners:
            fn(mr)
        return mr

    def lookup(self, rkey: int) -> MemoryRegion | None:
        """The region registered with ``rkey``, or None."""
        return self._by_rkey.get(rkey)
