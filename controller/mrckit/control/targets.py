"""Where the controller finds each switch's P4Runtime server and each host's agent.

A topology may name them (``p4runtime:`` per switch, ``agent:`` per host, see
``docs/topology.md`` and ``docs/controller.md``); the fabric emulator, which starts the
servers itself, passes them explicitly instead. Either way the controller only ever sees a
:class:`SwitchTarget` or :class:`HostTarget`: it cannot tell bmv2 from the eBPF target
(design section 4) nor an emulated node from a real one.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import grpc

from ..errors import MrcError
from ..topology import GrpcTls, Topology

DEFAULT_DEVICE_ID = 1
"""P4Runtime device id when none is given: finsy's default. Our eBPF P4Runtime server also
defaults to 1; bmv2 defaults to 0, so a bmv2 switch is started with ``--device-id 1`` or its
topology entry says ``device_id: 0`` (design section 9)."""


@dataclass(frozen=True)
class SwitchTarget:
    """One switch to program.

    Attributes:
        name: the switch's name in the topology.
        address: its P4Runtime server, ``unix:/path`` or ``host:port``.
        device_id: P4Runtime device id (0..2**64-1).
        tls: TLS for the channel, or None for plaintext.
    """

    name: str
    address: str
    device_id: int = DEFAULT_DEVICE_ID
    tls: GrpcTls | None = None


@dataclass(frozen=True)
class HostTarget:
    """One host agent to configure and watch.

    Attributes:
        name: the host's name in the topology.
        address: its agent's gRPC server, ``unix:/path`` or ``host:port``.
        nic_device: the host's virtual NIC device (``HostConfig.nic_device`` of the agent API).
        settings: ``AgentSettings`` fields of host_agent.proto (e.g. ``{"rto_ns": 2_000_000}``);
            empty = the agent's defaults.
        tls: TLS for the channel, or None for plaintext.
    """

    name: str
    address: str
    nic_device: str = "nic0"
    settings: dict = field(default_factory=dict)
    tls: GrpcTls | None = None


def targets_from_topology(topo: Topology, switch_addresses: dict[str, tuple[str, int | None]] | None = None,
                          host_addresses: dict[str, str] | None = None, *, device_id: int = DEFAULT_DEVICE_ID,
                          nic_device: str = "nic0") -> tuple[list[SwitchTarget], list[HostTarget]]:
    """The switch and host targets of a topology: its ``p4runtime:`` and ``agent:`` fields,
    overridden by ``switch_addresses`` (name -> (address, device id or None)) and
    ``host_addresses`` (name -> address). A switch with no device id gets ``device_id``.
    Every switch must have an address; hosts without one are not managed.

    Raises:
        MrcError: an override naming no node, or switches without an address (named).
    """
    switch_addresses, host_addresses = switch_addresses or {}, host_addresses or {}
    for name in switch_addresses:
        topo.switch(name)  # TopologyError (an MrcError) naming it
    for name in host_addresses:
        topo.host(name)
    switches, missing = [], []
    for s in topo.switches:
        ep = s.p4runtime
        address, dev = switch_addresses.get(s.name, (ep.address, ep.device_id) if ep else (None, None))
        if address is None:
            missing.append(s.name)
            continue
        if dev is None:
            dev = ep.device_id if ep is not None and ep.device_id is not None else device_id
        switches.append(SwitchTarget(s.name, address, dev, ep.tls if ep else None))
    if missing:
        raise MrcError(f"no P4Runtime address for switch {', '.join(missing[:4])}"
                       f"{f' and {len(missing) - 4} more' if len(missing) > 4 else ''}: give one in the topology "
                       f"(p4runtime: {{address: ...}}) or with --switch NAME=ADDRESS")
    hosts = []
    for h in topo.hosts:
        address = host_addresses.get(h.name, h.agent.address if h.agent else None)
        if address is not None:
            hosts.append(HostTarget(h.name, address, nic_device, tls=h.agent.tls if h.agent else None))
    return switches, hosts


def _read(path: str | None, what: str) -> bytes | None:
    if not path:
        return None
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as exc:
        raise MrcError(f"tls {what} {path}: {exc.strerror or exc}") from None


def channel_credentials(tls: GrpcTls) -> grpc.ChannelCredentials:
    """gRPC client credentials from PEM files (CA, optional client cert + key).

    Raises:
        MrcError: a file that cannot be read, naming it.
    """
    return grpc.ssl_channel_credentials(root_certificates=_read(tls.ca, "ca"), private_key=_read(tls.key, "key"),
                                        certificate_chain=_read(tls.cert, "cert"))


def channel_options(tls: GrpcTls | None) -> list[tuple[str, object]]:
    """Channel arguments: 64 MiB messages (a large switch's Read), the TLS name override."""
    opts: list[tuple[str, object]] = [("grpc.max_receive_message_length", 64 << 20),
                                      ("grpc.max_send_message_length", 64 << 20)]
    if tls is not None and tls.server_name:
        opts.append(("grpc.ssl_target_name_override", tls.server_name))
    return opts
