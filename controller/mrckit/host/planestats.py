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


class SetReports:
    """The failure reports of one read of a peer's EV set: the evidence an ASSUMED_BAD event
    carries (its EV's counters, its plane's row as the event leaves it), for many events
    against one read. The dataplane retires a whole path at once (a LOSS and up to 31
    PATH_LOSS events) and the agent drains them together: each report then costs a lookup,
    not a walk over the set.

    Args:
        peer: the peer's NIC address (text), the rows' ``peer``.
        slots: the set's active slots, as :func:`plane_rows` takes them; read once, here.
        retired: EVs retired out of the set.
        port_up: plane -> whether the local plane port is up.
        counters: the slot attributes of a report's EV counters (EvCounters in host_agent.proto).
    """

    def __init__(self, peer: str, slots: Iterable, retired: Iterable[int], port_up: Mapping[int, bool],
                 counters: tuple[str, ...]):
        self._peer, self._port_up = peer, port_up
        self._names = counters
        self._all = list(slots)
        self._retired = list(retired)
        self._first: dict[int, object] = {}  # EV -> the first slot that holds it
        self._states: dict[int, list[int]] = {}  # EV -> the state of every slot that holds it
        self._rows: dict[int, dict | None] = {}  # plane -> its row, read on first use

    def report(self, ev: int, new_state: int) -> tuple[dict[str, int] | None, dict | None]:
        """(the counters of ``ev``'s slot, or None when it holds no slot; the row of ``ev``'s
        plane with ``ev`` counted in ``new_state``, or None when the plane has neither slots nor
        retired EVs). The row is the one :func:`plane_rows` gives with ``override={ev:
        new_state}``."""
        plane = ev_plane(ev)
        if plane not in self._rows:
            self._read_plane(plane)
        base = self._rows[plane]
        row = dict(base) if base is not None else None
        new_key = STATE_KEYS.get(new_state)
        for old in self._states.get(ev, ()):
            old_key = STATE_KEYS.get(old)
            if row is None or old_key == new_key:
                continue
            if old_key:
                row[old_key] -= 1
            if new_key:
                row[new_key] += 1
        slot = self._first.get(ev)
        counters = {k: int(getattr(slot, k)) for k in self._names} if slot is not None else None
        return counters, row

    def _read_plane(self, plane: int) -> None:
        slots = [s for s in self._all if ev_plane(s.ev) == plane]
        for s in slots:
            ev = int(s.ev)
            self._states.setdefault(ev, []).append(int(s.state))
            self._first.setdefault(ev, s)
        rows = plane_rows(self._peer, slots, [ev for ev in self._retired if ev_plane(ev) == plane], self._port_up)
        self._rows[plane] = rows[0] if rows else None
