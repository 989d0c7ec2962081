"""The controller's client of one host agent (``mrckit/proto/host_agent.proto``, design 5).

``control`` talks to hosts only over gRPC (design section 2), so this module maps the
topology's :class:`~mrckit.topology.HostConfig` to the wire form itself rather than import the
agent's package.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

import grpc
from google.protobuf import json_format

from ..errors import MrcError
from ..proto import host_agent_pb2 as pb
from ..proto import host_agent_pb2_grpc as pbg
from ..topology import HostConfig
from ..topology.plan import mac_str
from .targets import HostTarget, channel_credentials, channel_options

RPC_TIMEOUT_S = 30.0
"""Configure loads and attaches BPF programs: allow it time on a loaded machine."""


def host_config_proto(cfg: HostConfig, nic_device: str) -> pb.HostConfig:
    """The ``HostConfig`` message for ``cfg`` (MACs as ``aa:bb:..`` text, addresses as text)."""
    return pb.HostConfig(
        name=cfg.name, nic_address=str(cfg.nic_address), leaf=cfg.leaf, downlink=cfg.downlink,
        locator=cfg.locator, mtu=cfg.mtu, nic_mtu=cfg.nic_mtu, t1_per_plane=list(cfg.t1_per_plane),
        nic_device=nic_device, mode=cfg.mode,
        ports=[pb.HostPort(plane=p.plane, ifname=p.ifname, address=str(p.address), mac=mac_str(p.mac),
                           neighbor_mac=mac_str(p.t0_mac), link=p.link) for p in cfg.ports])


def agent_settings(settings: dict) -> pb.AgentSettings:
    """``AgentSettings`` from a dict of its proto fields. Raises MrcError naming a bad field."""
    try:
        return json_format.ParseDict(settings, pb.AgentSettings())
    except json_format.ParseError as exc:
        # protobuf adds a second line listing the fields in JSON (camelCase) spelling.
        raise MrcError(f"agent settings: {str(exc).splitlines()[0]}") from None


@dataclass
class HostSession:
    """An open channel to one host agent. Use :func:`open_host`; every call raises MrcError
    naming the host when the agent refuses or cannot be reached."""

    target: HostTarget
    channel: grpc.aio.Channel
    stub: pbg.HostAgentStub

    def _error(self, what: str, exc: grpc.RpcError) -> MrcError:
        return MrcError(f"host {self.target.name} ({self.target.address}): {what}: "
                        f"{exc.code().name}: {exc.details()}")

    async def configure(self, cfg: HostConfig) -> pb.ConfigureResponse:
        """Configure the agent with ``cfg`` and the target's NIC device and settings."""
        req = pb.ConfigureRequest(host=host_config_proto(cfg, self.target.nic_device),
                                  settings=agent_settings(self.target.settings))
        try:
            return await self.stub.Configure(req, timeout=RPC_TIMEOUT_S, wait_for_ready=True)
        except grpc.RpcError as exc:
            raise self._error("Configure", exc) from None

    async def is_configured(self) -> bool:
        """Whether the agent already has a config (GetStats answers rather than refusing with
        FAILED_PRECONDITION). Raises MrcError when the agent cannot be reached."""
        try:
            await self.stub.GetStats(pb.GetStatsRequest(), timeout=RPC_TIMEOUT_S, wait_for_ready=True)
        except grpc.RpcError as exc:
            if exc.code() == grpc.StatusCode.FAILED_PRECONDITION:
                return False
            raise self._error("GetStats", exc) from None
        return True

    async def set_link_denied(self, link: str, denied: bool) -> pb.SetEvStateResponse:
        """DENY (or lift the denial of) every EV that crosses ``link`` (design 3.3 name)."""
        try:
            return await self.stub.SetEvState(pb.SetEvStateRequest(link=link, denied=denied), timeout=RPC_TIMEOUT_S)
        except grpc.RpcError as exc:
            raise self._error(f"SetEvState {link} denied={denied}", exc) from None

    async def stats(self, include_evs: bool = False) -> pb.Stats:
        """The agent's counters, and with ``include_evs`` the EV tables of its live peers."""
        try:
            return await self.stub.GetStats(pb.GetStatsRequest(include_evs=include_evs), timeout=RPC_TIMEOUT_S)
        except grpc.RpcError as exc:
            raise self._error("GetStats", exc) from None

    async def events(self, replay: bool = False) -> AsyncIterator[pb.EvEvent]:
        """The agent's EV events, as they happen, until the stream ends.

        Raises:
            MrcError: when the stream breaks (agent gone).
        """
        call = self.stub.WatchEvents(pb.WatchEventsRequest(replay=replay))
        try:
            async for event in call:
                yield event
        except grpc.RpcError as exc:
            if exc.code() != grpc.StatusCode.CANCELLED:
                raise self._error("WatchEvents", exc) from None
        finally:
            call.cancel()

    async def close(self) -> None:
        """Close the channel."""
        await self.channel.close()


def open_host(target: HostTarget) -> HostSession:
    """A channel to ``target``'s agent (connected lazily, on the first call)."""
    opts = channel_options(target.tls)
    if target.tls is None:
        channel = grpc.aio.insecure_channel(target.address, options=opts)
    else:
        channel = grpc.aio.secure_channel(target.address, channel_credentials(target.tls), options=opts)
    return HostSession(target, channel, pbg.HostAgentStub(channel))
