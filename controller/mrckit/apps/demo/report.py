"""The demo report: one pydantic model, written as JSON and printed with rich.

Field names are documented in ``docs/demo.md``; :func:`json_schema` gives the JSON Schema.
Times are seconds since the transfer started (``t_*_s``, CLOCK_MONOTONIC differences), rates
are Gb/s of RDMA payload, packet counts are data packets unless a name says otherwise.
"""

from __future__ import annotations

import json
from typing import Literal

from pydantic import BaseModel, Field

from ..common import JsonFile

SCHEMA_VERSION = 1
FAIL_KINDS = ("down", "flap", "loss", "blackhole")
FailKind = Literal["down", "flap", "loss", "blackhole"]
Mode = Literal["srv6", "ecmp"]
Target = Literal["ebpf", "bmv2"]
EndpointName = Literal["native", "python"]


class FaultInfo(BaseModel):
    """The injected fault: its kind, the link by name, where it sits, and the sender's path
    (plane × spine) that crosses it."""

    kind: FailKind
    link: str
    node: str = ""
    ifname: str = ""
    plane: int
    spine: int
    loss_percent: float | None = None
    flap_hz: float | None = None

    def describe(self) -> str:
        """``down``, ``blackhole``, ``10 % loss`` or ``flapping at 5 Hz``."""
        if self.kind == "loss":
            return f"{self.loss_percent:g} % loss"
        if self.kind == "flap":
            return f"flapping at {self.flap_hz:g} Hz"
        return self.kind


class ByteCounts(BaseModel):
    """Bytes of the RDMA write: posted, placed by the responder, equal to the source after
    the transfer; SHA-256 of the source buffer and of the responder's memory region."""

    sent: int
    placed: int
    verified: int
    sha256_sent: str
    sha256_received: str
    hash_match: bool


class EndpointCounts(BaseModel):
    """Requestor and responder counters (``mrckit.endpoint.stats``)."""

    data_packets: int = 0
    retransmits: dict[str, int] = Field(default_factory=dict)
    retransmits_total: int = 0
    sacks: int = 0
    nacks: dict[str, int] = Field(default_factory=dict)
    timeouts: int = 0
    probes: int = 0
    responder_packets: int = 0
    responder_duplicates: int = 0
    responder_trimmed: int = 0
    responder_ce_marked: int = 0


class EvTransition(BaseModel):
    """How many EV events of one kind a host's agent reported (WatchEvents)."""

    host: str
    new_state: str
    reason: str
    count: int
    together: int = 0
    """The most EVs toward one peer that entered ``new_state`` in one step (one agent
    timestamp) along with an event of this reason: a path's EVs retired together (LOSS and
    its PATH_LOSS siblings) read the path's EV count, per-EV retirement reads 1."""


class EvCycle(BaseModel):
    """One EV of the failed path: how often it was retired (ASSUMED_BAD) and probed back."""

    ev: str
    path: str
    retired: int
    probed_back: int


class DeadEvMark(BaseModel):
    """One dead EV (its path crossed the failed link at fault time) around the fault, in µs
    from the fault program's first drop (the dataplane's clock): when the sender took it out
    (``out_us``, ASSUMED_BAD or DENIED, ``how``; None: never before the restore) and when it
    last carried a data packet before the restore (``last_tx_us``, its ``last_tx_ns``)."""

    ev: int
    out_us: float | None = None
    how: str = ""
    last_tx_us: float | None = None


