"""The demo's plot: one PNG, two panels sharing the time axis, and a zoom around the
fault, drawn with matplotlib's Agg backend (no display needed).

- top: goodput (Gb/s of RDMA payload placed) per sample interval, with the fault window shaded
  and the fault, the restore and each recovery event marked;
- bottom: data packets per second that the sender put on each path (plane × spine), from its
  per-EV counters; the failed path is drawn red, and goes to zero while it is bypassed;
- zoom (when the report has dead EVs): µs around the fault program's first drop, from the
  dataplane's own timestamps, which resolve what 50 ms samples cannot: one row per dead EV
  (its path crossed the failed link) with its last data packet before the restore (the host
  dataplane's per-EV ``last_tx_ns``) and its retirement (the ASSUMED_BAD event, whose time is
  the slot's ``bad_ns``) or denial; the first drop, the demo's own fault time and the last
  retirement are marked. The window adapts to those marks.
"""

from __future__ import annotations

from pathlib import Path

from .report import DemoReport, path_name

_MARKS = (  # failover field, label, colour, line style
    ("t_fault_s", "fault injected", "red", "--"),
    ("t_first_assumed_bad_s", "first EV ASSUMED_BAD", "darkorange", ":"),
    ("t_failover_s", "failover complete", "purple", "-."),
    ("t_deny_s", "controller DENY", "saddlebrown", ":"),
    ("t_restore_s", "fault restored", "green", "--"),
    ("t_deny_lifted_s", "DENY lifted", "olive", ":"),
)


BIN_S = 0.1
"""Rates are drawn over intervals of at least this many seconds (samples are ~50 ms apart)."""


def rates(t_s: list[float], cumulative: list[int], min_dt: float = 0.0) -> tuple[list[float], list[float]]:
    """Rates of a cumulative series over consecutive intervals of at least ``min_dt`` seconds
    (one per sample interval with 0): (interval midpoints in s, units per s)."""
    mids, out = [], []
    start = 0
    for i in range(1, len(t_s)):
        dt = t_s[i] - t_s[start]
        if dt > 0 and dt >= min_dt:
            mids.append((t_s[i] + t_s[start]) / 2)
            out.append((cumulative[i] - cumulative[start]) / dt)
            start = i
    return mids, out


