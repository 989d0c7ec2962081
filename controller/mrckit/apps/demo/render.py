"""The demo report as rich renderables; the CLI prints them."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from .report import DemoReport

MODE_NAMES = {"srv6": "srv6 (SRv6 uSID source routing: the hosts choose each EV's path)",
              "ecmp": "ecmp (EV-hash mode: the switches hash each EV; paths are opaque to the hosts)"}


def _s(t: float | None) -> str:
    return "-" if t is None else f"{t:.3f} s"


def _ms_after(t: float | None, ref: float) -> str:
    return "-" if t is None else f"{t:.3f} s  (+{(t - ref) * 1e3:.1f} ms)"


def _ms_after_fine(t: float | None, ref: float) -> str:
    """Like _ms_after with µs resolution: the dataplane's times resolve sub-millisecond events."""
    return "-" if t is None else f"{t:.6f} s  ({(t - ref) * 1e3:+.3f} ms)"


def duration_text(us: float | None) -> str:
    """µs below a millisecond, ms above; ``-`` for None."""
    if us is None:
        return "-"
    return f"{us:.1f} µs" if abs(us) < 1000 else f"{us / 1e3:.3f} ms"


def _kv(title: str, rows: list[tuple[str, str]]) -> Table:
    table = Table(title=title, show_header=False, title_justify="left", box=None, pad_edge=False)
    table.add_column(style="bold")
    table.add_column()
    for k, v in rows:
        table.add_row(k, v)
    return table


def _us(ns: int | None) -> float | None:
    return None if ns is None else ns / 1e3


def _window_text(packets: int | None) -> str:
    """The writer's window cap: ``max 32 packets``, or ``uncapped`` (the MPR)."""
    return f"max {packets} packets" if packets else "uncapped"


def summary(r: DemoReport) -> Table:
    """Transfer, bytes and endpoint counters."""
    b, e = r.bytes, r.endpoint
    rtx = ", ".join(f"{k} {v}" for k, v in sorted(r.endpoint.retransmits.items())) or "none"
    nacks = ", ".join(f"{k} {v}" for k, v in sorted(r.endpoint.nacks.items())) or "none"
    return _kv("transfer", [
        ("mode", MODE_NAMES.get(r.mode, r.mode)),
        ("endpoint", f"{r.endpoint_name} (writer RTO {duration_text(_us(r.writer_rto_ns))}, window "
                     f"{_window_text(r.writer_max_cwnd)}, host agents' RTO {duration_text(_us(r.agent_rto_ns))})"),
        ("write", f"{r.sender} -> {r.receiver} on the {r.target} target, {b.sent} B in {r.duration_s:.2f} s "
                  f"({r.goodput_gbps:.3f} Gb/s)"),
        ("bytes", f"sent {b.sent}, placed {b.placed}, verified {b.verified}"),
        ("SHA-256", f"{b.sha256_sent[:16]}… {'matches' if b.hash_match else 'DIFFERS from'} "
                    f"{b.sha256_received[:16]}…"),
        ("packets", f"{e.data_packets} data, {e.sacks} SACKs, NACKs: {nacks}, timeouts {e.timeouts}"),
        ("retransmits", f"{e.retransmits_total} ({rtx})"),
        ("trim / ECN", f"switches trimmed {r.switches.trimmed}, ECN-marked {r.switches.ecn_marked}; "
                       f"responder saw {e.responder_trimmed} trimmed, {e.responder_ce_marked} CE"),
    ])


