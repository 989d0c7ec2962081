"""Fixtures for the controller's end-to-end tests: real eBPF switches, each with its real
P4Runtime server process (``python -m mrckit.switch.p4runtime``) in its own namespace, reached
through a unix socket, exactly as the fabric emulator runs them."""

import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from mrckit.control import SwitchTarget, load_pipeline
from mrckit.switch.ebpf_target import EbpfSwitch, switch_pin_dir
from mrckit.switch.p4runtime import process

from support.paths import DEVICE_CONFIG, P4INFO


@dataclass
class RunningSwitch:
    """One eBPF switch and its P4Runtime server process."""

    name: str          # the topology's switch name
    ns: str            # its namespace (also the eBPF switch's pin name)
    address: str
    state_dir: Path
    ebpf: EbpfSwitch
    proc: object = None
    spawn_kwargs: dict = None

    def target(self, **kw) -> SwitchTarget:
        return SwitchTarget(self.name, self.address, **kw)

    def start(self) -> None:
        self.proc = process.spawn(self.ns, self.address, netns=self.ns, state_dir=self.state_dir,
                                  **(self.spawn_kwargs or {}))

    def stop(self) -> None:
        if self.proc is not None:
            process.stop(self.proc)
            self.proc = None

    def entries(self) -> dict:
        """Every table entry, straight from the BPF maps (the switch's truth)."""
        return {t: sorted((e.key, e.action, tuple(sorted(e.params.items())))
                          for e in self.ebpf.tables.direct.read(t)) for t in ("my_usid", "usid_fib", "port_config")}


@pytest.fixture
def pipeline():
    return load_pipeline(P4INFO, DEVICE_CONFIG)


@pytest.fixture
def switches(make_netns, tmp_path):
    """Factory: ``switches(["p0-t0-0", ...], **spawn_kwargs)`` -> {name: RunningSwitch}, started."""
    made: list[RunningSwitch] = []

    def factory(names, **spawn_kwargs):
        out = {}
        for name in names:
            ns = make_netns()
            os.makedirs(os.path.dirname(switch_pin_dir(ns)), exist_ok=True)
            sw = RunningSwitch(name, ns, f"unix:{tmp_path}/{name}.sock", tmp_path / f"state-{name}",
                               EbpfSwitch(ns, ns, {}), spawn_kwargs=spawn_kwargs)
            made.append(sw)
            sw.ebpf.setup()
            out[name] = sw
        # Each server takes a second or so to start (a new Python): start them side by side.
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(RunningSwitch.start, out.values()))
        return out

    yield factory
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(RunningSwitch.stop, made))
    for sw in made:
        sw.ebpf.teardown()