class Failover(BaseModel):
    """The failover figures (seconds since the transfer started; None = did not happen)."""

    t_fault_s: float
    t_restore_s: float
    t_first_assumed_bad_s: float | None = None
    t_out_of_service_s: float | None = None
    t_failover_s: float | None = None
    t_last_dead_tx_s: float | None = None
    t_deny_s: float | None = None
    deny_links: list[str] = Field(default_factory=list)
    t_deny_lifted_s: float | None = None
    goodput_before_gbps: float = 0.0
    goodput_during_gbps: float = 0.0
    goodput_after_gbps: float = 0.0
    dead_path_packets_failover_to_restore: int | None = None
    fault_time_source: str = "demo"
    """``fault program``: t_fault_s is the fault program's first drop (bpf_ktime_get_ns); ``demo``:
    the demo's clock just before it applied the fault (no program: flap, bmv2 down)."""
    t_fault_injected_s: float | None = None
    t_restored_s: float | None = None
    """When the restore had completed (a flapper stopped, the link up for good)."""
    flaps: int | None = None
    """Flap faults: the down transitions the flapper made, the first down and the final up; both
    lie between ``t_fault_injected_s`` and ``t_restored_s`` (the fault window)."""
    t_first_flap_down_s: float | None = None
    t_last_flap_up_s: float | None = None
    dataplane_failover_us: float | None = None
    """The last dead EV's retirement (the host dataplane's timestamp) minus the first drop, µs;
    None without a first drop or when a dead EV stayed in service until the restore."""
    dead_evs: int = 0
    dead_evs_out: int = 0
    dead_ev_marks: list[DeadEvMark] = Field(default_factory=list)


class PathStats(BaseModel):
    """Data packets the sender put on one path (plane × spine), from its per-EV counters."""

    name: str
    plane: int
    spine: int
    failed: bool
    packets_before: int
    packets_during: int
    packets_after: int
    packets_total: int
    share_during: float
    retired: int = 0
    probed_back: int = 0


class SpineCount(BaseModel):
    """Packets a T1 switch (spine) forwarded, from its ``tx_port`` counters."""

    switch: str
    plane: int
    spine: int
    packets: int


class SwitchCounts(BaseModel):
    """Switch counters summed over the fabric: per plane (its spines), per spine, trims,
    ECN marks and drops by reason."""

    per_plane: dict[str, int] = Field(default_factory=dict)
    per_spine: list[SpineCount] = Field(default_factory=list)
    trimmed: int = 0
    ecn_marked: int = 0
    dropped: dict[str, int] = Field(default_factory=dict)


class TimelineEvent(BaseModel):
    """One line of the timeline: when, who (demo, fabric, agent, controller) and what."""

    t_s: float
    source: str
    what: str
    detail: str = ""


class Series(BaseModel):
    """The sampled time series: sample times, bytes placed so far, and per path the
    cumulative data packets sent (keys are path names ``p<plane>/s<spine>``); and when the
    sender retired an EV of the failed path, or probed one back."""

    t_s: list[float] = Field(default_factory=list)
    bytes_placed: list[int] = Field(default_factory=list)
    path_packets: dict[str, list[int]] = Field(default_factory=dict)
    failed_path_retired_t_s: list[float] = Field(default_factory=list)
    failed_path_probed_back_t_s: list[float] = Field(default_factory=list)


class LossStats(BaseModel):
    """Packets lost to the fault, defined the same way in both forwarding modes (docs/demo.md,
    "Loss accounting"). Counts are packets the requestor sent toward the responder (data and
    the endpoint's PROBEs); times are seconds since the fault.

    Attributes:
        packets_sent, packets_received: what the requestor put on the wire (first sends and
            retransmissions) and what reached the responder, from the endpoints' counters read
            after the write completed.
        packets_lost: ``packets_sent - packets_received``, over the whole write.
        packets_lost_to_fault: packets sent between the fault and the restore that never
            arrived (the loss curve at the restore minus at the fault): the comparison's
            headline.
        packets_lost_by_ev, evs_with_loss: per EV, the sender dataplane's data counter
            (``tx_packets``) minus the responder's count of packets that arrived on that EV,
            summed over EVs, and how many EVs lost at least one packet.
        link_packets_lost: the switch counters at the failed link, fault to end: packets one
            end counted out (``tx_port``) that the other end never counted in (``rx_port``),
            both directions, every class (data, SACKs, probes). None if unread.
        evs_retired, evs_retired_distinct: the sender's EV retirements toward the receiver
            (ASSUMED_BAD for RTO_TIMEOUT, LOSS, PORT_DOWN, PEER_PORT_DOWN or SACK_ALWAYS_SKIP)
            from the fault to the restore, and how many EVs they concern.
        t_last_loss_s: from the fault to the last packet lost to it (when the loss curve
            reached its value at the restore; one sampling period of resolution); None
            without such loss.
        t_s, lost: the cumulative loss over time (seconds since the fault, packets), for plots.
        dead_link_evs: the sender's EVs toward the receiver, in use when the fault hit, whose
            path crossed the failed link (SRv6: the EV's own path; EV-hash mode: the EVs that
            the sender T0's group at fault time hashed onto the failed link's spine,
            ``mrckit.wire.ecmp``). dead_link_evs_retired: how many of them the sender took out
            of use (ASSUMED_BAD for a failure reason, or DENIED) between fault and restore.
            dead_link_packets_lost: packets lost on them (per EV, ``tx - rx``, summed).
    """

    packets_sent: int = 0
    packets_received: int = 0
    packets_lost: int = 0
    packets_lost_to_fault: int = 0
    packets_lost_by_ev: int = 0
    evs_with_loss: int = 0
    link_packets_lost: int | None = None
    evs_retired: int = 0
    evs_retired_distinct: int = 0
    t_last_loss_s: float | None = None
    t_s: list[float] = Field(default_factory=list)
    lost: list[int] = Field(default_factory=list)
    dead_link_evs: int = 0
    dead_link_evs_retired: int = 0
    dead_link_packets_lost: int = 0


