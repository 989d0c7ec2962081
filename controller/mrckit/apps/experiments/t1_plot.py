"""The ``t1-failure`` plot: aggregate goodput over time with and without the dead T1."""

from __future__ import annotations

from pathlib import Path

from .linkspeed import line_rate_bps


def plot_goodput(record, switch: str, path: str) -> None:
    """Write a PNG to ``path``: the aggregate goodput (Mb/s, every receiver's placed bytes) of
    the run with T1 ``switch`` dead and of the baseline run over seconds since each run's start, the
    fault's window shaded; name it in ``record.plot``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    d = record.details
    fig, ax = plt.subplots(figsize=(9, 4))
    for key, label in (("series_baseline", "without the fault (baseline)"), ("series_fault", f"{switch} failed")):
        ax.plot(d[key]["t_s"], [g * 1e3 for g in d[key]["gbps"]], label=label, drawstyle="steps-mid")
    ax.axvspan(d["t_fault_s"], d["t_restore_s"], color="tab:red", alpha=0.15, label="T1 failed")
    st = record.setting
    hosts = st["leaves"] * st["hosts_per_leaf"]
    ax.axhline(hosts * line_rate_bps(record.link_speed_pps, st["planes"]) / 1e6, color="grey", linestyle="--",
               label=f"line rate of {hosts} hosts")
    ax.set(xlabel="seconds since the all-to-all started", ylabel="aggregate goodput (Mb/s)",
           title=f"t1-failure: {d['qps_affected']} of {d['qps_across_t1']} QPs across a T1 affected "
                 f"(formula {d['formula'] * 100:.0f} %)")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(loc="lower left", fontsize="small")
    fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    record.plot = Path(path).name