def plot_report(report: DemoReport, path: str | Path) -> Path:
    """Draw ``report`` into the PNG at ``path`` (folders are created); returns the path.

    Raises:
        ValueError: the report has fewer than two samples.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    s = report.series
    if len(s.t_s) < 2:
        raise ValueError("the report has fewer than two samples: nothing to plot")
    zoom = bool(report.failover.dead_ev_marks)
    fig = plt.figure(figsize=(11, 10.5 if zoom else 7.5), constrained_layout=True)
    grid = fig.add_gridspec(3 if zoom else 2, 1, height_ratios=[1, 1, 1.1] if zoom else [1, 1])
    top = fig.add_subplot(grid[0])
    bottom = fig.add_subplot(grid[1], sharex=top)
    try:
        _goodput_panel(top, report)
        _paths_panel(bottom, report)
        bottom.set_xlabel("time since the write started (s)")
        if zoom:
            _zoom_panel(fig.add_subplot(grid[2]), report)
        fig.suptitle(_title(report), fontsize=11)
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=110)
    finally:
        plt.close(fig)
    return path


def _title(r: DemoReport) -> str:
    f = r.fault
    how = f.describe()
    verdict = "verified" if r.bytes.hash_match and r.bytes.verified == r.bytes.sent else "NOT verified"
    return (f"mrc demo ({r.target}, {r.endpoint_name} endpoint): {r.bytes.sent / 2**20:.0f} MiB RDMA write "
            f"{r.sender} -> {r.receiver}, "
            f"link {f.link} {how}; every byte {verdict}")


def _shade_fault(ax, report: DemoReport) -> None:
    f = report.failover
    ax.axvspan(f.t_fault_s, f.t_restore_s, color="red", alpha=0.07, lw=0)


def _goodput_panel(ax, report: DemoReport) -> None:
    s, f = report.series, report.failover
    mids, bps = rates(s.t_s, s.bytes_placed, BIN_S)
    ax.plot(mids, [v * 8 / 1e9 for v in bps], color="tab:blue", lw=1.6, label="goodput")
    _shade_fault(ax, report)
    lossy = report.fault.kind in ("loss", "flap")  # the path keeps working part-time: no single bypass
    for field, label, colour, style in _MARKS:
        t = getattr(f, field)
        if t is not None and not (lossy and field == "t_failover_s"):
            ax.axvline(t, color=colour, ls=style, lw=1.3, label=f"{label} ({t:.2f} s)")
    ymax = max(bps, default=0) * 8 / 1e9 or 1.0
    for times, marker, colour, label in ((s.failed_path_retired_t_s, "v", "red", "EV retired"),
                                         (s.failed_path_probed_back_t_s, "^", "green", "EV probed back")):
        if times:
            ax.plot(times, [ymax * 0.04] * len(times), marker, color=colour, ms=5, ls="none",
                    label=f"{label} on {path_name(report.fault.plane, report.fault.spine)} ({len(times)})")
    ax.set_ylim(bottom=0)
    ax.set_ylabel(f"goodput (Gb/s, {BIN_S * 1e3:.0f} ms bins)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7.5, loc="upper right", ncol=2, framealpha=0.85)


def _paths_panel(ax, report: DemoReport) -> None:
    s = report.series
    failed = path_name(report.fault.plane, report.fault.spine)
    for name, cumulative in sorted(s.path_packets.items()):
        mids, pps = rates(s.t_s, cumulative, BIN_S)
        dead = name == failed
        ax.plot(mids, pps, lw=2.2 if dead else 1.3, color="red" if dead else None,
                label=f"{name} (failed link {report.fault.link})" if dead else name, zorder=3 if dead else 2)
    _shade_fault(ax, report)
    ax.set_ylim(bottom=0)
    ax.set_ylabel("data packets/s per path\n(plane × spine, sender's EV counters)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="lower left", ncol=4, framealpha=0.85)


def zoom_window_us(marks: list[float], floor_us: float = 200.0) -> tuple[float, float]:
    """The zoom panel's x range (µs from the first drop): every mark with a 10 % margin, and at
    least ``floor_us`` either side of 0."""
    lo, hi = min([0.0, *marks]), max([0.0, *marks])
    span = max(hi - lo, 1.0)
    return min(lo - 0.1 * span, -floor_us), max(hi + 0.1 * span, floor_us)


def _zoom_panel(ax, report: DemoReport) -> None:
    f = report.failover
    marks = sorted(f.dead_ev_marks, key=lambda m: (m.out_us is None, m.out_us or 0.0, m.ev))
    # The window follows the retirements; a last send long before (the EV table is read every
    # 50 ms, slower when the agent is busy) would squash them, so those are counted, not drawn.
    lo, hi = zoom_window_us([m.out_us for m in marks if m.out_us is not None])
    scale, unit = (1e3, "ms") if hi - lo > 10e3 else (1.0, "µs")
    rows = range(len(marks))
    tx = [(i, m.last_tx_us) for i, m in zip(rows, marks) if m.last_tx_us is not None]
    shown = [(i, t) for i, t in tx if lo <= t <= hi]
    earlier = sum(1 for _, t in tx if t < lo)
    ax.plot([t / scale for _, t in shown], [i for i, _ in shown], "o", ms=3.5, color="tab:blue",
            label="last data packet on the EV (dataplane last_tx_ns, last EV-table read before the restore)"
                  + (f"; {earlier} earlier, off the left edge" if earlier else ""))
    for how, colour, label in (("ASSUMED_BAD", "red", "EV retired (ASSUMED_BAD, bad_ns)"),
                               ("DENIED", "saddlebrown", "EV denied (controller)")):
        pts = [(i, m.out_us) for i, m in zip(rows, marks) if m.how == how and m.out_us is not None]
        if pts:
            ax.plot([t / scale for _, t in pts], [i for i, _ in pts], "v", ms=5, color=colour, ls="none",
                    label=f"{label} ({len(pts)})")
    first = "first drop (fault program)" if f.fault_time_source == "fault program" else "fault applied (demo clock)"
    ax.axvline(0, color="red", ls="--", lw=1.3, label=first)
    if f.t_fault_injected_s is not None and f.fault_time_source == "fault program":
        t = (f.t_fault_injected_s - f.t_fault_s) * 1e6
        ax.axvline(max(t, lo) / scale, color="grey", ls=":", lw=1.2,
                   label=f"demo began applying the fault ({t / scale:+.1f} {unit}"
                         + (", off the left edge)" if t < lo else ")"))
    if f.dataplane_failover_us is not None:
        ax.axvline(f.dataplane_failover_us / scale, color="purple", ls="-.", lw=1.3,
                   label=f"last dead EV retired: failover {f.dataplane_failover_us / scale:.1f} {unit}")
    ax.set_xlim(lo / scale, hi / scale)
    ax.set_ylim(-1, len(marks))
    ax.set_ylabel(f"dead EVs ({len(marks)}),\nby retirement time")
    ax.set_xlabel(f"{unit} since the first drop (the dataplane's clock, bpf_ktime_get_ns)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7.5, loc="best", framealpha=0.85)


_MODE_STYLE = {"srv6": ("tab:blue", "srv6 (hosts source-route)"), "ecmp": ("tab:red", "ecmp (switches hash the EV)")}


def plot_comparison(c, path: str | Path) -> Path:
    """``mrc demo --mode ecmp``'s plot (``c``: a ``mrckit.apps.demo.compare.ComparisonReport``),
    one PNG, two panels over the time since the fault: each mode's goodput, and each mode's
    cumulative packets lost (``LossStats.lost``), with its restore and last loss marked.

    Raises:
        ValueError: a run has fewer than two samples.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (top, bottom) = plt.subplots(2, 1, figsize=(11, 7.5), sharex=True, constrained_layout=True)
    try:
        for mode in ("srv6", "ecmp"):
            _comparison_mode(top, bottom, c.runs[mode], *_MODE_STYLE[mode])
        for ax, where in ((top, "upper right"), (bottom, "lower right")):  # the loss curves rise on the left
            ax.axvline(0, color="black", ls="--", lw=1.2)
            ax.set_ylim(bottom=0)
            ax.grid(alpha=0.3)
            ax.legend(fontsize=8, loc=where, framealpha=0.85)
        top.set_ylabel(f"goodput (Gb/s, {BIN_S * 1e3:.0f} ms bins)")
        bottom.set_ylabel("packets lost since the start\n(requestor sent, responder never got)")
        bottom.set_xlabel(f"time since the fault (s): {c.fault.describe()} on {c.fault.link}")
        d = c.difference
        fig.suptitle(f"mrc demo --mode ecmp ({c.target}): {c.size / 2**20:.0f} MiB written in each mode; "
                     f"packets lost to the fault ecmp - srv6 = {d.packets_lost_to_fault:+d}, "
                     f"EV retirements {d.evs_retired:+d}",
                     fontsize=11)
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=110)
    finally:
        plt.close(fig)
    return path


