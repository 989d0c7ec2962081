"""Starting the switch targets and host agents of a fabric, and removing them again.

- eBPF target: this process loads and pins each switch's program and attaches it to the
  switch's ports (``EbpfSwitch.setup``, inside the switch's namespace, which also fills the
  DEVMAP there as design section 9 requires); the pins keep it alive after we exit. Then ONE
  P4Runtime server process serves every switch, in the root namespace, each switch
  on its own unix socket (or loopback TCP port when the user asks for ports) with its own
  device id and gRPC server. It reaches the switches only through their pins.
- bmv2 target: one ``simple_switch_grpc`` per switch (``mrckit.switch.bmv2``).
- hosts: one ``mrc host up`` process per host, inside the host's namespace, with a config
  file written from the compiled ``HostConfig``, after its NIC device is made (``nicdev``).
"""

from __future__ import annotations

import dataclasses
import shutil
import sys

from ..errors import MrcError
from ..host.config import Settings, from_topology
from ..host.nicdev import create_nic_device
from ..host.run import dumps_config
from ..switch import bmv2
from ..switch.ebpf_target import EbpfSwitch, remove_pins
from ..switch.p4runtime.process import SERVING_MARKER
from . import procs
from .parallel import Progress, each
from .state import STATE_LOCK, FabricState, ProcInfo, start_ticks

NIC_DEVICE = "nic0"
AGENT_READY = "serving on "


def switch_address(state: FabricState, node: str, port: int | None) -> str:
    """``unix:/run/mrckit/<fabric>/sw-<node>.sock``, or ``127.0.0.1:<port>``."""
    return f"127.0.0.1:{port}" if port is not None else f"unix:{state.dir}/sw-{node}.sock"


def agent_address(state: FabricState, node: str) -> str:
    """``unix:/run/mrckit/<fabric>/host-<node>.sock``."""
    return f"unix:{state.dir}/host-{node}.sock"


def start_ebpf_switches(state: FabricState, compiled, base_port: int | None,
                        progress: Progress | None = None) -> None:
    """Set up every eBPF switch (load, pin, attach; on several threads), then start ONE
    P4Runtime server process for all of them (``python -m mrckit.switch.p4runtime --switch
    NAME=ADDR@ID ...``, root namespace: it reaches each switch through its pins), each switch
    on its own socket with its own device id. Every switch's record in ``state`` names that
    process and its own address. Waits until it serves every switch.

    Raises:
        MrcError: a set-up step failed (naming the switch), or the server did not serve (with
            its log).
    """
    index = {sw.name: i for i, sw in enumerate(compiled.switches())}
    addresses = {sw.name: switch_address(state, sw.name, None if base_port is None else base_port + index[sw.name])
                 for sw in compiled.switches()}

    def one(sw) -> None:
        EbpfSwitch(state.pins[sw.name], state.nodes[sw.name], sw.port_map()).setup()

    each("switch setup", one, compiled.switches(), progress)
    argv = [sys.executable, "-m", "mrckit.switch.p4runtime", "--state-dir", str(state.dir / "p4rt")]
    for sw in compiled.switches():
        argv += ["--switch", f"{state.pins[sw.name]}={addresses[sw.name]}@{state.device_ids[sw.name]}"]
    proc, info = procs.start(argv, state.dir / "switches.log", ns=None, address="")
    with STATE_LOCK:
        for name, address in addresses.items():
            state.switches[name] = dataclasses.replace(info, address=address)
        state.save()
    if progress:
        progress("switches", 0, 1)
    procs.wait_ready({"P4Runtime server": (proc, info)}, SERVING_MARKER)
    if progress:
        progress("switches", 1, 1)


def _count(step: str, total: int, progress: Progress | None):
    """A ``progress(n)`` for readiness waits, forwarded as ``progress(step, n, total)``."""
    if progress is None:
        return None
    progress(step, 0, total)
    return lambda n: progress(step, n, total)


