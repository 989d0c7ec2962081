"""Per-peer state that the host agent keeps beside the dataplane's EV sets."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..wire.constants import EvState

GOOD, SKIP, BAD, DENIED = (int(s) for s in EvState)


def went_bad(old: int, new: int) -> bool:
    """Whether a change from state ``old`` to ``new`` retires an EV (design section 5: a
    failure, which carries a failure report and is bad_ns's moment)."""
    return new == BAD and old != BAD


@dataclass
class ProbeTarget:
    """A probed EV of one peer: consecutive answers and when it was last probed."""

    streak: int = 0
    last_probe_ns: int = 0
    outstanding: int | None = None  # probe_id waiting for an answer
    tx_packets: int = 0             # retired EVs: the slot's counters when it was retired
    last_tx_ns: int = 0
    acked: int = 0

    def busy(self, now: int, interval: int) -> bool:
        """Whether the EV cannot be probed at ``now`` (ns, CLOCK_MONOTONIC): its probe awaits
        an answer, or it was probed less than ``interval`` ns ago."""
        return self.outstanding is not None or now - self.last_probe_ns < interval


@dataclass
class PeerState:
    """What the agent keeps per live peer, beside the dataplane's EV set."""

    backups: dict[int, list[int]]
    retired: dict[int, ProbeTarget] = field(default_factory=dict)  # ASSUMED_BAD, out of the set
    probes: dict[int, ProbeTarget] = field(default_factory=dict)   # probed EVs still in the set
    dead_planes: set[int] = field(default_factory=set)             # from PORT_STATUS_UPDATE
    tx_totals: dict[int, tuple[int, int]] = field(default_factory=dict)  # EV -> (tx packets, bytes) when it last left a slot
    probe_reports: dict[int, tuple[bool, int]] = field(default_factory=dict)  # path -> (ok, ns) last published
