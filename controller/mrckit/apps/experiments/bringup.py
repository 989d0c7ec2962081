"""The fabric an experiment builds for itself: a Clos of the experiment's size on the eBPF
target, programmed by the controller, every port at the experiment's link speed; torn down at
the end, on error and Ctrl-C too."""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Iterator

from ...host.config import Settings
from ...topology import Role, Topology
from ...topology.compile import Mode
from .linkspeed import set_link_speed, shape_nics


def transport_settings(settings: Settings, transport: str) -> Settings:
    """The host agents' ``settings`` for QPs of ``transport`` (``mrckit.endpoint.choices``):
    for ``rc`` the pinned-EV mode, one fixed EV per QP (docs/host.md "EV set policy")."""
    return dataclasses.replace(settings, pinned_ev=transport == "rc")


@contextlib.contextmanager
def experiment_fabric(topology: Topology, name: str, settings: Settings, link_speed_pps: int,
                      say: Callable[[str], None] = lambda _: None, *, mode: Mode = "srv6",
                      transport: str = "mrc", controller_args: tuple[str, ...] = ()) -> Iterator:
    """Bring up ``topology`` as fabric ``name`` (eBPF target, forwarding ``mode`` ``srv6`` or
    ``ecmp``, host agents with ``settings`` as :func:`transport_settings` makes them for
    ``transport``, the controller with the committed pipeline and ``controller_args``), set every switch port and every
    host NIC port to ``link_speed_pps`` (:func:`set_link_speed`, :func:`shape_nics`), yield the running
    :class:`mrckit.fabric.Fabric`, and tear it down on leaving.

    Raises:
        MrcError: the fabric did not come up (nothing is left behind), or a bad link speed.
    """
    from ...fabric.fabric import Fabric
    from ..demo.run import pipeline_files

    p4info, device_config = pipeline_files("ebpf")
    t1 = sum(1 for s in topology.switches if s.role == Role.T1)
    say(f"bringing up fabric {name}: {topology.planes} planes, {len(topology.switches)} switches "
        f"({t1} T1), {len(topology.hosts)} hosts, the controller; {mode} mode, host agents for {transport}")
    fab = Fabric.up(topology, name=name, settings=transport_settings(settings, transport), mode=mode,
                    controller_args=("--name", name, "--p4info", str(p4info), "--device-config", str(device_config),
                                     *controller_args))
    try:
        ports = set_link_speed(fab, link_speed_pps)
        nics = shape_nics(fab, link_speed_pps)
        say(f"link speed {link_speed_pps} pps on all {ports} switch ports and {nics} host NIC ports")
        yield fab
    finally:
        say(f"tearing fabric {name} down")
        fab.down()
