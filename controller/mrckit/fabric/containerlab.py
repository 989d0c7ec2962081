"""Export a fabric as a containerlab topology, to run it beyond one machine (docs/fabric.md).

The emulator builds a fabric from namespaces on one machine. containerlab builds the same
fabric from containers, on one machine, on several (its VXLAN stitching) or on Kubernetes
(clabernetes). The export writes, into one folder:

- ``<lab>.clab.yml``: the containerlab topology.
  - One node per switch: kind ``linux``, the bmv2 image, running ``simple_switch_grpc`` with no
    program (the controller pushes it) and P4Runtime on ``0.0.0.0:9559``, device id 0. It waits
    for its data interfaces, which containerlab adds after the container starts.
  - One node per host: kind ``linux``, an image with mrckit installed, running
    ``mrc host up`` on its plane ports with the agent on ``0.0.0.0:50051``.
  - One ``controller`` node (the host image) running ``mrc controller run --target bmv2``
    against the nodes' management names.
  - One veth link per fabric link, with the interface names and MACs of the emulator's plans
    (``mrckit.topology.plan``) and the fabric MTU; each link carries its mrckit link name as
    the label ``mrckit.link``.
- ``controller.yaml``: the topology, with every switch's P4Runtime address and every host's
  agent address on the management network (``clab-<lab>-<node>``).
- ``hosts/<host>.yaml``: each host agent's config (``mrc host up`` reads it).

Everything on the management network is plaintext gRPC; containerlab's management network is
private to the lab.
"""

from __future__ import annotations

import dataclasses
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

import yaml

from ..errors import MrcError
from ..host.config import Settings, from_topology
from ..host.run import dumps_config
from ..switch.bmv2 import simple_switch_argv
from ..topology import GrpcEndpoint, Topology, compile_fabric, dumps_topology, mac_str
from ..topology.compile import Mode
from .nodes import NIC_DEVICE

SWITCH_IMAGE = "p4lang/behavioral-model:latest"
"""p4lang's bmv2 image, which has ``simple_switch_grpc``."""
HOST_IMAGE = "mrckit-host:latest"
"""The image that ``docker/mrckit-host.Dockerfile`` builds: Debian 12 with mrckit installed."""
P4RUNTIME_PORT = 9559
"""The IANA P4Runtime port."""
AGENT_PORT = 50051
BMV2_DEVICE_ID = 0
CONTROLLER_NODE = "controller"
CONFIG_DIR = "/etc/mrckit"
LINK_LABEL = "mrckit.link"
_LAB_NAME = re.compile(r"^[a-zA-Z0-9][a-zA-Z0-9-._]*$")
"""containerlab's rule for a lab name (its topology schema's ``name``)."""


@dataclass(frozen=True)
class ContainerlabExport:
    """What :func:`export_containerlab` wrote: the topology file and the other files, paths."""

    topology: Path
    controller: Path
    hosts: tuple[Path, ...]


def mgmt_name(lab: str, node: str) -> str:
    """The name containerlab gives the container of ``node`` in lab ``lab``, which resolves on
    the lab's management network (the default lab prefix ``clab``)."""
    return f"clab-{lab}-{node}"


def _wait_for(ifnames) -> str:
    """Shell that waits until every interface in ``ifnames`` exists: containerlab adds the
    data interfaces after the container's command has started."""
    names = " ".join(shlex.quote(i) for i in ifnames)
    return f"for i in {names}; do while [ ! -e /sys/class/net/$i ]; do sleep 0.2; done; done"


def _switch_node(sw, image: str) -> dict:
    ports = {p.number: p.ifname for p in sw.ports}
    argv = simple_switch_argv("simple_switch_grpc", ports, BMV2_DEVICE_ID, f"0.0.0.0:{P4RUNTIME_PORT}")
    script = f"{_wait_for(ports.values())}; exec {shlex.join(argv)}"
    return {"kind": "linux", "image": image, "group": f"plane-{sw.plane}",
            "labels": {"mrckit.role": sw.role, "mrckit.plane": sw.plane},
            "cmd": shlex.join(["sh", "-c", script])}


def _host_node(host, image: str) -> dict:
    ifnames = [p.ifname for p in host.ports]
    # XDP forwards what it receives as is, so checksums must be final before it (design 9).
    offload = "; ".join(f"ethtool -K {shlex.quote(i)} tx off" for i in ifnames)
    up = ["mrc", "host", "up", f"{CONFIG_DIR}/host.yaml", "--create-nic", "--listen", f"0.0.0.0:{AGENT_PORT}"]
    script = (f"{_wait_for(ifnames)}; {offload}; mountpoint -q /sys/fs/bpf || mount -t bpf bpf /sys/fs/bpf; "
              f"exec {shlex.join(up)}")
    return {"kind": "linux", "image": image, "group": "hosts", "privileged": True,
            "binds": [f"hosts/{host.name}.yaml:{CONFIG_DIR}/host.yaml:ro"],
            "cmd": shlex.join(["bash", "-c", script])}