def start_bmv2_switches(state: FabricState, compiled) -> None:
    """Start ``simple_switch_grpc`` for every switch (without a program: the controller pushes
    the pipeline). Raises MrcError with bmv2's log when one does not come up."""
    for sw in compiled.switches():
        pin = state.pins[sw.name]
        switch = bmv2.Bmv2Switch(pin, state.nodes[sw.name], sw.port_map(), json_path=None,
                                 device_id=state.device_ids[sw.name])
        try:
            switch.start()
        finally:
            if switch.proc is not None:
                state.switches[sw.name] = ProcInfo(switch.proc.pid, start_ticks(switch.proc.pid) or 0,
                                                   switch.grpc_address, switch.command,
                                                   str(switch.run_dir / "stdout.log"))
                state.save()


def start_agents(state: FabricState, compiled, settings: Settings, progress: Progress | None = None) -> None:
    """Write each host's agent config, make its NIC device and start its agent, on several
    threads; wait until all serve (``progress("agents", serving, total)``).

    Raises:
        MrcError: an agent exited or did not serve in time (naming the host, with its log).
    """
    started = {}
    cfg_dir = state.dir / "hosts"
    cfg_dir.mkdir(exist_ok=True)

    def one(host) -> None:
        cfg = from_topology(host, NIC_DEVICE, settings)
        path = cfg_dir / f"{host.name}.yaml"
        path.write_text(dumps_config(cfg))
        address = agent_address(state, host.name)
        create_nic_device(NIC_DEVICE, host.nic_address, host.nic_mtu, ns=state.nodes[host.name])
        argv = procs.mrc_argv("host", "up", str(path), "--listen", address)
        proc, info = procs.start(argv, state.dir / f"host-{host.name}.log", ns=state.nodes[host.name],
                                 address=address)
        with STATE_LOCK:
            state.hosts[host.name] = info
            state.save()
            started[host.name] = (proc, info)

    each("host setup", one, compiled.hosts(), progress)
    procs.wait_ready(started, AGENT_READY, progress=_count("agents", len(started), progress))


def stop_all(state: FabricState) -> None:
    """Stop every process of the fabric (agents first: they detach their programs on the way
    out), then remove the switches' pins and bmv2 run folders. Idempotent."""
    procs.stop_many(list(state.flappers.values()))
    procs.stop_many(list(state.hosts.values()))
    if state.controller:
        procs.stop_many([ProcInfo(**state.controller)])
    procs.stop_many(list(state.switches.values()))
    for pin in state.pins.values():
        if state.target == "ebpf":
            remove_pins(pin)
        else:
            shutil.rmtree(bmv2.RUN_ROOT / pin, ignore_errors=True)


def check_target(target: str) -> None:
    """Raises MrcError for an unknown target, or bmv2 when ``simple_switch_grpc`` is absent."""
    if target not in ("ebpf", "bmv2"):
        raise MrcError(f"target {target!r}: use ebpf or bmv2")
    if target == "bmv2" and bmv2.find_tool("simple_switch_grpc") is None:
        raise MrcError(f"--target bmv2: simple_switch_grpc not found on PATH or in {bmv2.P4TOOLS_BIN} "
                       "(build bmv2 from p4lang source into /opt/p4tools, or use --target ebpf)")


MODES = ("srv6", "ecmp")
"""Forwarding modes of a fabric: uSID source routing (design 3-7) or EV-hash mode."""


def check_mode(mode: str) -> None:
    """Raises MrcError for a forwarding mode other than ``srv6`` or ``ecmp``."""
    if mode not in MODES:
        raise MrcError(f"mode {mode!r}: use srv6 (uSID source routing) or ecmp (EV-hash mode)")


def check_ports(base_port: int | None, count: int) -> None:
    """Raises MrcError when a loopback TCP port of ``base_port .. base_port+count-1`` is taken."""
    import socket

    if base_port is None:
        return
    if not 1 <= base_port <= 65535 - count + 1:
        raise MrcError(f"--p4runtime-port {base_port}: {count} ports from it must fit in 1..65535")
    for port in range(base_port, base_port + count):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError as exc:
                raise MrcError(f"P4Runtime port 127.0.0.1:{port} is already in use ({exc.strerror}); "
                               f"choose another --p4runtime-port (switch {port - base_port + 1} of {count} "
                               "would listen there)") from None

