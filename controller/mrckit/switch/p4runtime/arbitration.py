"""Client arbitration on StreamChannel (P4Runtime spec 1.4 section 5).

Per role (the default role is the empty name), the connected stream with the highest election
id is the primary; the others are backups. Whenever the primary of a role changes, every stream
of that role gets a ``MasterArbitrationUpdate``: status OK for the primary, ALREADY_EXISTS for
backups while a primary exists, NOT_FOUND when none does; ``election_id`` is the highest id of
the role. A newcomer that does not become primary is answered alone. Two streams of one role
may not share an election id (INVALID_ARGUMENT). Only the primary may Write or
SetForwardingPipelineConfig (PERMISSION_DENIED otherwise).
"""

import queue
import threading
from dataclasses import dataclass, field

import grpc
from finsy.proto import p4r, rpc_code

from .errors import P4RuntimeError


@dataclass(eq=False)
class Stream:
    """One open StreamChannel: its role, election id (None = never primary) and outbound queue."""

    role: str = ""
    election_id: int | None = None
    arbitrated: bool = False
    outbox: queue.Queue = field(default_factory=queue.Queue)


def uint128(msg) -> int:
    """Integer value of a ``p4.v1.Uint128``."""
    return (msg.high << 64) | msg.low


class Arbiter:
    """The arbitration state of one device: all streams, and the primary of each role."""

    def __init__(self, device_id: int):
        self.device_id = device_id
        self._lock = threading.Lock()
        self._streams: list[Stream] = []
        self._primary: dict[str, Stream | None] = {}
        self._primary_was: dict[str, tuple] = {}  # role -> (stream, its election id) last announced

    def open(self) -> Stream:
        """Register a new stream; it takes part in arbitration after its first update."""
        stream = Stream()
        with self._lock:
            self._streams.append(stream)
        return stream

    def arbitrate(self, stream: Stream, update: p4r.MasterArbitrationUpdate) -> None:
        """Handle an arbitration update received on ``stream``.

        Raises ``P4RuntimeError`` NOT_FOUND for another device id, INVALID_ARGUMENT when the
        election id is already held by another stream of the role, or when the stream changes role.
        """
        if update.device_id != self.device_id:
            raise P4RuntimeError(grpc.StatusCode.NOT_FOUND, f"unknown device id {update.device_id}, this is device {self.device_id}")
        role = update.role.name
        election_id = uint128(update.election_id) if update.HasField("election_id") else None
        with self._lock:
            if stream.arbitrated and stream.role != role:
                raise P4RuntimeError(grpc.StatusCode.INVALID_ARGUMENT, "a stream may not change its role")
            for other in self._streams:
                if other is not stream and other.arbitrated and other.role == role \
                        and election_id is not None and other.election_id == election_id:
                    raise P4RuntimeError(grpc.StatusCode.INVALID_ARGUMENT, f"election id {election_id} already exists for role {role!r}")
            stream.role, stream.election_id, stream.arbitrated = role, election_id, True
            if not self._elect(role):
                self._notify([stream], role)

    def close(self, stream: Stream) -> None:
        """Forget ``stream``; if it was a primary, the role elects again and everyone hears."""
        with self._lock:
            if stream in self._streams:
                self._streams.remove(stream)
            if stream.arbitrated:
                self._elect(stream.role)

    def check_primary(self, role: str, election_id: int | None) -> None:
        """Raise PERMISSION_DENIED unless (role, election_id) is the role's current primary."""
        with self._lock:
            primary = self._primary.get(role)
            if primary is None or election_id is None or primary.election_id != election_id:
                raise P4RuntimeError(
                    grpc.StatusCode.PERMISSION_DENIED,
                    f"election id {election_id} is not the primary of role {role!r}")

    def _elect(self, role: str) -> bool:
        """Recompute the role's primary; on a change notify every stream of the role."""
        members = [s for s in self._streams if s.arbitrated and s.role == role]
        best = max((s for s in members if s.election_id is not None), key=lambda s: s.election_id, default=None)
        now = (best, best.election_id if best else None)
        changed = now != self._primary_was.get(role, (None, None))
        self._primary[role] = best
        self._primary_was[role] = now
        if changed:
            self._notify(members, role)
        return changed

    def _notify(self, streams: list, role: str) -> None:
        primary = self._primary.get(role)
        highest = max((s.election_id for s in self._streams if s.arbitrated and s.role == role and s.election_id is not None), default=None)
        for s in streams:
            msg = p4r.StreamMessageResponse()
            arb = msg.arbitration
            arb.device_id = self.device_id
            if role:
                arb.role.name = role
            if highest is not None:
                arb.election_id.high, arb.election_id.low = highest >> 64, highest & ((1 << 64) - 1)
            if primary is None:
                arb.status.code, arb.status.message = rpc_code.NOT_FOUND, "no primary"
            elif s is primary:
                arb.status.code, arb.status.message = rpc_code.OK, "primary"
            else:
                arb.status.code, arb.status.message = rpc_code.ALREADY_EXISTS, "a primary exists"
            s.outbox.put(msg)
