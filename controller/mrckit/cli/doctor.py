"""``mrc doctor``: check this machine's prerequisites and say how to fix what is missing."""

from __future__ import annotations

import json
import sys

import click


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print the results as JSON.")
def doctor(as_json: bool) -> None:
    """Check every prerequisite for real (loading mrc_host, mrc_switch and mrc_fault, BPF
    test-run, live frames and attach, kernel >= 5.18, clang, libbpf, bpftool, seg6local
    next-csid, p4c/bmv2 and its --priority-queues, p4runtime-shell, Python packages, the shipped
    P4 program and native endpoint library). Exits 1
    if the default eBPF demo cannot run; p4c/bmv2, p4runtime-shell and other optional tools
    only warn."""
    from .doctor_checks import demo_ready, run_checks
    from rich.console import Console

    if as_json:
        checks = run_checks()
        ready = demo_ready(checks)
        click.echo(json.dumps({"demo_ready": ready, "checks": [c.as_dict() for c in checks]}, indent=2))
    else:
        console = Console()
        with console.status("checking...") as status:
            checks = run_checks(progress=lambda name: status.update(f"checked {name}"))
        ready = demo_ready(checks)
        console.print(_table(checks))
        if ready:
            console.print("[green]ready:[/] everything the default (eBPF) demo needs is here"
                          + (" (warnings are for optional targets and tools)" if not all(c.ok for c in checks) else ""))
        else:
            console.print("[red]not ready:[/] fix the [red]missing[/] rows above, then run mrc doctor again")
    sys.exit(0 if ready else 1)


def _table(checks):
    from rich.table import Table

    colours = {"ok": "green", "warn": "yellow", "missing": "red"}
    table = Table(title="mrc doctor", show_lines=False)
    for column in ("check", "status", "detail", "fix"):
        table.add_column(column, overflow="fold")
    for c in checks:
        table.add_row(c.name, f"[{colours[c.status]}]{c.status}[/]", c.detail, c.fix)
    return table


def register(main: click.Group) -> None:
    main.add_command(doctor)
