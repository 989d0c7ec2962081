"""One P4Runtime device: pipeline config, arbitration, Write and Read over a backend.

Every method raises ``P4RuntimeError`` for a refused request; ``write`` returns the per-update
errors of a batch (None for an update that took effect). Thread-safe: one lock orders every
change of the pipeline and the tables. P4Runtime spec 1.4 sections 5, 7, 9, 11, 12, 13, 15.
"""

import logging
import threading
from dataclasses import dataclass, field
from pathlib import Path

import grpc
from finsy.proto import p4r

from ...wire.pipeline import Contract
from . import action_profiles, entries, store
from .arbitration import Arbiter, uint128
from .backend import Backend
from .errors import P4RuntimeError, invalid
from .memory_backend import MemoryBackend
from .p4info import Pipeline
from .view import TableView

log = logging.getLogger(__name__)
NO_PIPELINE = "No forwarding pipeline config set for this device"
Action = p4r.SetForwardingPipelineConfigRequest
Response = p4r.GetForwardingPipelineConfigRequest


class Device:
    """The P4Runtime view of one switch: ``backend`` is its tables, ``contract`` its program."""

    def __init__(self, backend: Backend, contract: Contract, device_id: int = 1, state_dir: Path | None = None):
        self.backend = backend
        self.contract = contract
        self.device_id = device_id
        self.state_dir = state_dir
        self.arbiter = Arbiter(device_id)
        self._lock = threading.RLock()
        self._config: p4r.ForwardingPipelineConfig | None = None
        self._pending: Pending | None = None  # VERIFY_AND_SAVE awaiting COMMIT
        self.view: TableView | None = None
        self._sizes: dict[int, int] = {}  # the group max_sizes last stored
        self._metadata: dict = {}  # the entry metadata last stored
        self._restore()

    def _restore(self) -> None:
        """Take back the pipeline stored for these maps and rebuild the view from them."""
        if self.state_dir is None:
            return
        config = store.load(self.state_dir, self.backend.identity())
        if config is None:
            return
        try:
            pipeline = Pipeline.build(config.p4info, self.contract)
        except P4RuntimeError as exc:
            log.warning("ignoring the stored pipeline: %s", exc.message)
            return
        self._config, self.view = config, TableView(self.backend, pipeline)
        self.view.load(store.load_group_sizes(self.state_dir, self.backend.identity()))
        self.view.set_metadata(store.load_metadata(self.state_dir, self.backend.identity()))
        self._sizes = self.view.profiles.max_sizes()
        self._metadata = self.view.metadata()

    # -- pipeline ---------------------------------------------------------------------------
    def set_pipeline(self, req: p4r.SetForwardingPipelineConfigRequest) -> None:
        """SetForwardingPipelineConfig, every action as spec 1.4 section 14 and the proto say.

        VERIFY checks the config and changes nothing. VERIFY_AND_SAVE checks and saves it
        without touching the forwarding state; until COMMIT, Writes and Reads address the
        saved config (its tables start empty) and the successful writes are logged. COMMIT
        (which must carry no config) realizes the saved config: the tables are cleared and the
        logged writes replayed. VERIFY_AND_COMMIT realizes the given config with cleared
        tables; RECONCILE_AND_COMMIT keeps the entries. A COMMIT of either kind drops a saved,
        uncommitted config. The P4Info must match the contract; device config and cookie are
        stored untouched.

        Raises ``P4RuntimeError``: PERMISSION_DENIED (not the primary), INVALID_ARGUMENT
        (unspecified action, no P4Info, a config with COMMIT, a P4Info the program does not
        match), FAILED_PRECONDITION (COMMIT with nothing saved), INTERNAL (the target refused a
        replayed write; the config is committed with the others).
        """
        self._check_device(req.device_id)
        self.arbiter.check_primary(req.role, _election(req))
        with self._lock:
            if req.action == Action.COMMIT:
                if req.HasField("config"):
                    raise invalid("COMMIT carries no config: it realizes the one saved by VERIFY_AND_SAVE")
                return self._commit_saved()
            if req.action not in (Action.VERIFY, Action.VERIFY_AND_SAVE, Action.VERIFY_AND_COMMIT,
                                  Action.RECONCILE_AND_COMMIT):
                raise invalid(f"SetForwardingPipelineConfig action {req.action} is unspecified or unknown")
            if not req.HasField("config") or not req.config.HasField("p4info"):
                raise invalid("SetForwardingPipelineConfig carries no P4Info")
            pipeline = Pipeline.build(req.config.p4info, self.contract)
            if req.action == Action.VERIFY:
                return None
            if req.action == Action.VERIFY_AND_SAVE:
                self._pending = Pending.start(req.config, pipeline)
                return None
            self._pending = None
            return self._commit(req.config, pipeline, reconcile=req.action == Action.RECONCILE_AND_COMMIT)

    def _commit_saved(self) -> None:
        pending = self._pending
        if pending is None:
            raise P4RuntimeError(grpc.StatusCode.FAILED_PRECONDITION, "COMMIT without a saved config (VERIFY_AND_SAVE first)")
        self._pending = None
        self._commit(pending.config, pending.pipeline, reconcile=False)
        refused = [(i, exc) for i, exc in enumerate(self._write(self._need_view(), pending.log, rollback=False)) if exc]
        self._store_group_sizes()
        self._store_metadata()
        if refused:
            i, exc = refused[0]
            raise P4RuntimeError(grpc.StatusCode.INTERNAL, f"COMMIT: the target refused {len(refused)} of the "
                                 f"{len(pending.log)} writes made since VERIFY_AND_SAVE; the first (#{i}): {exc}")

    def _commit(self, config, pipeline: Pipeline, reconcile: bool) -> None:
        view = TableView(self.backend, pipeline)
        view.load(self._known_sizes())  # the maps are the truth, also after a RECONCILE
        if reconcile:
            view.adopt_metadata(self.view)
        else:
            view.clear()
        stored = p4r.ForwardingPipelineConfig()
        stored.CopyFrom(config)
        if self.state_dir is not None:
            store.save(self.state_dir, self.backend.identity(), stored)
        self._config, self.view = stored, view
        self._store_group_sizes()
        self._store_metadata()

    def _known_sizes(self) -> dict[int, int]:
        if self.view is not None:
            return self.view.profiles.max_sizes()
        return store.load_group_sizes(self.state_dir, self.backend.identity()) if self.state_dir else {}

    def _store_group_sizes(self) -> None:
        sizes = self._need_view().profiles.max_sizes()
        if sizes != self._sizes and self.state_dir is not None:
            store.save_group_sizes(self.state_dir, self.backend.identity(), sizes)
        self._sizes = sizes

    def _store_metadata(self) -> None:
        metadata = self._need_view().metadata()
        if metadata != self._metadata and self.state_dir is not None:
            store.save_metadata(self.state_dir, self.backend.identity(), metadata)
        self._metadata = metadata

    def get_pipeline(self, req: p4r.GetForwardingPipelineConfigRequest) -> p4r.GetForwardingPipelineConfigResponse:
        """GetForwardingPipelineConfig with the requested response type."""
        self._check_device(req.device_id)
        with self._lock:
            config = self._config
        if config is None:
            raise P4RuntimeError(grpc.StatusCode.FAILED_PRECONDITION, NO_PIPELINE)
        reply = p4r.GetForwardingPipelineConfigResponse()
        if config.HasField("cookie"):
            reply.config.cookie.CopyFrom(config.cookie)
        kind = req.response_type
        if kind in (Response.ALL, Response.P4INFO_AND_COOKIE):
            reply.config.p4info.CopyFrom(config.p4info)
        if kind in (Response.ALL, Response.DEVICE_CONFIG_AND_COOKIE):
            reply.config.p4_device_config = config.p4_device_config
        return reply

    # -- write ------------------------------------------------------------------------------
    def write(self, req: p4r.WriteRequest) -> list:
        """Apply a WriteRequest; return one ``P4RuntimeError`` or None per update.

        CONTINUE_ON_ERROR (the default) applies every valid update; ROLLBACK_ON_ERROR undoes
        the batch at the first error (later updates are reported ABORTED); DATAPLANE_ATOMIC is
        UNIMPLEMENTED. A refused update leaves the maps unchanged.
        """
        self._check_device(req.device_id)
        self.arbiter.check_primary(req.role, _election(req))
        if req.atomicity == p4r.WriteRequest.DATAPLANE_ATOMIC:
            raise P4RuntimeError(grpc.StatusCode.UNIMPLEMENTED, "DATAPLANE_ATOMIC writes are not supported")
        rollback = req.atomicity == p4r.WriteRequest.ROLLBACK_ON_ERROR
        with self._lock:
            pending = self._pending
            if pending is not None:
                results = self._write(pending.view, req.updates, rollback)
                pending.log += [_copy(u) for u, r in zip(req.updates, results) if r is None]
                return results
            view = self._need_view()
            try:
                return self._write(view, req.updates, rollback)
            finally:
                self._store_group_sizes()
                self._store_metadata()

    def _write(self, view: TableView, updates, rollback: bool) -> list:
        results: list[P4RuntimeError | None] = []
        undo = []
        for update in updates:
            try:
                undo.append(self._apply(view, update))
                results.append(None)
            except P4RuntimeError as exc:
                results.append(exc)
            except Exception as exc:  # a bug must not end the RPC or the server: INTERNAL, logged
                log.exception("applying a %s update failed", update.entity.WhichOneof("entity"))
                results.append(P4RuntimeError(grpc.StatusCode.INTERNAL, f"update failed: {exc}"))
            if results[-1] is not None and rollback:
                return self._roll_back(undo, results, len(updates))
        return results

    @staticmethod
    def _roll_back(undo: list, results: list, total: int) -> list:
        for fn in reversed(undo):
            fn()
        aborted = P4RuntimeError(grpc.StatusCode.ABORTED, "rolled back: another update of the batch failed")
        results = [aborted if r is None else r for r in results]
        return results + [aborted] * (total - len(results))

    def _apply(self, view: TableView, update: p4r.Update):
        kind = update.type
        if kind not in (p4r.Update.INSERT, p4r.Update.MODIFY, p4r.Update.DELETE):
            raise invalid(f"update type {kind} is not INSERT, MODIFY or DELETE")
        which = update.entity.WhichOneof("entity")
        change = kind != p4r.Update.DELETE
        if which == "table_entry":
            msg = update.entity.table_entry
            entry = entries.parse(view.pipeline, msg, need_action=change)
            return view.apply(kind, entry, entries.metadata_of(msg) if change else entries.NO_METADATA)
        if which == "action_profile_member":
            member = action_profiles.parse_member(view.pipeline, update.entity.action_profile_member, need_action=change)
            return view.profiles.apply_member(kind, member)
        if which == "action_profile_group":
            group, max_size = action_profiles.parse_group(view.pipeline, update.entity.action_profile_group,
                                                          need_members=change)
            return view.profiles.apply_group(kind, group, max_size)
        raise P4RuntimeError(grpc.StatusCode.UNIMPLEMENTED, f"writing {which or 'an empty entity'} is not supported")

    # -- read -------------------------------------------------------------------------------
    def read(self, req: p4r.ReadRequest) -> tuple[list, list]:
        """The entities a ReadRequest selects, and one ``P4RuntimeError`` or None per request
        of the batch (spec 1.4 section 13.3: the valid requests are answered, the invalid ones
        reported in order). Table entries (wildcard, by table, by key, default entries, with
        the filters of section 9.1.6), counter entries (all counters, one counter, one index),
        action profile members and groups (all, or by id).

        Raises ``P4RuntimeError`` for the whole request: NOT_FOUND (device id),
        FAILED_PRECONDITION (no pipeline).
        """
        self._check_device(req.device_id)
        with self._lock:
            view = self._pending.view if self._pending is not None else self._need_view()
            found: list = []
            errors: list[P4RuntimeError | None] = []
            for entity in req.entities:
                try:
                    found += list(self._read_one(view, entity))
                    errors.append(None)
                except P4RuntimeError as exc:
                    errors.append(exc)
                except Exception as exc:  # a bug must not take the server down: INTERNAL, logged
                    log.exception("reading %s failed", entity.WhichOneof("entity"))
                    errors.append(P4RuntimeError(grpc.StatusCode.INTERNAL, f"read failed: {exc}"))
            return found, errors

    def _read_one(self, view: TableView, entity: p4r.Entity):
        which = entity.WhichOneof("entity")
        if which == "table_entry":
            return [p4r.Entity(table_entry=e) for e in self._read_tables(view, entity.table_entry)]
        if which == "counter_entry":
            return [p4r.Entity(counter_entry=c) for c in self._read_counters(view, entity.counter_entry)]
        if which == "action_profile_member":
            return [p4r.Entity(action_profile_member=m) for m in _read_members(view, entity.action_profile_member)]
        if which == "action_profile_group":
            return [p4r.Entity(action_profile_group=g) for g in _read_groups(view, entity.action_profile_group)]
        if which == "packet_replication_engine_entry":
            return []  # the program has no multicast groups or clone sessions: none to read
        if which is None:
            raise invalid("an Entity with no entity set (a wildcard over every kind is not allowed, spec 13.2)")
        raise P4RuntimeError(grpc.StatusCode.UNIMPLEMENTED, f"reading {which} is not supported")

    @staticmethod
    def _read_tables(view: TableView, query: p4r.TableEntry):
        """Entries of the table (every table for id 0) that the query's key (if any) and
        filters (``entries.selects``) select; the default entry alone for is_default_action."""
        entries.check_filters(query)
        tables = [entries.table_of(view.pipeline, query.table_id)] if query.table_id else list(view.pipeline.tables.values())
        for table in tables:
            if query.is_default_action:
                yield entries.to_proto(table, view.defaults[table.name])
                continue
            rows = view.entries[table.name]
            if query.match:
                key = tuple(entries.parse_match(table, query.match).values())  # in P4Info field order
                found = [rows[key]] if key in rows else []
            else:
                found = list(rows.values())
            for entry in found:
                meta = view.meta.get((table.name, entries.key_of(table, entry)), entries.NO_METADATA)
                if entries.selects(query, table, entry, meta):
                    yield entries.to_proto(table, entry, meta)

    def _read_counters(self, view: TableView, query: p4r.CounterEntry):
        pipeline = view.pipeline
        if query.counter_id and query.counter_id not in pipeline.counters:
            raise invalid(f"unknown counter id {query.counter_id:#x}")
        counters = [pipeline.counters[query.counter_id]] if query.counter_id else list(pipeline.counters.values())
        for counter in counters:
            cells = self.backend.read_counter(counter.name)
            if query.HasField("index"):
                if not 0 <= query.index.index < counter.size:
                    raise invalid(f"counter {counter.name!r}: index {query.index.index} outside 0..{counter.size - 1}")
                indexes: range | list[int] = [query.index.index]
            else:
                indexes = range(counter.size)
            for i in indexes:
                packets, nbytes = cells[i]
                msg = p4r.CounterEntry(counter_id=counter.id)
                msg.index.index = i
                msg.data.packet_count, msg.data.byte_count = packets, nbytes
                yield msg

    # -- helpers ----------------------------------------------------------------------------
    def _need_view(self) -> TableView:
        if self.view is None:
            raise P4RuntimeError(grpc.StatusCode.FAILED_PRECONDITION, NO_PIPELINE)
        return self.view

    def _check_device(self, device_id: int) -> None:
        if device_id != self.device_id:
            raise P4RuntimeError(grpc.StatusCode.NOT_FOUND, f"unknown device id {device_id}, this is device {self.device_id}")

    def capabilities(self) -> p4r.CapabilitiesResponse:
        """The P4Runtime API version this server implements."""
        return p4r.CapabilitiesResponse(p4runtime_api_version=API_VERSION)


