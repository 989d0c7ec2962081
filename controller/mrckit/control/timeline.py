"""The failure timeline: link down -> first ASSUMED_BAD (-> evidence set aside as an end
host's, not a link's, or explained by arrivals) -> localisation (-> links the connectivity
guard withheld) -> DENY on all hosts -> lifted; in EV-hash mode link down -> reroute (groups
changed on the switches) -> link up -> restore (``reroute.py``). Times are
wall-clock ns (CLOCK_REALTIME: the hosts' ``wall_time_ns`` and the controller's clock agree on
one machine; across machines they are as good as NTP)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass, field

KINDS = ("link_down", "first_assumed_bad", "end_host", "arrivals", "localised", "withheld", "deny_all_hosts", "lifted",
         "link_up", "reroute", "restore")
MAX_ENTRIES = 1000


@dataclass(frozen=True)
class Mark:
    """One timeline entry: ``kind`` (one of ``KINDS``), wall time in ns, links, free text."""

    kind: str
    time_ns: int
    links: tuple[str, ...]
    detail: str

    def as_dict(self) -> dict:
        """Plain data for the status."""
        return {"kind": self.kind, "time_ns": self.time_ns, "links": list(self.links), "detail": self.detail}


@dataclass
class Timeline:
    """An append-only, bounded list of :class:`Mark` s; each new mark is also handed to every
    callable in ``listeners`` (the controller's northbound streams it to watchers)."""

    marks: list[Mark] = field(default_factory=list)
    listeners: list[Callable[[Mark], None]] = field(default_factory=list, repr=False, compare=False)

    def add(self, kind: str, time_ns: int, links: tuple[str, ...], detail: str = "") -> Mark:
        """Append a mark. Raises ValueError for an unknown kind."""
        if kind not in KINDS:
            raise ValueError(f"timeline kind {kind!r} is not one of {', '.join(KINDS)}")
        mark = Mark(kind, int(time_ns), tuple(links), detail)
        self.marks.append(mark)
        del self.marks[:-MAX_ENTRIES]
        for listener in self.listeners:
            listener(mark)
        return mark

    def first(self, kind: str, after_ns: int = 0) -> Mark | None:
        """The first mark of ``kind`` at or after ``after_ns``, or None."""
        return next((m for m in self.marks if m.kind == kind and m.time_ns >= after_ns), None)


def format_marks(marks: list[dict] | list[Mark]) -> list[str]:
    """Lines ``HH:MM:SS.mmmuuu  +Δms  kind  links  detail``, Δ from the first mark."""
    rows = [m if isinstance(m, dict) else m.as_dict() for m in marks]
    if not rows:
        return []
    t0 = rows[0]["time_ns"]
    out = []
    for m in rows:
        stamp = dt.datetime.fromtimestamp(m["time_ns"] / 1e9, dt.timezone.utc).strftime("%H:%M:%S.%f")
        out.append(f"{stamp}  +{(m['time_ns'] - t0) / 1e6:9.3f} ms  {m['kind']:<17} "
                   f"{','.join(m['links']) or '-':<24} {m['detail']}")
    return out
