"""A P4Runtime session with one switch, on finsy's asyncio client (design sections 7 and 9).

finsy is used for what it does well and keeps current: the gRPC channel (plaintext or TLS),
the generated P4Runtime protos, P4Info lookups (``P4Schema``) and entity encoding. The steps
that design section 7 pins down are spelled out here so that they are visible and counted:

1. arbitration on StreamChannel with our election id; we must become primary;
2. GetForwardingPipelineConfig(COOKIE_ONLY); SetForwardingPipelineConfig(VERIFY_AND_COMMIT)
   with P4Info + p4_device_config + cookie only when the cookie differs (bmv2 has no
   RECONCILE_AND_COMMIT; VERIFY_AND_COMMIT clears the tables);
3. Read every entry of the tables we own, diff (``diff.py``), and Write only the difference,
   in batches. In EV-hash mode also the ``ecmp_selector`` members and groups and the
   ``ipv6_fib`` routes, written in dependency order (``EcmpDiff.phases``). In SRv6 mode those
   are neither read nor written: SRv6 DAs (under the uSID block) never match an ``ipv6_fib``
   route, and a server without action profile support keeps working.

The same code drives bmv2 and the eBPF target's server: it cannot tell them apart.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import finsy as fy
from finsy.proto import p4r

from ..errors import MrcError
from ..topology import ActionProfileGroup, ActionProfileMember, TableEntry
from ..wire.pipeline import ECMP_SELECTOR, IPV6_FIB, TABLE_NAMES
from .diff import EcmpDiff, EcmpTables, EntryDiff, diff_ecmp, diff_entries
from .pipeline import Pipeline
from .targets import SwitchTarget

log = logging.getLogger(__name__)

WRITE_BATCH = 500
"""Updates per WriteRequest."""
CONNECT_TIMEOUT_S = 10.0
_OK, _NOT_FOUND, _ALREADY_EXISTS = 0, 5, 6  # google.rpc.Code values in an arbitration answer


def default_election_id() -> int:
    """An election id that a restarted controller wins over its dead predecessor: the wall
    clock in ms. (P4Runtime spec 5.1: the highest election id is primary.)"""
    return time.time_ns() // 1_000_000


@dataclass
class WriteCounts:
    """What one reconciliation did to one switch.

    Attributes:
        pipeline_pushed: whether SetForwardingPipelineConfig was sent.
        cookie_before: the cookie the switch reported (None: no pipeline).
        entries_read: table entries read back.
        inserted, modified, deleted: updates written, per type.
        write_requests: WriteRequest messages sent.
    """

    pipeline_pushed: bool = False
    cookie_before: int | None = None
    entries_read: int = 0
    inserted: int = 0
    modified: int = 0
    deleted: int = 0
    write_requests: int = 0

    @property
    def writes(self) -> int:
        """Updates written: inserted + modified + deleted."""
        return self.inserted + self.modified + self.deleted

    def as_dict(self) -> dict:
        """Plain data for the status."""
        return {"pipeline_pushed": self.pipeline_pushed, "cookie_before": self.cookie_before,
                "entries_read": self.entries_read, "inserted": self.inserted, "modified": self.modified,
                "deleted": self.deleted, "write_requests": self.write_requests}


def _credentials(target: SwitchTarget) -> fy.GRPCCredentialsTLS | None:
    tls = target.tls
    if tls is None:
        return None
    for what, path in (("ca", tls.ca), ("cert", tls.cert), ("key", tls.key)):
        if path and not Path(path).is_file():
            raise MrcError(f"switch {target.name}: tls {what} {path}: no such file")
    return fy.GRPCCredentialsTLS(cacert=Path(tls.ca), cert=Path(tls.cert) if tls.cert else None,
                                 private_key=Path(tls.key) if tls.key else None,
                                 target_name_override=tls.server_name or "")


def _u128(value: int) -> p4r.Uint128:
    return p4r.Uint128(high=value >> 64, low=value & (2**64 - 1))


@dataclass
class SwitchSession:
    """An open, primary P4Runtime session with one switch. Use :func:`open_session`.

    Attributes:
        target: the switch. pipeline: what we program. election_id: ours.
        counts: what this session wrote (see :class:`WriteCounts`).
        lost: set when the stream ends (switch restarted, another controller took over).
    """

    target: SwitchTarget
    pipeline: Pipeline
    election_id: int
    client: fy.P4Client
    counts: WriteCounts = field(default_factory=WriteCounts)
    lost: asyncio.Event = field(default_factory=asyncio.Event)
    _reader: asyncio.Task | None = None

    # --- requests -------------------------------------------------------------------------
    def _complete(self, msg) -> None:
        """Stamp device id (and election id where P4Runtime wants it) on every request."""
        msg.device_id = self.target.device_id
        if isinstance(msg, (p4r.WriteRequest, p4r.SetForwardingPipelineConfigRequest)):
            msg.election_id.CopyFrom(_u128(self.election_id))

    async def _request(self, msg, what: str):
        try:
            return await self.client.request(msg)
        except fy.P4ClientError as exc:
            raise MrcError(f"switch {self.target.name} ({self.target.address}): {what}: {exc}") from None

    async def switch_cookie(self) -> int | None:
        """The switch's pipeline cookie (GetForwardingPipelineConfig COOKIE_ONLY); None when
        it has no pipeline (FAILED_PRECONDITION) or no cookie."""
        req = p4r.GetForwardingPipelineConfigRequest(
            response_type=p4r.GetForwardingPipelineConfigRequest.COOKIE_ONLY)
        try:
            reply = await self.client.request(req)
        except fy.P4ClientError as exc:
            if exc.is_pipeline_missing:
                return None
            raise MrcError(f"switch {self.target.name}: GetForwardingPipelineConfig: {exc}") from None
        return reply.config.cookie.cookie if reply.config.HasField("cookie") else None

    async def ensure_pipeline(self) -> bool:
        """Push the pipeline (VERIFY_AND_COMMIT) unless the switch's cookie equals ours.
        Returns whether it pushed. Raises MrcError when the switch refuses it."""
        cookie = await self.switch_cookie()
        self.counts.cookie_before = cookie
        if cookie == self.pipeline.cookie:
            return False
        log.info("switch %s: cookie %s, ours %#x: pushing the pipeline", self.target.name,
                 "none" if cookie is None else f"{cookie:#x}", self.pipeline.cookie)
        await self._request(p4r.SetForwardingPipelineConfigRequest(
            action=p4r.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT, config=self.pipeline.config()),
            "SetForwardingPipelineConfig")
        self.counts.pipeline_pushed = True
        return True

    async def read_entries(self, tables: Iterable[str] = TABLE_NAMES) -> list[TableEntry]:
        """Every (non-default) entry of ``tables``, as target-neutral :class:`TableEntry`."""
        schema = self.pipeline.schema
        req = p4r.ReadRequest()
        for name in tables:
            req.entities.add().table_entry.table_id = schema.tables[name].id
        out = []
        try:
            async for reply in self.client.request_iter(req):
                out += [_decode(schema, e.table_entry) for e in reply.entities
                        if e.HasField("table_entry") and not e.table_entry.is_default_action]
        except fy.P4ClientError as exc:
            raise MrcError(f"switch {self.target.name}: Read: {exc}") from None
        self.counts.entries_read += len(out)
        return out

    async def read_ecmp(self) -> EcmpTables:
        """EV-hash mode: every ``ecmp_selector`` member and group and every ``ipv6_fib`` route.

        Raises:
            MrcError: the switch refused the Read, or the P4Info has no EV-hash tables.
        """
        schema = self.pipeline.schema
        _check_ecmp_schema(schema, f"switch {self.target.name}")
        req = p4r.ReadRequest()
        req.entities.add().action_profile_member.action_profile_id = schema.action_profiles[ECMP_SELECTOR].id
        req.entities.add().action_profile_group.action_profile_id = schema.action_profiles[ECMP_SELECTOR].id
        req.entities.add().table_entry.table_id = schema.tables[IPV6_FIB].id
        members, groups, routes = [], [], []
        try:
            async for reply in self.client.request_iter(req):
                for e in reply.entities:
                    if e.HasField("action_profile_member"):
                        members.append(_decode_member(schema, e.action_profile_member))
                    elif e.HasField("action_profile_group"):
                        groups.append(_decode_group(e.action_profile_group))
                    elif e.HasField("table_entry") and not e.table_entry.is_default_action:
                        routes.append(_decode_route(schema, e.table_entry))
        except fy.P4ClientError as exc:
            raise MrcError(f"switch {self.target.name}: Read (ecmp_selector, ipv6_fib): {exc}") from None
        self.counts.entries_read += len(members) + len(groups) + len(routes)
        return EcmpTables(tuple(sorted(members, key=lambda m: m.member_id)),
                          tuple(sorted(groups, key=lambda g: g.group_id)), tuple(routes))

    async def write(self, diff: EntryDiff, batch: int = WRITE_BATCH) -> None:
        """Write ``diff``: inserts and modifies first, then deletes (the switch never lacks
        a route it should have while stale ones go), ``batch`` updates per WriteRequest.

        Raises:
            MrcError: the switch refused an update (its per-update errors are in the message).
        """
        updates = [("insert", e) for e in diff.insert] + [("modify", e) for e in diff.modify] + \
                  [("delete", e) for e in diff.delete]
        await self._write_phase(updates, batch)

    async def write_ecmp(self, diff: EcmpDiff, batch: int = WRITE_BATCH) -> None:
        """Write an EV-hash mode difference, phase by phase (``EcmpDiff.phases``: members,
        groups, routes; then deletes in the reverse order), each phase in its own requests.

        Raises:
            MrcError: the switch refused an update; the phases after it are not written.
        """
        for phase in diff.phases():
            await self._write_phase(phase, batch)

    async def _write_phase(self, updates: list[tuple[str, object]], batch: int) -> None:
        types = {"insert": p4r.Update.INSERT, "modify": p4r.Update.MODIFY, "delete": p4r.Update.DELETE}
        for start in range(0, len(updates), batch):
            chunk = updates[start:start + batch]
            req = p4r.WriteRequest(atomicity=p4r.WriteRequest.CONTINUE_ON_ERROR)
            for kind, e in chunk:
                req.updates.add(type=types[kind], entity=_encode(self.pipeline.schema, e))
            self.counts.write_requests += 1
            await self._request(req, "Write")
            for kind, _ in chunk:
                if kind == "insert":
                    self.counts.inserted += 1
                elif kind == "modify":
                    self.counts.modified += 1
                else:
                    self.counts.deleted += 1

    async def reconcile(self, desired: Iterable[TableEntry], ecmp: EcmpTables | None = None) -> EntryDiff:
        """Pipeline by cookie, then Read, diff and write only the difference (design 7).
        With ``ecmp`` (EV-hash mode), the members, groups and routes too: members and groups
        are written before the table entries and routes, deletes after them. Returns the
        table-entry difference written."""
        await self.ensure_pipeline()
        diff = diff_entries(desired, await self.read_entries())
        ecmp_diff = diff_ecmp(ecmp, await self.read_ecmp()) if ecmp is not None else EcmpDiff()
        if diff or ecmp_diff:
            log.info("switch %s: writing %s%s", self.target.name, diff.summary(),
                     f"; {ecmp_diff.summary()}" if ecmp is not None else "")
        phases = ecmp_diff.phases()
        # Table entries go with the route upserts: after members and groups, before deletes.
        upserts = [p for p in phases if p[0][0] != "delete"]
        deletes = [p for p in phases if p[0][0] == "delete"]
        for phase in upserts:
            await self._write_phase(phase, WRITE_BATCH)
        await self.write(diff)
        for phase in deletes:
            await self._write_phase(phase, WRITE_BATCH)
        return diff

    async def close(self) -> None:
        """Close the stream and channel (the switch keeps its state)."""
        if self._reader is not None:
            self._reader.cancel()
            try:
                await self._reader
            except (asyncio.CancelledError, Exception):  # noqa: BLE001 - closing anyway
                pass
        await self.client.close()

    async def _read_stream(self) -> None:
        """Watch the stream: we stay primary while it is open; any end or demotion = lost."""
        try:
            while True:
                msg = await self.client.receive()
                if msg.HasField("arbitration") and msg.arbitration.status.code != _OK:
                    log.warning("switch %s: no longer primary: %s", self.target.name, msg.arbitration.status.message)
                    return
        except (fy.P4ClientError, RuntimeError) as exc:
            log.warning("switch %s: stream ended: %s", self.target.name, exc)
        finally:
            self.lost.set()


async def open_session(target: SwitchTarget, pipeline: Pipeline, election_id: int | None = None,
                       timeout: float = CONNECT_TIMEOUT_S) -> SwitchSession:
    """Connect to ``target``, arbitrate with ``election_id`` (default: :func:`default_election_id`)
    and return the primary session.

    Raises:
        MrcError: unreachable within ``timeout`` s, TLS files missing, or another controller
            holds a higher election id (we would only be a backup).
    """
    election_id = default_election_id() if election_id is None else election_id
    client = fy.P4Client(target.address, _credentials(target), wait_for_ready=True)
    session = SwitchSession(target, pipeline, election_id, client)
    await client.open(schema=pipeline.schema, complete_request=session._complete)
    try:
        answer = await asyncio.wait_for(_become_primary(session), timeout)
    except (asyncio.TimeoutError, fy.P4ClientError, RuntimeError) as exc:
        await client.close()
        why = "no answer" if isinstance(exc, asyncio.TimeoutError) else str(exc)
        raise MrcError(f"switch {target.name}: cannot reach its P4Runtime server at {target.address} "
                       f"(device id {target.device_id}): {why}") from None
    except BaseException:  # cancelled: leave no channel open
        await client.close()
        raise
    if answer.status.code != _OK:
        await client.close()
        held = (answer.election_id.high << 64) | answer.election_id.low
        raise MrcError(f"switch {target.name}: not primary (election id {election_id}, primary {held}): "
                       f"{answer.status.message or answer.status.code}")
    session._reader = asyncio.create_task(session._read_stream(), name=f"p4rt-stream-{target.name}")
    return session


async def _become_primary(session: SwitchSession):
    """Arbitrate; if the role has no primary but has seen a higher id than ours (a predecessor
    whose clock ran ahead), arbitrate once more just above that ``election_id_past`` (P4Runtime
    spec 5.3: only an id >= election_id_past becomes primary). Returns the last answer; never
    takes over from a live primary (ALREADY_EXISTS is returned as is)."""
    answer = await _arbitrate(session)
    past = (answer.election_id.high << 64) | answer.election_id.low
    if answer.status.code == _NOT_FOUND and past >= session.election_id:
        log.info("switch %s: no primary, election_id_past %d >= ours; arbitrating with %d",
                 session.target.name, past, past + 1)
        session.election_id = past + 1
        answer = await _arbitrate(session)
    return answer


async def _arbitrate(session: SwitchSession):
    msg = p4r.StreamMessageRequest()
    msg.arbitration.device_id = session.target.device_id
    msg.arbitration.election_id.CopyFrom(_u128(session.election_id))
    await session.client.send(msg)
    while True:
        reply = await session.client.receive()
        if reply.HasField("arbitration"):
            return reply.arbitration


# --- entry codec (P4 names <-> P4Runtime ids, values as ints) --------------------------------
def check_ecmp_pipeline(pipeline: Pipeline) -> None:
    """Refuse a pipeline without EV-hash mode's table and action profile.

    Raises:
        MrcError: no ``ipv6_fib`` table or no ``ecmp_selector`` action profile in its P4Info.
    """
    _check_ecmp_schema(pipeline.schema, f"P4Info {pipeline.p4info_path}")


def _check_ecmp_schema(schema: fy.P4Schema, where: str) -> None:
    try:
        schema.tables[IPV6_FIB], schema.action_profiles[ECMP_SELECTOR]
    except (KeyError, ValueError):
        raise MrcError(f"{where}: no table {IPV6_FIB} or action profile {ECMP_SELECTOR}: EV-hash mode "
                       f"(--mode ecmp) needs the P4 program that has them on every switch (run `make p4`)") from None


def _entity(e) -> fy.P4TableEntry | fy.P4ActionProfileMember | fy.P4ActionProfileGroup:
    """Our target-neutral entity as finsy's.

    Raises:
        MrcError: a direct entry or a member to write that names no action.
    """
    if isinstance(e, TableEntry) and e.target is not None:
        action = fy.P4IndirectAction(member_id=e.member) if e.member is not None else \
            fy.P4IndirectAction(group_id=e.group)
        return fy.P4TableEntry(e.table, match=fy.P4TableMatch(e.match), action=action)
    if isinstance(e, TableEntry):
        return fy.P4TableEntry(e.table, match=fy.P4TableMatch(e.match), action=_action(e, e.action, e.params))
    if isinstance(e, ActionProfileMember):
        return fy.P4ActionProfileMember(e.profile, member_id=e.member_id, action=_action(e, e.action, e.params))
    if isinstance(e, ActionProfileGroup):
        return fy.P4ActionProfileGroup(e.profile, group_id=e.group_id,
                                       members=[fy.P4Member(m, weight=1) for m in e.members])
    raise TypeError(f"cannot write {type(e).__name__}")


def _action(e: object, action: str | None, params: dict[str, int]) -> fy.P4TableAction:
    if action is None:
        raise MrcError(f"{e}: names no action, and a write needs one")
    return fy.P4TableAction(action, **params)


def _encode(schema: fy.P4Schema, e) -> p4r.Entity:
    """A table entry, ``ipv6_fib`` route, action profile member or group as a P4Runtime Entity.

    Raises:
        MrcError: it does not fit the P4Info (unknown name, value too wide).
    """
    try:
        return _entity(e).encode(schema)
    except (ValueError, KeyError) as exc:
        raise MrcError(f"entry {e} does not fit the P4Info: {exc}") from None


def _params(schema: fy.P4Schema, action) -> tuple[str, dict[str, int]]:
    info = schema.actions[action.action_id]
    return info.alias, {info.params[p.param_id].name: int.from_bytes(p.value, "big") for p in action.params}


def _decode_member(schema: fy.P4Schema, m) -> ActionProfileMember:
    action, params = _params(schema, m.action)
    return ActionProfileMember(m.member_id, action, params, schema.action_profiles[m.action_profile_id].alias)


def _decode_group(g) -> ActionProfileGroup:
    # Weights are always 1 in what we write; a switch reporting another weight differs from
    # the desired group, so keep the member twice rather than hide it (the diff then modifies).
    members = [m.member_id for m in g.members for _ in range(max(1, m.weight))]
    return ActionProfileGroup(g.group_id, tuple(sorted(members)))


def _decode_route(schema: fy.P4Schema, te) -> TableEntry:
    (m,) = te.match
    prefix = ipaddress.IPv6Network((int.from_bytes(m.lpm.value, "big"), m.lpm.prefix_len), strict=False)
    which = te.action.WhichOneof("type")
    if which == "action_profile_member_id":
        return TableEntry.route(prefix, member=te.action.action_profile_member_id)
    if which == "action_profile_group_id":
        return TableEntry.route(prefix, group=te.action.action_profile_group_id)
    # A direct action in an indirect table is not something we write: a route to member 0
    # differs from every desired route, so the diff replaces it.
    return TableEntry.route(prefix, member=0)


def _decode(schema: fy.P4Schema, te) -> TableEntry:
    table = schema.tables[te.table_id]
    match: dict[str, int | tuple[int, int]] = {
        table.match_fields[m.field_id].name: int.from_bytes(m.exact.value, "big") for m in te.match}
    action = schema.actions[te.action.action.action_id]
    params = {action.params[p.param_id].name: int.from_bytes(p.value, "big") for p in te.action.action.params}
    return TableEntry(table.alias, match, action.alias, params)