def failover(r: DemoReport) -> Table:
    """The failover figures, relative to the fault."""
    f, t0 = r.failover, r.failover.t_fault_s
    when = ("the fault program's first drop" if f.fault_time_source == "fault program"
            else "when the demo applied it (no fault program timed it)")
    out = f"{f.dead_evs_out} of {f.dead_evs} dead EVs taken out"
    return _kv("failover", [
        ("fault", f"{r.fault.describe()} on {r.fault.link} at {_ms_after_fine(t0, t0).split('  ')[0]} ({when}); "
                  f"the sender's path p{r.fault.plane}/s{r.fault.spine} crosses it"),
        ("applied by the demo", _ms_after_fine(f.t_fault_injected_s, t0)),
        *([("flaps", f"{f.flaps}, the first down {_ms_after(f.t_first_flap_down_s, t0)}, the last up "
                     f"{_ms_after(f.t_last_flap_up_s, t0)}: inside the window from the fault to the restore's end "
                     f"({_ms_after(f.t_restored_s, t0)})")] if f.flaps is not None else []),
        ("dataplane failover", f"{duration_text(f.dataplane_failover_us)}  (last dead EV retired - first drop; {out})"),
        ("first EV ASSUMED_BAD", _ms_after(f.t_first_assumed_bad_s, t0)),
        ("path out of service", _ms_after(f.t_out_of_service_s, t0)),
        ("failover complete", _ms_after(f.t_failover_s, t0)),
        ("last data packet on it", _ms_after(f.t_last_dead_tx_s, t0)),
        ("controller DENY", _ms_after(f.t_deny_s, t0) + (f"  {', '.join(f.deny_links)}" if f.deny_links else "")),
        ("restored", _s(f.t_restore_s)),
        ("DENY lifted", _s(f.t_deny_lifted_s)),
        ("goodput", f"before {f.goodput_before_gbps:.3f}, during {f.goodput_during_gbps:.3f}, "
                    f"after {f.goodput_after_gbps:.3f} Gb/s"),
    ])


def paths(r: DemoReport) -> Table:
    """Data packets per path and phase, with retire/probe-back cycles."""
    table = Table(title="data packets per path (sender's per-EV counters, probes excluded)",
                  title_justify="left")
    for col in ("path", "before", "during", "after", "share during", "retired", "probed back"):
        table.add_column(col, justify="left" if col == "path" else "right")
    for p in r.paths:
        style = "red" if p.failed else None
        table.add_row(p.name + (" (failed)" if p.failed else ""), str(p.packets_before), str(p.packets_during),
                      str(p.packets_after), f"{p.share_during:.1%}", str(p.retired), str(p.probed_back),
                      style=style)
    return table


def switches(r: DemoReport) -> Table:
    """Per-plane and per-spine packets from the switch counters."""
    table = Table(title="switch counters (packets forwarded by each spine)", title_justify="left")
    for col in ("plane", "spine", "switch", "packets"):
        table.add_column(col, justify="right" if col == "packets" else "left")
    for s in r.switches.per_spine:
        table.add_row(str(s.plane), str(s.spine), s.switch, str(s.packets))
    for plane, n in sorted(r.switches.per_plane.items()):
        table.add_row(plane, "all", "", str(n), style="bold")
    return table


def transitions(r: DemoReport) -> Table:
    """EV transitions by host, state and reason; ``together`` is the most EVs that one step
    moved (a path's EVs retired at once by path-aware retirement)."""
    table = Table(title="EV transitions (host agents' WatchEvents)", title_justify="left")
    for col in ("host", "new state", "reason", "count", "together"):
        table.add_column(col, justify="right" if col in ("count", "together") else "left")
    for t in r.ev_transitions:
        table.add_row(t.host, t.new_state, t.reason, str(t.count), str(t.together))
    return table


def timeline(r: DemoReport) -> Table:
    """The timeline of the run."""
    table = Table(title="timeline", title_justify="left")
    for col in ("t", "source", "event", "detail"):
        table.add_column(col)
    for e in r.timeline:
        table.add_row(f"{e.t_s:8.3f} s", e.source, e.what, e.detail)
    return table


def verdict(r: DemoReport) -> Table:
    """The checks, one per line."""
    table = Table(title="checks", title_justify="left")
    for col in ("check", "result", "detail"):
        table.add_column(col)
    for c in r.checks:
        table.add_row(c.name, Text("ok", style="green") if c.ok else Text("FAILED", style="bold red"), c.detail)
    return table