def _comparison_mode(top, bottom, r: DemoReport, colour: str, label: str) -> None:
    s, f, loss = r.series, r.failover, r.loss
    if len(s.t_s) < 2:
        raise ValueError(f"the {r.mode} run has fewer than two samples: nothing to plot")
    mids, bps = rates([t - f.t_fault_s for t in s.t_s], s.bytes_placed, BIN_S)
    top.plot(mids, [v * 8 / 1e9 for v in bps], color=colour, lw=1.5, label=label)
    restore = f.t_restore_s - f.t_fault_s
    for ax in (top, bottom):
        ax.axvline(restore, color=colour, ls=":", lw=1.2)
    bottom.plot(loss.t_s, loss.lost, color=colour, lw=1.8,
                label=f"{label}: {loss.packets_lost_to_fault} lost to the fault, {loss.evs_retired} EV retirements; "
                      f"restored at {restore:.2f} s (dotted)")
    if (t_last := loss.t_last_loss_s) is not None:
        at = min(range(len(loss.t_s)), key=lambda i: abs(loss.t_s[i] - t_last))
        bottom.plot([loss.t_last_loss_s], [loss.lost[at]], "o", color=colour, ms=6,
                    label=f"{r.mode}: last loss {loss.t_last_loss_s:.3f} s after the fault")
