"""The host agent's input: the host config (the controller's output) plus agent settings.

:func:`from_topology` maps ``mrckit.topology.HostConfig`` to it and :func:`from_proto` /
:func:`to_proto` map the gRPC ``ConfigureRequest`` both ways, with errors that name the field.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field

from ..errors import MrcError
from ..proto import host_agent_pb2 as pb
from ..wire.addressing import parse_nic_address, parse_port_address
from ..wire.constants import AGENT_UDP_PORT
from ..wire.usid import DEFAULT_LOCATOR
from .evset import MAX_EVS, MAX_T1_DRAWS, MIN_EVS

XDP_MODES = ("native", "generic", "auto")
RETIREMENTS = ("path", "ev")
"""Loss retirement: ``path`` retires every EV of the lost packet's path toward that peer (SRv6
mode; ecmp mode has no known paths and retires per EV), ``ev`` the lost packet's EV only."""
MODES = ("srv6", "ecmp")
"""Forwarding modes: ``srv6`` (uSID source routing, design 3.1) and ``ecmp`` (EV-hash mode,
docs/ecmp-mode.md: no outer header, the switches hash the EV)."""


@dataclass(frozen=True)
class Port:
    """One plane port: interface name, port address, own MAC and the T0's MAC (``aa:..``)."""

    plane: int
    ifname: str
    address: ipaddress.IPv6Address
    mac: str
    neighbor_mac: str
    link: str = ""