def render(r: DemoReport) -> Group:
    """The whole report, in the order a reader wants it."""
    return Group(summary(r), Text(), failover(r), Text(), paths(r), switches(r), transitions(r), timeline(r),
                 verdict(r))


def _num(v, unit: str = "", signed: bool = False) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:+.3f}{unit}" if signed else f"{v:.3f}{unit}"
    return f"{v:+d}{unit}" if signed else f"{v}{unit}"


COMPARISON_ROWS = (  # field, label (the caption and docs/demo.md define them)
    ("fault_duration_s", "fault duration"),
    ("dead_link_evs", "EVs via the dead link"),
    ("dead_link_evs_retired", "  retired or denied"),
    ("dead_link_packets_lost", "  packets lost on them"),
    ("packets_lost_to_fault", "lost, fault to restore"),
    ("packets_lost", "lost, whole write"),
    ("packets_lost_by_ev", "  summed per EV"),
    ("evs_with_loss", "EVs that lost packets"),
    ("evs_retired", "EV retirements, all EVs"),
    ("evs_retired_distinct", "  distinct EVs retired"),
    ("link_packets_lost", "dead-link drops (switch)"),
    ("t_last_loss_s", "fault to last loss"),
    ("t_repair_s", "fault to repair"),
    ("retransmits_total", "retransmissions"),
)
COMPARISON_CAPTION = (
    "fault duration: fault to restore (the fault is placed by bytes, so it differs per mode). "
    "EVs via the dead link: the sender's EVs in use when the fault hit whose path crossed it (srv6: "
    "the EV's path; ecmp: the sender T0's group hashed it onto that spine); retired or denied: taken "
    "out of use by the sender, fault to restore; packets lost on them: their tx - rx. lost: the "
    "requestor's data and probes that never reached the responder (fault to restore: sent in that "
    "window). dead-link drops: switch port counters at both ends of the failed link, every class "
    "(data, SACKs, probes), fault to end. repair: srv6 DENY on every host, ecmp groups rewritten.")


def comparison(c) -> Table:
    """The two modes side by side, with the difference ECMP − SRv6 (``c``: a
    ``mrckit.apps.demo.compare.ComparisonReport``)."""
    table = Table(title=f"the cost of opaque paths: the same write and fault ({c.fault.describe()} on "
                        f"{c.fault.link}) in both modes", title_justify="left",
                  caption=COMPARISON_CAPTION, caption_justify="left")
    for col in ("", "srv6", "ecmp", "ecmp - srv6"):
        table.add_column(col, justify="left" if not col else "right")
    s, e, d = c.modes["srv6"], c.modes["ecmp"], c.difference
    for field, label in COMPARISON_ROWS:
        unit = " s" if field.endswith("_s") else ""
        table.add_row(label, _num(getattr(s, field), unit), _num(getattr(e, field), unit),
                      _num(getattr(d, field), unit, signed=True),
                      style="bold" if field in ("packets_lost_to_fault", "dead_link_packets_lost") else None)
    table.add_row("write duration", _num(s.duration_s, " s"), _num(e.duration_s, " s"),
                  _num(e.duration_s - s.duration_s, " s", signed=True))
    table.add_row("bytes verified", f"{s.bytes_verified} ({'match' if s.hash_match else 'MISMATCH'})",
                  f"{e.bytes_verified} ({'match' if e.hash_match else 'MISMATCH'})", "")
    return table


def render_comparison(c) -> Group:
    """``mrc demo --mode ecmp``'s report: each run's transfer summary, the side-by-side
    comparison, then every check."""
    parts: list[RenderableType] = []
    for mode in ("ecmp", "srv6"):
        parts += [summary(c.runs[mode]), Text()]
    checks = Table(title="checks", title_justify="left")
    for col in ("check", "result", "detail"):
        checks.add_column(col)
    for ch in c.checks:
        checks.add_row(ch.name, Text("ok", style="green") if ch.ok else Text("FAILED", style="bold red"), ch.detail)
    return Group(*parts, comparison(c), Text(), checks)