class FaultEffect(BaseModel):
    """Whether the fault took effect while the write ran (the ``fault_took_effect`` check).

    Attributes:
        down_transitions: ``down``/``flap``: the link's down transitions between the fault and
            the restore that happened before the write completed (the fault's own, and each
            flap reported to the controller); None for other kinds.
        dead_link_packets_after: ``down``/``flap``: data packets the sender put on the failed
            link's EVs (``LossStats.dead_link_evs``) after the first such transition, up to the
            restore or the end of the write; None for other kinds.
        fault_program_drops: ``loss``/``blackhole``: packets the fault program dropped at both
            ends of the link (``mrckit.fabric.faults.read_stats``); None if unread.
        link_denied_at_fault: the sender's agent denied the link already when the fault came
            (the write waits for it to be allowed before it starts, but a busy machine's
            spurious timeouts can make the controller deny it again meanwhile): its EVs then
            carried nothing for the fault to hit. None: not read.
    """

    down_transitions: int | None = None
    dead_link_packets_after: int | None = None
    fault_program_drops: int | None = None
    link_denied_at_fault: bool | None = None


class Check(BaseModel):
    """One acceptance fact of the demo, with the numbers behind it."""

    name: str
    ok: bool
    detail: str


class DemoReport(JsonFile):
    """Everything ``mrc demo`` measured; ``passed`` is the AND of ``checks``."""

    schema_version: int = SCHEMA_VERSION
    target: Target
    mode: Mode = "srv6"
    endpoint_name: EndpointName = "python"
    agent_rto_ns: int | None = None
    writer_rto_ns: int | None = None
    writer_max_cwnd: int | None = None
    topology: dict[str, int]
    sender: str
    receiver: str
    duration_s: float
    goodput_gbps: float
    bytes: ByteCounts
    endpoint: EndpointCounts
    fault: FaultInfo
    failover: Failover
    ev_transitions: list[EvTransition] = Field(default_factory=list)
    ev_cycles: list[EvCycle] = Field(default_factory=list)
    paths: list[PathStats] = Field(default_factory=list)
    switches: SwitchCounts = Field(default_factory=SwitchCounts)
    timeline: list[TimelineEvent] = Field(default_factory=list)
    series: Series = Field(default_factory=Series)
    loss: LossStats = Field(default_factory=LossStats)
    fault_effect: FaultEffect = Field(default_factory=FaultEffect)
    checks: list[Check] = Field(default_factory=list)
    passed: bool = False


def json_schema() -> str:
    """The JSON Schema of :class:`DemoReport`, as indented text."""
    return json.dumps(DemoReport.model_json_schema(), indent=2)


def path_name(plane: int, spine: int) -> str:
    """``p<plane>/s<spine>``: the name of a path through spine ``spine`` of plane ``plane``."""
    return f"p{plane}/s{spine}"