def _controller_node(image: str, mode: str) -> dict:
    run = ["mrc", "controller", "run", f"{CONFIG_DIR}/controller.yaml", "--target", "bmv2", "--mode", mode,
           "--device-id", str(BMV2_DEVICE_ID)]
    # The switches and agents come up in any order; the controller retries until they serve.
    script = f"until {shlex.join(run)}; do sleep 2; done"
    return {"kind": "linux", "image": image, "group": "control",
            "binds": [f"controller.yaml:{CONFIG_DIR}/controller.yaml:ro"],
            "cmd": shlex.join(["bash", "-c", script])}


def _links(compiled, mtu: int) -> list[dict]:
    """One veth link per fabric link, taken from each T0's ports (every link has a T0 end)."""
    links = []
    for sw in compiled.switches():
        if sw.role != "t0":
            continue
        for p in sw.ports:
            links.append({"type": "veth", "mtu": mtu, "labels": {LINK_LABEL: p.link},
                          "endpoints": [{"node": sw.name, "interface": p.ifname, "mac": mac_str(p.mac)},
                                        {"node": p.peer, "interface": p.peer_ifname,
                                         "mac": mac_str(p.peer_mac)}]})
    return links


def _addressed(topo: Topology, lab: str) -> Topology:
    """``topo`` with each switch's P4Runtime address and each host's agent address set to its
    container on the management network."""
    switches = [dataclasses.replace(s, p4runtime=GrpcEndpoint(f"{mgmt_name(lab, s.name)}:{P4RUNTIME_PORT}",
                                                              device_id=BMV2_DEVICE_ID))
                for s in topo.switches]
    hosts = [dataclasses.replace(h, agent=GrpcEndpoint(f"{mgmt_name(lab, h.name)}:{AGENT_PORT}"))
             for h in topo.hosts]
    return dataclasses.replace(topo, switches=tuple(switches), hosts=tuple(hosts))


def containerlab_topology(topo: Topology, lab: str, *, switch_image: str = SWITCH_IMAGE,
                          host_image: str = HOST_IMAGE, mode: Mode = "srv6", compiled=None) -> dict:
    """The containerlab topology of ``topo`` as a mapping (see the module docstring);
    ``compiled``: ``compile_fabric(topo, "bmv2", mode)`` when the caller has it already.

    Raises:
        MrcError: ``lab`` is not a containerlab lab name, or an image name is empty.
    """
    if not _LAB_NAME.match(lab or ""):
        raise MrcError(f"lab name {lab!r}: use letters, digits, '-', '.' and '_', starting with a letter or digit")
    for what, image in (("switch image", switch_image), ("host image", host_image)):
        if not image or not image.strip():
            raise MrcError(f"{what}: empty")
    compiled = compiled or compile_fabric(topo, "bmv2", mode)
    nodes = {sw.name: _switch_node(sw, switch_image) for sw in compiled.switches()}
    nodes.update({h.name: _host_node(h, host_image) for h in compiled.hosts()})
    nodes[CONTROLLER_NODE] = _controller_node(host_image, mode)
    return {"name": lab, "topology": {"nodes": nodes, "links": _links(compiled, topo.mtu)}}


def export_containerlab(topo: Topology, out_dir: str | Path, lab: str, *, switch_image: str = SWITCH_IMAGE,
                        host_image: str = HOST_IMAGE, mode: Mode = "srv6",
                        settings: Settings | None = None) -> ContainerlabExport:
    """Write the containerlab topology of ``topo`` and its config files into ``out_dir``
    (created if missing). ``settings`` are the host agents' settings (default: the agent's).

    Raises:
        MrcError: a bad lab or image name (nothing is written), a topology node named
            ``controller``, or ``out_dir`` cannot be written.
    """
    if any(n.name == CONTROLLER_NODE for n in topo.switches) or any(h.name == CONTROLLER_NODE for h in topo.hosts):
        raise MrcError(f"a node is named {CONTROLLER_NODE!r}, the name the export gives the controller node")
    compiled = compile_fabric(topo, "bmv2", mode)
    doc = containerlab_topology(topo, lab, switch_image=switch_image, host_image=host_image, mode=mode,
                                compiled=compiled)
    out = Path(out_dir)
    try:
        (out / "hosts").mkdir(parents=True, exist_ok=True)
        hosts = []
        for host in compiled.hosts():
            path = out / "hosts" / f"{host.name}.yaml"
            path.write_text(dumps_config(from_topology(host, NIC_DEVICE, settings)))
            hosts.append(path)
        controller = out / "controller.yaml"
        controller.write_text(dumps_topology(_addressed(topo, lab)))
        topology = out / f"{lab}.clab.yml"
        topology.write_text(f"# containerlab topology written by `mrc topo export` (docs/fabric.md): "
                            f"{topo.summary()}\n" + yaml.safe_dump(doc, sort_keys=False, width=1000))
    except OSError as exc:
        raise MrcError(f"{out}: cannot write the export: {exc.strerror}") from None
    return ContainerlabExport(topology, controller, tuple(hosts))
