"""A synchronous face on finsy's asyncio ``Switch`` for tests: its event loop runs in a thread,
and table entries of the tables model become P4Runtime writes by P4 names.

finsy (a maintained P4Runtime client) does the arbitration, the pipeline push and the entity
encoding from the P4Info; this module only turns our entry types into finsy's.
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

from ..topology.entries import ActionProfileGroup, ActionProfileMember
from .tables import Entity

CALL_TIMEOUT_S = 30.0
"""A P4Runtime call on a loaded machine (bmv2 under load answers slowly)."""


class P4RuntimeClient:
    """One P4Runtime session (primary, election id finsy's default) to the server at
    ``address`` (``unix:/path`` or ``HOST:PORT``).

    ``p4info``: the program's P4Info (text or binary); ``device_config``: its bmv2 JSON, pushed
    with the P4Info when given (finsy pushes when the server's cookie differs); None leaves the
    server's pipeline alone (a remote switch that already runs it).

    Raises:
        Exception from finsy: the server cannot be reached or refused the pipeline.
    """

    def __init__(self, address: str, p4info: Path, device_config: Path | None, *, device_id: int = 1,
                 name: str = "mrckit-testing"):
        import finsy as fy

        self.fy = fy
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="finsy", daemon=True)
        self.thread.start()
        opts = fy.SwitchOptions(p4info=Path(p4info), p4blob=Path(device_config) if device_config else None,
                                device_id=device_id)
        self.switch = fy.Switch(name, address, opts)
        try:
            self.call(self.switch.__aenter__())
        except BaseException:
            self._stop_loop()
            raise

    def call(self, coro, timeout: float = CALL_TIMEOUT_S):
        """Run ``coro`` on the client's loop and return its result."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def read(self, entity) -> list:
        """Every entity the server returns for the read request ``entity``."""
        async def collect():
            return [e async for e in self.switch.read(entity)]
        return self.call(collect())

    def counter_names(self) -> list[str]:
        """The aliases of the program's indirect counters (from the P4Info)."""
        return [c.alias for c in self.switch.p4info.counters]

    def counters(self, names) -> dict[str, dict[int, tuple[int, int]]]:
        """Every named counter's non-zero cells: name -> index -> (packets, bytes)."""
        out = {}
        for name in names:
            cells = self.read(self.fy.P4CounterEntry(name))
            out[name] = {c.index: (c.packet_count, c.byte_count) for c in cells if c.packet_count or c.byte_count}
        return out

    def write(self, entry: Entity, *, modify: bool) -> None:
        """Insert (or modify) one entry of the tables model."""
        entity = self.entity(entry)
        self.call(self.switch.write([~entity if modify else +entity]))

    def delete(self, entry: Entity) -> None:
        """Delete one entry (the request names only its key)."""
        self.call(self.switch.write([-self.entity(entry, with_action=False)]))

    def entity(self, entry: Entity, with_action: bool = True):
        """The finsy entity of one entry of the tables model."""
        fy = self.fy
        if isinstance(entry, ActionProfileMember):
            act = fy.P4TableAction(entry.action, **entry.params) if with_action else None
            return fy.P4ActionProfileMember(entry.profile, member_id=entry.member_id, action=act)
        if isinstance(entry, ActionProfileGroup):
            members = [fy.P4Member(m, weight=1) for m in entry.members] if with_action else None
            return fy.P4ActionProfileGroup(entry.profile, group_id=entry.group_id, members=members)
        if entry.target is not None:
            act = fy.P4IndirectAction(**{f"{entry.target[0]}_id": entry.target[1]}) if with_action else None
        else:
            act = fy.P4TableAction(entry.action, **entry.params) if with_action and entry.action else None
        return fy.P4TableEntry(entry.table, match=fy.P4TableMatch(entry.match), action=act)

    def close(self) -> None:
        """End the session and stop the loop's thread."""
        try:
            self.call(self.switch.__aexit__(None, None, None))
        finally:
            self._stop_loop()

    def _stop_loop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)
        self.loop.close()
