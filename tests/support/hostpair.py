"""Two emulated hosts wired port to port, one veth per plane, with agents (no switches).

Host A sits on leaf 0 and host B on leaf 1, so paths name a T1; with no switch in between,
every frame goes straight to the other host's plane port, whose XDP decapsulates it.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

from mrckit import netns
from mrckit.host.agent import HostAgent
from mrckit.host.config import AgentConfig, Port, Settings
from mrckit.host.nicdev import create_nic_device, nic_mtu
from mrckit.wire.addressing import nic_address, port_address

PORT_MTU = 3000


def mac(host: int, plane: int) -> str:
    return f"02:00:00:{host:02x}:{plane:02x}:01"


@dataclass
class Host:
    ns: str
    cfg: AgentConfig
    agent: HostAgent

    @property
    def nic(self) -> str:
        return str(self.cfg.nic_address)


def host_config(idx: int, leaf: int, planes: int, settings: Settings, neighbor,
                mode: str = "srv6") -> AgentConfig:
    ports = tuple(Port(p, f"plane{p}", port_address(p, leaf, 0), mac(idx, p), neighbor(p),
                       f"p{p}/t0-{leaf}/down-0") for p in range(planes))
    return AgentConfig(f"h{idx}", nic_address(leaf, 0), leaf, 0, "nic0", ports, (4,) * planes,
                       settings=settings, mode=mode)


@contextlib.contextmanager
def host_pair(make_netns, planes: int = 2, settings: Settings | None = None, mode: str = "srv6"):
    """Two hosts (leaf 0 and leaf 1) with agents in forwarding ``mode``, plane p of one wired
    to plane p of the other."""
    settings = settings or Settings(rto_ns=50_000_000, probe_interval_ns=5_000_000, seed=3)
    ns = [make_netns(), make_netns()]
    for p in range(planes):
        netns.veth(ns[0], f"plane{p}", ns[1], f"plane{p}", mtu=PORT_MTU)
        for i in range(2):
            netns.run(["ip", "link", "set", f"plane{p}", "address", mac(i, p)], ns=ns[i])
    hosts = []
    try:
        for i in range(2):
            cfg = host_config(i, i, planes, settings, lambda p, i=i: mac(1 - i, p), mode)
            create_nic_device("nic0", cfg.nic_address, nic_mtu({'plane0': PORT_MTU}), ns=ns[i])
            agent = HostAgent()
            with netns.enter(ns[i]):
                agent.configure(cfg)
            hosts.append(Host(ns[i], cfg, agent))
        yield hosts
    finally:
        for h in hosts:
            with netns.enter(h.ns):
                h.agent.close()
