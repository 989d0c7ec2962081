"""Helpers shared by the fabric e2e tests: the run's namespace prefix, fabric names, the CLI."""

import os
import subprocess
import sys
from pathlib import Path

RUN_PREFIX = f"mrct{os.getpid() % 100000}"
"""The namespace prefix of this test run (as tests/conftest.py, whose session cleanup removes it)."""


def controller_args() -> tuple[str, ...]:
    """Extra ``mrc controller run`` options: none, its defaults are p4c's committed outputs."""
    return ()


def fabric_name(module: str) -> str:
    """A fabric name unique to this test run and module (a-z0-9_, at most 16)."""
    tag = "".join(c for c in module.rsplit(".", 1)[-1].removeprefix("test_fabric_") if c.isalnum())[:6]
    return f"t{os.getpid() % 100000}{tag}"


def mrc(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """Run the ``mrc`` CLI of this Python; text output."""
    return subprocess.run([sys.executable, "-c", "import sys; from mrckit.cli import main; sys.exit(main())",
                           *args], capture_output=True, text=True, timeout=timeout)


def leftovers(prefix: str, name: str) -> dict[str, list[str]]:
    """Everything of ours still present: namespaces, root-namespace links, XDP/tc attachments
    in the root namespace, switch and fault pins, state folder and controller status file,
    processes."""
    from mrckit import netns
    from mrckit.fabric.faults import list_faults
    from mrckit.switch.ebpf_target import pinned_switches

    out = {
        "netns": netns.list_prefix(prefix),
        "links": [ln for ln in subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout.splitlines()
                  if prefix in ln or "mrcv" in ln],
        "bpftool": [ln for ln in subprocess.run(["bpftool", "net"], capture_output=True, text=True).stdout.splitlines()
                    if "mrc_" in ln],
        "pins": [p for p in pinned_switches() if p.startswith(prefix)],
        "faults": [f"{ns}/{i}" for ns, i, _ in list_faults() if ns.startswith(prefix)],
        "state": [str(p) for p in [Path("/run/mrckit") / name, Path(f"/run/mrckit/controller/{name}.state.json"),
                                   Path(f"/run/mrckit/controller/{name}.sock")] if p.exists()],
        "processes": _processes(prefix, name),
    }
    return {k: v for k, v in out.items() if v}


def _processes(prefix: str, name: str) -> list[str]:
    found = []
    for pid_dir in Path("/proc").iterdir():
        if not pid_dir.name.isdigit():
            continue
        try:
            cmd = (pid_dir / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if prefix in cmd or f"/run/mrckit/{name}/" in cmd:
            found.append(f"{pid_dir.name}: {cmd[:120]}")
    return found
