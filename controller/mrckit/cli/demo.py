"""``mrc demo``: an MRC write that survives a link failure mid-flight (docs/demo.md)."""

from __future__ import annotations

import sys

import click

DEFAULT_JSON, DEFAULT_PLOT = "mrc-demo.json", "mrc-demo.png"


@click.command("demo")
@click.option("--target", type=click.Choice(["ebpf", "bmv2"]), default="ebpf", show_default=True,
              help="Switch target of the emulated fabric.")
@click.option("--mode", type=click.Choice(["srv6", "ecmp"]), default="srv6", show_default=True,
              help="srv6: the demo on an SRv6 fabric. ecmp: the same write and fault on an EV-hash "
              "(ECMP) fabric and then on an SRv6 fabric, compared (the cost of opaque paths).")
@click.option("--endpoint", type=click.Choice(["native", "python"]), default="native", show_default=True,
              help="The MRC endpoint at both ends: the C one, or the Python reference.")
@click.option("--timeout-exp", type=int, default=None,
              help="The writer's RTO, 1.024 us x 2^N (default: the endpoint's own, native 8 = 262 us, "
              "python 16 = 67 ms).")
@click.option("--max-cwnd", type=int, default=None,
              help="Cap of the writer's window in packets, 0 for none (default: native 32 on the eBPF "
              "target, 16 on bmv2, none for python).")
@click.option("--duration", type=float, default=8.0, show_default=True,
              help="Seconds the write should last; a short warm-up write measures the rate that sizes it.")
@click.option("--size", default=None, help="Bytes to write, e.g. 16M, 64MiB, 1G (overrides --duration; no warm-up write).")
@click.option("--fail", "fail", type=click.Choice(["down", "flap", "loss", "blackhole"]), default="down",
              show_default=True, help="How the link p0/t0-1/t1-1 fails at a third of the transfer.")
@click.option("--loss-percent", type=float, default=10.0, show_default=True, help="--fail loss: drop rate.")
@click.option("--flap-hz", type=float, default=2.0, show_default=True, help="--fail flap: down/up cycles per second.")
@click.option("--json", "json_path", default=DEFAULT_JSON, show_default=True, help="Where to write the JSON report.")
@click.option("--plot", "plot_path", default=DEFAULT_PLOT, show_default=True, help="Where to write the PNG plot.")
@click.option("--name", default="", help="Fabric name (default demo<pid>).")
@click.option("--logs", default="", help="Copy every fabric process's log into this folder before teardown.")
def demo(target, mode, endpoint, timeout_exp, max_cwnd, duration, size, fail, loss_percent, flap_hz, json_path, plot_path, name, logs):
    """Bring up the default fabric, run one RDMA write across it, fail a spine link at a third
    of the bytes and restore it at two thirds, verify every byte, tear down, and print the
    report. With --mode ecmp, do it in EV-hash mode and then in SRv6 mode, and compare the
    packets each lost. Exits 0 when every check of the report holds, 1 when one does not."""
    from rich.console import Console

    from ..apps.demo.run import DemoOptions, run_demo
    from ..apps.demo.plots import plot_report
    from ..apps.demo.render import render
    from .endpoint import parse_size

    opts = DemoOptions(target=target, mode=mode, endpoint=endpoint, timeout_exp=timeout_exp, max_cwnd=max_cwnd, duration_s=duration,
                       size=parse_size(size) if size is not None else None, fail=fail, loss_percent=loss_percent,
                       flap_hz=flap_hz, name=name, logs=logs)
    opts.check()
    console = Console()
    if mode == "ecmp":
        _compare(console, opts, json_path, plot_path)
        return
    with _RichObserver(console) as observer:
        report = run_demo(opts, observer)
    console.print(render(report))
    report.write_json(json_path)
    plot_report(report, plot_path)
    console.print(f"report: {json_path}   plot: {plot_path}")
    if report.passed:
        console.print("[bold green]demo passed:[/] every byte verified, the failed path bypassed and restored")
    else:
        _failed(console, report.checks)
    sys.exit(0 if report.passed else 1)


def _compare(console, opts, json_path: str, plot_path: str) -> None:
    """``--mode ecmp``: both runs, the comparison printed, its JSON and plot written."""
    from ..apps.demo.compare import run_comparison
    from ..apps.demo.plots import plot_comparison
    from ..apps.demo.render import render_comparison

    with _RichObserver(console) as observer:
        report = run_comparison(opts, observer)
    console.print(render_comparison(report))
    report.write_json(json_path)
    plot_comparison(report, plot_path)
    console.print(f"report: {json_path}   plot: {plot_path}")
    d, e, s = report.difference, report.modes["ecmp"], report.modes["srv6"]
    if report.passed:
        console.print(f"[bold green]demo passed:[/] every byte verified in both modes; ecmp - srv6: "
                      f"{d.dead_link_packets_lost:+d} packets lost on the EVs via the dead link "
                      f"({e.dead_link_evs} EVs vs {s.dead_link_evs}), {d.packets_lost_to_fault:+d} lost "
                      f"from fault to restore (fault lasted {e.fault_duration_s or 0:.2f} s vs "
                      f"{s.fault_duration_s or 0:.2f} s)")
    else:
        _failed(console, report.checks)
    sys.exit(0 if report.passed else 1)


def _failed(console, checks) -> None:
    console.print("[bold red]demo FAILED:[/] " + "; ".join(f"{c.name}: {c.detail}" for c in checks if not c.ok))


class _RichObserver:
    """A progress bar for the bytes placed, and one line per phase above it."""

    def __init__(self, console):
        from rich.progress import (
            BarColumn, DownloadColumn, Progress, TextColumn, TimeElapsedColumn, TransferSpeedColumn,
        )

        self.console = console
        self.bar = Progress(TextColumn("{task.description}"), BarColumn(), DownloadColumn(binary_units=True),
                            TransferSpeedColumn(), TimeElapsedColumn(), console=console, transient=True)
        self.task = None

    def __enter__(self):
        self.bar.start()
        return self

    def __exit__(self, *exc):
        self.bar.stop()

    def phase(self, text: str) -> None:
        self.bar.console.print(f"[bold cyan]==>[/] {text}")

    def progress(self, placed: int, total: int) -> None:
        if self.task is None:
            self.task = self.bar.add_task("RDMA write", total=total)
        self.bar.update(self.task, completed=placed)


def register(main: click.Group) -> None:
    main.add_command(demo)
