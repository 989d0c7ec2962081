"""Link-state reports to a running controller (``ReportLink`` of ``mrckit/proto/controller.proto``;
``mrc controller link LINK --down|--up``; :func:`mrckit.control.client.report_link`).

A real switch learns that a port went down from its own PHY; P4Runtime has no standard message
for it, so whoever knows (the fabric emulator's fault commands, an operator, a monitoring
system) reports it. In EV-hash mode the controller reroutes on such a report (``reroute.py``);
in SRv6 mode it DENIES the link on every host at once (``reactor.py``), and lifts it on a
report that the link is up. The links reported down are kept in the controller's saved status
(``status.py``), so a restarted controller knows them before it programs anything.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class LinkReport:
    """One report: ``link`` (design 3.3 name) went down (``up`` False) or came back, at
    ``time_ns`` (wall clock; 0: when the controller got it), according to ``source``."""

    link: str
    up: bool
    time_ns: int
    source: str = ""
