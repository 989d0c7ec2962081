"""Counters of one endpoint, read by the CLI summary, the tests and the bench."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field


@dataclass
class ResponderStats:
    """Responder counters: packets by outcome, bytes placed, replies sent by kind."""

    packets: int = 0
    icrc_checked: int = 0
    bad_icrc: int = 0
    malformed: int = 0
    unknown_qp: int = 0
    duplicates: int = 0
    placed_packets: int = 0
    placed_bytes: int = 0
    ce_marked: int = 0
    trimmed: int = 0
    probes: int = 0
    sacks: int = 0
    nacks: Counter = field(default_factory=Counter)
    imm_completions: int = 0
    acks: int = 0
    """RC baseline QPs: AETH ACKs sent (they send no SACK)."""
    seq_naks: int = 0
    """RC baseline QPs: NAK sequence errors sent, one per gap."""
    out_of_sequence: int = 0
    """RC baseline QPs: data packets past the expected PSN, discarded (go-back-N resends them)."""


@dataclass
class RequestorStats:
    """Requestor counters: packets and payload bytes sent, retransmits by reason, feedback."""

    packets: int = 0
    payload_bytes: int = 0
    acked_bytes: int = 0
    retransmits: Counter = field(default_factory=Counter)
    sacks: int = 0
    ecn_sacks: int = 0
    nacks: Counter = field(default_factory=Counter)
    timeouts: int = 0
    probes: int = 0
    icrc_checked: int = 0
    bad_icrc: int = 0
    malformed: int = 0
    """Replies with a good ICRC that are too short for their opcode, or no SACK or NACK."""
    completions: int = 0
    acks: int = 0
    """RC baseline QPs: AETH ACKs received."""
    seq_naks: int = 0
    """RC baseline QPs: NAK sequence errors received (each a go-back-N)."""
