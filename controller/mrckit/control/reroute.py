"""EV-hash mode failure reaction: link reports in, group changes out (ECMP contract 6).

In EV-hash mode a host cannot map an EV to a path (the switches hash it), so the controller
neither localises from host evidence nor DENIES links on hosts. Instead, when a T0-T1 link is
reported down (``reports.py``) it recompiles the groups and routes of every T0 of that plane
for the new set of links down (``mrckit.topology.ecmp``: the T0 at the link's end drops the
member from its shared group, the other T0s get a group for that destination leaf without the
T1) and writes only the difference; a report that the link is back up restores them. That is
how an ECMP fabric reroutes. The hosts' EVs that hashed onto the dead link go ASSUMED_BAD on
their own losses meanwhile, as in SRv6 mode.

A state machine with no I/O, like ``reactor.py``: the controller feeds it reports and host
events, carries out the :class:`Reroute` it returns on the switches, and confirms with
:meth:`Rerouter.done`. The timeline gets the same kinds of marks as a DENY:
``link_down`` / ``link_up`` (the report), ``first_assumed_bad`` (the first host that noticed,
once per report), ``reroute`` (groups changed on every affected switch) and ``restore``
(groups back after the link came up).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..topology import CompiledFabric
from .diff import EcmpTables
from .reactor import ASSUMED_BAD, CONGESTION_REASONS
from .timeline import Timeline


@dataclass(frozen=True)
class Reroute:
    """Rewrite the EV-hash tables of ``switches`` for ``down`` (the links down after the
    report of ``link`` going down, or coming up when ``up``)."""

    link: str
    up: bool
    switches: tuple[str, ...]
    down: frozenset[str]


@dataclass
class Rerouter:
    """See the module docstring. ``fabric`` is compiled in EV-hash mode."""

    fabric: CompiledFabric
    timeline: Timeline = field(default_factory=Timeline)
    down: dict[str, int] = field(default_factory=dict)       # link -> when reported down (ns)
    rerouted: dict[str, int] = field(default_factory=dict)   # link -> when the groups avoided it (ns)
    _noticed: bool = True                                    # first ASSUMED_BAD since the last report seen

    def adopt(self, down: dict[str, int]) -> None:
        """Links found down at start (a restarted controller re-reading the reports): the
        first programming already avoids them, so they count as rerouted."""
        self.down = dict(down)
        self.rerouted = dict(down)

    def desired(self, switch: str) -> EcmpTables:
        """The members, groups and routes ``switch`` should hold now."""
        groups, routes = self.fabric.groups_and_routes(switch, list(self.down))
        return EcmpTables(self.fabric.members(switch), groups, routes)

    def report(self, link: str, up: bool, time_ns: int, source: str = "") -> Reroute | None:
        """A report that ``link`` went down (or up). Returns the switches to rewrite, or None
        when nothing changes (a repeated report). A host link changes no group: it is only
        put on the timeline.

        Raises:
            TopologyError: the fabric has no such link. ValueError: a malformed name.
        """
        self.fabric.down_links([link])  # raises for a link the fabric lacks
        if up == (link not in self.down):
            return None
        before = set(self.down)
        self.timeline.add("link_up" if up else "link_down", time_ns, (link,), source or "reported")
        if up:
            self.down.pop(link)
        else:
            self.down[link] = time_ns
            self._noticed = False
        switches = self.fabric.affected_switches(before, set(self.down))
        if not switches:
            self.rerouted.pop(link, None)
            return None
        return Reroute(link, up, tuple(switches), frozenset(self.down))

    def done(self, change: Reroute, time_ns: int, written: dict[str, int], failed: dict[str, str]) -> None:
        """``change`` was carried out: ``written`` = switch -> updates written (0 for a switch
        that needed none), ``failed`` = switch -> why not (it gets the tables when it
        reconnects and is reconciled)."""
        changed = sorted(n for n, count in written.items() if count)
        detail = (f"groups and routes rewritten on {len(changed)} of {len(change.switches)} switches "
                  f"({sum(written.values())} updates)")
        if failed:
            detail += f"; not reached: {', '.join(sorted(failed))} (reconciled on reconnect)"
        if change.up:
            self.rerouted.pop(change.link, None)
            self.timeline.add("restore", time_ns, (change.link,), detail)
        else:
            self.rerouted[change.link] = time_ns
            self.timeline.add("reroute", time_ns, (change.link,), detail)

    def host_event(self, host: str, ev, now_ns: int) -> None:
        """An EvEvent from a host: the first non-congestion ASSUMED_BAD after a link went
        down goes on the timeline (when the hosts noticed, for the demo report); a host's
        port going down (PORT_DOWN) is a link down for the timeline."""
        if not ev.peer and ev.reason == "PORT_DOWN" and ev.link:
            self.timeline.add("link_down", ev.wall_time_ns or now_ns, (ev.link,), f"port down seen by {host}")
            return
        if self._noticed or not ev.peer or ev.new_state != ASSUMED_BAD or ev.reason in CONGESTION_REASONS:
            return
        self._noticed = True
        self.timeline.add("first_assumed_bad", ev.wall_time_ns or now_ns, (),
                          f"{host}: {ev.reason} peer {ev.peer} EV 0x{ev.ev:08x}")

    def links_down(self) -> list[str]:
        """Links reported down."""
        return sorted(self.down)
