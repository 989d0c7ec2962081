"""A two-tier, multi-plane Clos of eBPF switches in namespaces, with host agents on the hosts.

Built from ``mrckit.topology`` (generate_clos + compile_fabric): one namespace per switch and
per host, one veth per link, the eBPF switch (``mrckit.switch.ebpf_target``) on every switch
with the compiled table entries, and on every host the NIC device and a ``HostAgent``.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field

from mrckit import netns
from mrckit.host.agent import HostAgent
from mrckit.host.config import Settings, from_topology, mac_text
from mrckit.host.nicdev import create_nic_device, nic_mtu
from mrckit.switch.ebpf_target import EbpfSwitch
from mrckit.topology import compile_fabric, generate_clos


@dataclass
class Fabric:
    compiled: object
    ns: dict[str, str] = field(default_factory=dict)        # node name -> namespace
    switches: dict[str, EbpfSwitch] = field(default_factory=dict)
    agents: dict[str, HostAgent] = field(default_factory=dict)
    configs: dict[str, object] = field(default_factory=dict)

    def nic(self, host: str) -> str:
        return str(self.configs[host].nic_address)

    def port_packets(self, switch: str, counter: str = "tx_port") -> dict[int, int]:
        tables = self.switches[switch].tables
        return {p.number: tables.counters.read(counter, p.number)[0]
                for p in self.compiled.switch(switch).ports}

    def set_link(self, node: str, ifname: str, up: bool) -> None:
        netns.run(["ip", "link", "set", ifname, "up" if up else "down"], ns=self.ns[node])


def _links(compiled):
    seen = set()
    for sw in compiled.switches():
        for p in sw.ports:
            key = tuple(sorted([(sw.name, p.ifname), (p.peer, p.peer_ifname)]))
            if key not in seen:
                seen.add(key)
                yield sw.name, p.ifname, p.mac, p.peer, p.peer_ifname, p.peer_mac


def _program(tables, sw) -> None:
    """Write a compiled switch's table entries; in EV-hash mode also its ecmp_selector members
    (ascending id, ECMP contract section 6), groups and ipv6_fib routes."""
    tables.direct.apply(sw.entries)
    for m in sw.members:
        tables.ecmp.write_member(m)
    for g in sw.groups:
        tables.ecmp.write_group(g)
    for r in sw.routes:
        tables.ecmp.write_route(r)


@contextlib.contextmanager
def clos(make_netns, settings: Settings, *, planes=2, spines=2, leaves=2, hosts_per_leaf=1,
         mode: str = "srv6"):
    """The Clos, compiled and run in forwarding ``mode`` (srv6, or ecmp: EV-hash mode)."""
    compiled = compile_fabric(generate_clos(planes=planes, spines=spines, leaves=leaves,
                                            hosts_per_leaf=hosts_per_leaf), "ebpf", mode=mode)
    fab = Fabric(compiled)
    hosts = list(compiled.hosts())
    try:
        for node in [s.name for s in compiled.switches()] + [h.name for h in hosts]:
            fab.ns[node] = make_netns()
        mtu = hosts[0].mtu
        for a, if_a, mac_a, b, if_b, mac_b in _links(compiled):
            netns.veth(fab.ns[a], if_a, fab.ns[b], if_b, mtu=mtu)
            netns.run(["ip", "link", "set", if_a, "address", mac_text(mac_a)], ns=fab.ns[a])
            netns.run(["ip", "link", "set", if_b, "address", mac_text(mac_b)], ns=fab.ns[b])
        for sw in compiled.switches():
            ebpf = EbpfSwitch(fab.ns[sw.name], fab.ns[sw.name], sw.port_map()).setup()
            fab.switches[sw.name] = ebpf
            _program(ebpf.tables, sw)
        for h in hosts:
            create_nic_device("nic0", h.nic_address, nic_mtu({'plane0': h.mtu}), ns=fab.ns[h.name])
            cfg = fab.configs[h.name] = from_topology(h, "nic0", settings)
            agent = fab.agents[h.name] = HostAgent()
            with netns.enter(fab.ns[h.name]):
                agent.configure(cfg)
        yield fab
    finally:
        for name, agent in fab.agents.items():
            with netns.enter(fab.ns[name]):
                agent.close()
        for sw in fab.switches.values():
            sw.teardown()