API_VERSION = "1.4.0"


def _read_members(view: TableView, query: p4r.ActionProfileMember):
    """Members selected by ``query`` (spec 9.2.1: profile id 0 = every profile, member id 0 =
    every member of the profile)."""
    if query.action_profile_id:
        action_profiles.profile_of(view.pipeline, query.action_profile_id)
    profile = view.profiles.profile
    if profile is None:  # no action profile in the P4Info: no members
        return
    for member_id in _select(view.profiles.members, query.member_id):
        yield action_profiles.member_proto(profile, view.profiles.members[member_id])


def _read_groups(view: TableView, query: p4r.ActionProfileGroup):
    """Groups selected by ``query`` (spec 9.2.2: profile id 0 = every selector, group id 0 =
    every group of the selector)."""
    if query.action_profile_id:
        action_profiles.profile_of(view.pipeline, query.action_profile_id)
    profile = view.profiles.profile
    if profile is None:  # no action profile in the P4Info: no groups
        return
    for group_id in _select(view.profiles.groups, query.group_id):
        yield action_profiles.group_proto(profile, view.profiles.groups[group_id],
                                          view.profiles.sizes.get(group_id, 0))


def _select(items: dict, wanted: int) -> list[int]:
    """The ids a read selects: every id, ascending, for ``wanted`` 0; else ``wanted`` if present."""
    if wanted == 0:
        return sorted(items)
    return [wanted] if wanted in items else []


@dataclass
class Pending:
    """A config saved by VERIFY_AND_SAVE: its pipeline, the tables its writes build (in
    memory), and those writes, in order, for COMMIT to replay."""

    config: p4r.ForwardingPipelineConfig
    pipeline: Pipeline
    view: TableView
    log: list = field(default_factory=list)

    @classmethod
    def start(cls, config: p4r.ForwardingPipelineConfig, pipeline: Pipeline) -> "Pending":
        """A saved config with empty tables and initial default actions."""
        saved = p4r.ForwardingPipelineConfig()
        saved.CopyFrom(config)
        view = TableView(MemoryBackend(), pipeline)
        view.clear()
        return cls(saved, pipeline, view)


def _copy(update: p4r.Update) -> p4r.Update:
    kept = p4r.Update()
    kept.CopyFrom(update)
    return kept


def _election(req) -> int | None:
    return uint128(req.election_id) if req.HasField("election_id") else None