@dataclass(frozen=True)
class Settings:
    """Agent behaviour. Times in ns; see ``AgentSettings`` in host_agent.proto."""

    ev_count: int = 128
    backups_per_plane: int = 16
    rto_ns: int = 2_000_000
    sweep_ns: int = 0  # 0: rto_ns // 4
    probe_interval_ns: int = 1_000_000
    probe_successes: int = 3
    agent_port: int = AGENT_UDP_PORT
    xdp_mode: str = "native"
    max_probes_per_sweep: int = 64
    seed: int = 0
    min_unacked: int = 8
    retirement: str = "path"
    ev_min_active: int = 0  # 0: ev_count // 4
    pinned_ev: bool = False
    t1_draws: int = 0  # 0: each plane's EVs round-robin over every T1 (evset.build_template)

    @property
    def min_active(self) -> int:
        """The ev_min_active floor: ``ev_min_active``, or a quarter of ``ev_count``."""
        return self.ev_min_active or self.ev_count // 4

    @property
    def sweep_period_ns(self) -> int:
        """The sweep period: ``sweep_ns``, or a quarter of the RTO."""
        return self.sweep_ns or max(self.rto_ns // 4, 1)


@dataclass(frozen=True)
class AgentConfig:
    """Everything ``Configure`` needs. ``t1_per_plane[p]`` is the T1 count of plane p (in
    ``ecmp`` mode it may be empty: EVs name no T1 there). ``mode`` is one of :data:`MODES`."""

    name: str
    nic_address: ipaddress.IPv6Address
    leaf: int
    downlink: int
    nic_device: str
    ports: tuple[Port, ...]
    t1_per_plane: tuple[int, ...]
    locator: int = DEFAULT_LOCATOR
    settings: Settings = field(default_factory=Settings)
    mode: str = "srv6"

    @property
    def path_retire(self) -> bool:
        """Path-aware retirement applies: ``retirement == "path"`` in srv6 mode."""
        return self.settings.retirement == "path" and not self.opaque_evs

    @property
    def opaque_evs(self) -> bool:
        """EV-hash mode: an EV's T1 field names no path."""
        return self.mode == "ecmp"

    def validate(self) -> None:
        """Check the config as a whole.

        Raises:
            MrcError: naming the field: NIC address not matching leaf/downlink, no ports, a
                plane without a T1 count, duplicate planes, a bad port address or MAC, an EV
                count outside 128..256 or not a multiple of the planes, a bad XDP mode, a
                mode other than srv6/ecmp, a retirement other than path/ev, an ev_min_active
                above the EV count, a t1_draws outside 0..256.
        """
        if self.mode not in MODES:
            raise MrcError(f"host {self.name}: mode {self.mode!r}: use {' or '.join(MODES)}")
        try:
            loc = parse_nic_address(self.nic_address)
        except ValueError as exc:
            raise MrcError(f"host {self.name}: nic_address: {exc}") from None
        if (loc.leaf, loc.downlink) != (self.leaf, self.downlink):
            raise MrcError(f"host {self.name}: nic_address {self.nic_address} is leaf {loc.leaf} "
                           f"downlink {loc.downlink}, but the config says {self.leaf}/{self.downlink}")
        if not self.nic_device:
            raise MrcError(f"host {self.name}: nic_device is empty")
        if not self.ports:
            raise MrcError(f"host {self.name}: ports is empty; a host needs one port per plane")
        planes = [p.plane for p in self.ports]
        if len(set(planes)) != len(planes):
            raise MrcError(f"host {self.name}: ports: a plane appears twice ({planes})")
        for i, port in enumerate(self.ports):
            where = f"host {self.name}: ports[{i}] ({port.ifname})"
            if not self.opaque_evs and (port.plane >= len(self.t1_per_plane) or self.t1_per_plane[port.plane] < 1):
                raise MrcError(f"{where}: plane {port.plane} has no T1 count in t1_per_plane")
            try:
                plane, _ = parse_port_address(port.address)
                _mac(port.mac), _mac(port.neighbor_mac)
            except ValueError as exc:
                raise MrcError(f"{where}: {exc}") from None
            if plane != port.plane:
                raise MrcError(f"{where}: address {port.address} is on plane {plane}, not {port.plane}")
        s = self.settings
        if not MIN_EVS <= s.ev_count <= MAX_EVS or s.ev_count % len(self.ports):
            raise MrcError(f"host {self.name}: settings.ev_count {s.ev_count} must be {MIN_EVS}..{MAX_EVS} "
                           f"and a multiple of the {len(self.ports)} planes")
        if s.xdp_mode not in XDP_MODES:
            raise MrcError(f"host {self.name}: settings.xdp_mode {s.xdp_mode!r}: use {', '.join(XDP_MODES)}")
        if s.retirement not in RETIREMENTS:
            raise MrcError(f"host {self.name}: settings.retirement {s.retirement!r}: use "
                           f"{' or '.join(RETIREMENTS)}")
        if not 0 <= s.ev_min_active <= s.ev_count:
            raise MrcError(f"host {self.name}: settings.ev_min_active {s.ev_min_active} must be "
                           f"0..{s.ev_count} (the EV count; 0 = a quarter of it)")
        if not 0 <= s.t1_draws <= MAX_T1_DRAWS:
            raise MrcError(f"host {self.name}: settings.t1_draws {s.t1_draws} must be 0..{MAX_T1_DRAWS} "
                           "(0 = every T1 of the plane)")
        if s.probe_successes < 1 or s.rto_ns <= 0:
            raise MrcError(f"host {self.name}: settings.probe_successes and rto_ns must be positive")

    def t1_counts(self) -> dict[int, int]:
        """plane -> T1 count, for the planes this host has a port on (1 where ``ecmp`` mode
        has none: its EVs name no T1)."""
        return {p.plane: (self.t1_per_plane[p.plane] if p.plane < len(self.t1_per_plane) else 1)
                for p in self.ports}


def _mac(text: str) -> bytes:
    parts = text.split(":")
    if len(parts) != 6 or not all(len(x) == 2 for x in parts):
        raise ValueError(f"MAC {text!r} is not aa:bb:cc:dd:ee:ff")
    return bytes(int(x, 16) for x in parts)


def mac_text(value: int | bytes) -> str:
    """``aa:bb:cc:dd:ee:ff`` of a 48-bit int or 6 bytes."""
    raw = value.to_bytes(6, "big") if isinstance(value, int) else value
    return ":".join(f"{b:02x}" for b in raw)


def from_topology(host, nic_device: str, settings: Settings | None = None) -> AgentConfig:
    """An :class:`AgentConfig` from a ``mrckit.topology.HostConfig``."""
    ports = tuple(Port(p.plane, p.ifname, ipaddress.IPv6Address(p.address), mac_text(p.mac),
                       mac_text(p.t0_mac), p.link) for p in host.ports)
    return AgentConfig(host.name, ipaddress.IPv6Address(host.nic_address), host.leaf, host.downlink,
                       nic_device, ports, tuple(host.t1_per_plane), host.locator,
                       settings or Settings(), getattr(host, "mode", "srv6"))


def to_proto(cfg: AgentConfig) -> pb.ConfigureRequest:
    """The ``ConfigureRequest`` carrying ``cfg``."""
    s = cfg.settings
    return pb.ConfigureRequest(
        host=pb.HostConfig(name=cfg.name, nic_address=str(cfg.nic_address), leaf=cfg.leaf,
                           downlink=cfg.downlink, locator=cfg.locator,
                           t1_per_plane=list(cfg.t1_per_plane), nic_device=cfg.nic_device,
                           mode=cfg.mode,
                           ports=[pb.HostPort(plane=p.plane, ifname=p.ifname, address=str(p.address),
                                              mac=p.mac, neighbor_mac=p.neighbor_mac, link=p.link)
                                  for p in cfg.ports]),
        settings=pb.AgentSettings(ev_count=s.ev_count, backups_per_plane=s.backups_per_plane,
                                  rto_ns=s.rto_ns, sweep_ns=s.sweep_ns,
                                  probe_interval_ns=s.probe_interval_ns,
                                  probe_successes=s.probe_successes, agent_port=s.agent_port,
                                  xdp_mode=s.xdp_mode, max_probes_per_sweep=s.max_probes_per_sweep,
                                  seed=s.seed, min_unacked=s.min_unacked, retirement=s.retirement,
                                  ev_min_active=s.ev_min_active, pinned_ev=s.pinned_ev,
                                  t1_draws=s.t1_draws))


def _address(host: str, field: str, text: str) -> ipaddress.IPv6Address:
    try:
        return ipaddress.IPv6Address(text)
    except ValueError:
        raise MrcError(f"host {host}: {field} {text!r} is not an IPv6 address") from None


def from_proto(req: pb.ConfigureRequest) -> AgentConfig:
    """An :class:`AgentConfig` from a ``ConfigureRequest`` (zero settings take defaults).

    Raises:
        MrcError: an address that does not parse (validate() checks the rest).
    """
    h, s, d = req.host, req.settings, Settings()
    ports = tuple(Port(p.plane, p.ifname, _address(h.name, f"ports[{i}].address", p.address), p.mac,
                       p.neighbor_mac, p.link) for i, p in enumerate(h.ports))
    nic = _address(h.name, "nic_address", h.nic_address)
    settings = Settings(
        ev_count=s.ev_count or d.ev_count,
        backups_per_plane=s.backups_per_plane or d.backups_per_plane,
        rto_ns=s.rto_ns or d.rto_ns, sweep_ns=s.sweep_ns,
        probe_interval_ns=s.probe_interval_ns or d.probe_interval_ns,
        probe_successes=s.probe_successes or d.probe_successes,
        agent_port=s.agent_port or d.agent_port, xdp_mode=s.xdp_mode or d.xdp_mode,
        max_probes_per_sweep=s.max_probes_per_sweep or d.max_probes_per_sweep, seed=s.seed,
        min_unacked=s.min_unacked or d.min_unacked, retirement=s.retirement or d.retirement,
        ev_min_active=s.ev_min_active, pinned_ev=s.pinned_ev, t1_draws=s.t1_draws)
    return AgentConfig(h.name, nic, h.leaf, h.downlink, h.nic_device, ports,
                       tuple(h.t1_per_plane), h.locator or DEFAULT_LOCATOR, settings, h.mode or "srv6")
