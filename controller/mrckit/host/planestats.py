"""Per-plane statistics of the EV sets: the failure evidence of EV-hash (ecmp) mode, where an
EV names no path, and a summary in SRv6 mode too. Pure functions over EV slots.

A row is a dict: plane, peer ('' = summed over the live peers), port_up, evs, good, skip,
assumed_bad, denied, retired, tx_packets, tx_bytes, acked, nacks, skips (the ``PlaneStats``
message of host_agent.proto). Counters are packets and bytes summed over the plane's EVs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from ..wire.ev import ev_plane
from .state import BAD, DENIED, GOOD, SKIP

STATE_KEYS = {GOOD: "good", SKIP: "skip", BAD: "assumed_bad", DENIED: "denied"}
COUNTERS = ("tx_packets", "tx_bytes", "acked", "nacks", "skips")
SUMMED = ("evs", "good", "skip", "assumed_bad", "denied", "retired") + COUNTERS


def _empty(plane: int, peer: str, port_up: Mapping[int, bool]) -> dict:
    row = dict(plane=plane, peer=peer, port_up=bool(port_up.get(plane, False)))
    row.update({k: 0 for k in SUMMED})
    return row


def plane_rows(peer: str, slots: Iterable, retired: Iterable[int], port_up: Mapping[int, bool],
               override: Mapping[int, int] | None = None) -> list[dict]:
    """One row per plane of one peer's EV set.

    Args:
        slots: the set's active slots (objects with ev, state and the COUNTERS attributes).
        retired: EVs retired out of the set (ASSUMED_BAD, being probed).
        port_up: plane -> whether the local plane port is up.
        override: EV -> state to count instead of the slot's (a change not yet written back).
    """
    override = override or {}
    rows: dict[int, dict] = {}
    for s in slots:
        plane = ev_plane(s.ev)
        row = rows.setdefault(plane, _empty(plane, peer, port_up))
        row["evs"] += 1
        key = STATE_KEYS.get(override.get(s.ev, s.state))
        if key:
            row[key] += 1
        for name in COUNTERS:
            row[name] += int(getattr(s, name))
    for ev in retired:
        rows.setdefault(ev_plane(ev), _empty(ev_plane(ev), peer, port_up))["retired"] += 1
    return [rows[p] for p in sorted(rows)]


def sum_planes(rows: Iterable[dict], port_up: Mapping[int, bool]) -> list[dict]:
    """Per-plane totals (peer '') of per-peer rows, for every plane with a port or a row."""
    out = {p: _empty(p, "", port_up) for p in port_up}
    for row in rows:
        total = out.setdefault(row["plane"], _empty(row["plane"], "", port_up))
        for k in SUMMED:
            total[k] += row[k]
    return [out[p] for p in sorted(out)]
