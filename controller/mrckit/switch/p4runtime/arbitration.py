"""Client arbitration on StreamChannel (P4Runtime spec 1.4 sections 5.3 and 5.4).

Per role (the default role is the empty name) the server remembers ``election_id_past``, the
highest election id it has ever seen on an arbitration update of that role. A stream becomes
primary only by sending an id >= ``election_id_past``; the primary is the live stream holding
``election_id_past``. When the primary leaves, the role has no primary until some client
arbitrates again with an id >= ``election_id_past``: a backup is never promoted on its own.

Every notification carries ``election_id_past`` as its election id, with status OK for the
primary, ALREADY_EXISTS for a backup while a primary exists, NOT_FOUND when none does. When a
stream becomes (or re-affirms itself as) primary, or the primary leaves or downgrades itself
(a lower id, or none), every stream of the role hears, the backups first; a stream that stays
a backup is answered alone.

Refusals (they end the stream): NOT_FOUND for a first update naming another device;
FAILED_PRECONDITION when a live stream changes its device or role; INVALID_ARGUMENT when
another live stream of the role holds the same election id. Only the primary may Write or
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
    """The arbitration state of one device: all streams, and ``election_id_past`` per role."""

    def __init__(self, device_id: int):
        self.device_id = device_id
        self._lock = threading.Lock()
        self._streams: list[Stream] = []
        self._past: dict[str, int] = {}  # role -> election_id_past

    def open(self) -> Stream:
        """Register a new stream; it takes part in arbitration after its first update."""
        stream = Stream()
        with self._lock:
            self._streams.append(stream)
        return stream

    def streams(self) -> list[Stream]:
        """A snapshot of the open streams."""
        with self._lock:
            return list(self._streams)

    def election_id_past(self, role: str) -> int | None:
        """The highest election id seen for ``role`` (None: never one)."""
        with self._lock:
            return self._past.get(role)

    def arbitrate(self, stream: Stream, update: p4r.MasterArbitrationUpdate) -> None:
        """Handle an arbitration update received on ``stream`` (spec 5.3).

        Raises ``P4RuntimeError``: NOT_FOUND for another device id on a first update,
        FAILED_PRECONDITION for a change of device or role on a live stream, INVALID_ARGUMENT
        when another live stream of the role holds the election id.
        """
        role = update.role.name
        election_id = uint128(update.election_id) if update.HasField("election_id") else None
        with self._lock:
            self._check(stream, update.device_id, role, election_id)
            was_primary = self._primary(role) is stream
            stream.role, stream.election_id, stream.arbitrated = role, election_id, True
            past = self._past.get(role)
            if election_id is not None and (past is None or election_id >= past):
                self._past[role] = election_id
                self._notify(self._members(role), role)
            elif was_primary:  # the primary downgraded itself: the role has none now
                self._notify(self._members(role), role)
            else:
                self._notify([stream], role)

    def _check(self, stream: Stream, device_id: int, role: str, election_id: int | None) -> None:
        if device_id != self.device_id:
            code = grpc.StatusCode.FAILED_PRECONDITION if stream.arbitrated else grpc.StatusCode.NOT_FOUND
            raise P4RuntimeError(code, f"unknown device id {device_id}: this stream is for device {self.device_id}"
                                 if stream.arbitrated else f"unknown device id {device_id}, this is device {self.device_id}")
        if stream.arbitrated and stream.role != role:
            raise P4RuntimeError(grpc.StatusCode.FAILED_PRECONDITION,
                                 f"a stream may not change its role ({stream.role!r} to {role!r}); open a new stream")
        if election_id is not None and any(
                other is not stream and other.election_id == election_id for other in self._members(role)):
            raise P4RuntimeError(grpc.StatusCode.INVALID_ARGUMENT, f"election id {election_id} already exists for role {role!r}")

    def close(self, stream: Stream) -> None:
        """Forget ``stream``; if it was the primary, every stream of the role hears NOT_FOUND."""
        with self._lock:
            if stream in self._streams:
                self._streams.remove(stream)
            if stream.arbitrated and stream.election_id is not None \
                    and stream.election_id == self._past.get(stream.role):
                self._notify(self._members(stream.role), stream.role)

    def check_primary(self, role: str, election_id: int | None) -> None:
        """Raise PERMISSION_DENIED unless (role, election_id) is the role's current primary."""
        with self._lock:
            primary = self._primary(role)
            if primary is None or election_id is None or primary.election_id != election_id:
                held = "no primary" if primary is None else "another client is primary"
                raise P4RuntimeError(
                    grpc.StatusCode.PERMISSION_DENIED,
                    f"election id {election_id} is not the primary of role {role!r} ({held})")

    def _members(self, role: str) -> list[Stream]:
        return [s for s in self._streams if s.arbitrated and s.role == role]

    def _primary(self, role: str) -> Stream | None:
        past = self._past.get(role)
        if past is None:
            return None
        return next((s for s in self._members(role) if s.election_id == past), None)

    def _notify(self, streams: list, role: str) -> None:
        """Send the advisory update to ``streams``; the backups hear before the primary (5.3)."""
        primary = self._primary(role)
        past = self._past.get(role)
        for s in sorted(streams, key=lambda s: s is primary):
            msg = p4r.StreamMessageResponse()
            arb = msg.arbitration
            arb.device_id = self.device_id
            if role:
                arb.role.name = role
            if past is not None:
                arb.election_id.high, arb.election_id.low = past >> 64, past & ((1 << 64) - 1)
            if primary is None:
                arb.status.code, arb.status.message = rpc_code.NOT_FOUND, "no primary"
            elif s is primary:
                arb.status.code, arb.status.message = rpc_code.OK, "primary"
            else:
                arb.status.code, arb.status.message = rpc_code.ALREADY_EXISTS, "a primary exists"
            s.outbox.put(msg)
