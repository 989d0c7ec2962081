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
from ..topology import GrpcEndpoint, GrpcTls, Topology

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


def _endpoint(ep: GrpcEndpoint | None, what: str) -> GrpcEndpoint:
    if ep is None:
        raise MrcError(f"{what} has no address in the topology (give it one, e.g. "
                       f"'p4runtime: {{address: \"127.0.0.1:9559\"}}', or run it under `mrc fabric up`)")
    return ep


def targets_from_topology(topo: Topology, *, require_all: bool = True) -> tuple[list[SwitchTarget], list[HostTarget]]:
    """The switch and host targets a topology names (``p4runtime:`` and ``agent:`` fields).

    With ``require_all`` every switch must have a P4Runtime address (hosts without an agent
    address are skipped: a fabric may have hosts the controller does not manage).

    Raises:
        MrcError: a switch without an address, naming it.
    """
    switches = []
    for s in topo.switches:
        if s.p4runtime is None and not require_all:
            continue
        ep = _endpoint(s.p4runtime, f"switch {s.name}")
        switches.append(SwitchTarget(s.name, ep.address, DEFAULT_DEVICE_ID if ep.device_id is None else ep.device_id,
                                     ep.tls))
    hosts = [HostTarget(h.name, h.agent.address, tls=h.agent.tls) for h in topo.hosts if h.agent is not None]
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
