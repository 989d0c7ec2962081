"""The plot of ``mrc experiment incast``: the victim's write completion times in each run (a
CDF), and each switch's trims and congestion drops with trimming on, and its congestion drops
with trimming off (where it cannot trim)."""

from __future__ import annotations

from pathlib import Path

import numpy as np


def plot_incast(record, results: dict, path: str) -> None:
    """Write the PNG to ``path`` and name it in ``record.plot``; ``results`` maps each run's
    label to its traffic report and switch counts (``incast._one_run``)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from .incast import victim_figures

    vid = record.setting["senders"]
    fig, (cdf, bars) = plt.subplots(1, 2, figsize=(12, 4.5))
    for label, r in results.items():
        victim = next(f for f in r["report"].flows if f.id == vid)
        n = victim_figures(r["report"], vid)["writes"]
        fct = np.sort([(e - s) / 1e6 for s, e in victim.writes_ns[:n]])
        if len(fct):
            cdf.step(fct, np.arange(1, len(fct) + 1) / len(fct), where="post", label=f"{label} ({n} writes)")
    cdf.set(xscale="log", xlabel="victim write completion time (ms)", ylabel="fraction of writes",
            title=f"victim: {record.setting['victim_write_bytes']} B writes, one after another")
    cdf.grid(alpha=0.3)
    cdf.legend(fontsize=8)
    switches = sorted({s for r in results.values() for s in r["counts"]})
    x = np.arange(len(switches))
    shown = [("trimming on", "trimmed"), ("trimming on", "congestion_drops"), ("trimming off", "congestion_drops")]
    width = 0.8 / len(shown)
    for i, (label, key) in enumerate(shown):
        counts = results[label]["counts"]
        bars.bar(x + i * width, [counts.get(s, {}).get(key, 0) for s in switches], width,
                 label=f"{key.replace('_', ' ')}, {label}")
    bars.set_xticks(x + 0.4 - width / 2, switches, rotation=45, ha="right", fontsize=8)
    bars.set(ylabel="packets", title="per switch, during the incast")
    bars.grid(alpha=0.3, axis="y")
    bars.legend(fontsize=8)
    fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    record.plot = Path(path).name
