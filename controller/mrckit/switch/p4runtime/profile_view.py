"""The server's view of the action profile members and groups, mirrored in a backend.

Like ``view.TableView`` for table entries: each change goes to the backend first and into the
view only if the backend took it, and ``apply_*`` return a function that undoes the change
(ROLLBACK_ON_ERROR). The view also counts who uses what, so a member still in a group or named
by a table entry, or a group still named by one, cannot be deleted (FAILED_PRECONDITION).
P4Runtime spec 1.4 section 9.2 (member and group programming). The program has one action
profile (``ecmp_selector``), so members and groups are keyed by their ids alone.
"""

from collections import Counter

import grpc
from finsy.proto import p4r

from ...topology.entries import ActionProfileGroup, ActionProfileMember
from .backend import Backend
from .entries import GROUP, MEMBER
from .errors import P4RuntimeError, backend_call
from .p4info import Pipeline, ProfileInfo

INSERT, MODIFY, DELETE = p4r.Update.INSERT, p4r.Update.MODIFY, p4r.Update.DELETE
NOT_FOUND, EXISTS = grpc.StatusCode.NOT_FOUND, grpc.StatusCode.ALREADY_EXISTS
IN_USE, FULL = grpc.StatusCode.FAILED_PRECONDITION, grpc.StatusCode.RESOURCE_EXHAUSTED


class ProfileView:
    """Members and groups by id; ``sizes`` the max_size of the groups given one at INSERT;
    ``refs`` counts the table entries naming each (kind, id)."""

    def __init__(self, backend: Backend, pipeline: Pipeline):
        self.backend = backend
        self.profile: ProfileInfo | None = next(iter(pipeline.profiles.values()), None)
        self.members: dict[int, ActionProfileMember] = {}
        self.groups: dict[int, ActionProfileGroup] = {}
        self.sizes: dict[int, int] = {}
        self.refs: Counter = Counter()

    def load(self, max_sizes: dict[int, int]) -> None:
        """Fill the view from the backend; ``max_sizes`` are the groups' stored max_size."""
        self.members.clear()
        self.groups.clear()
        self.sizes.clear()
        if self.profile is None:
            return
        for member in self.backend.read_members():
            self.members[member.member_id] = member
        for group in self.backend.read_groups():
            self.groups[group.group_id] = group
            if max_sizes.get(group.group_id):
                self.sizes[group.group_id] = max_sizes[group.group_id]

    def clear(self) -> None:
        """Delete every group, then every member (the table entries naming them are gone first)."""
        for group in list(self.groups.values()):
            self._delete_group(group)
        for member in list(self.members.values()):
            self._delete_member(member)

    def max_sizes(self) -> dict[int, int]:
        """{group id: max_size} of the groups created with a max_size (the maps do not hold it)."""
        return dict(sorted(self.sizes.items()))

    # -- references from table entries --------------------------------------------------------
    def check_ref(self, ref: tuple[str, int], where: str) -> None:
        """Raise NOT_FOUND unless the member or group exists; FAILED_PRECONDITION for an empty
        group (an entry naming it would drop every packet)."""
        kind, ref_id = ref
        if kind == MEMBER and ref_id not in self.members:
            raise P4RuntimeError(NOT_FOUND, f"{where}: action profile member {ref_id} does not exist")
        if kind == GROUP:
            group = self.groups.get(ref_id)
            if group is None:
                raise P4RuntimeError(NOT_FOUND, f"{where}: action profile group {ref_id} does not exist")
            if not group.members:
                raise P4RuntimeError(IN_USE, f"{where}: action profile group {ref_id} has no members")

    def _info(self, name: str) -> ProfileInfo:
        """The pipeline's action profile; NOT_FOUND when its P4Info declares none."""
        if self.profile is None:
            raise P4RuntimeError(NOT_FOUND, f"action profile {name!r}: the pipeline has no action profile")
        return self.profile

    # -- members --------------------------------------------------------------------------
    def apply_member(self, kind: int, member: ActionProfileMember):
        """Apply one member update; return a function that undoes it. Raises ``P4RuntimeError``."""
        where = f"action profile {member.profile!r} member {member.member_id}"
        old = self.members.get(member.member_id)
        if kind == INSERT and old is not None:
            raise P4RuntimeError(EXISTS, f"{where}: already exists")
        if kind in (MODIFY, DELETE) and old is None:
            raise P4RuntimeError(NOT_FOUND, f"{where}: no such member")
        profile = self._info(member.profile)
        if kind == INSERT and len(self.members) >= profile.size:
            raise P4RuntimeError(FULL, f"action profile {member.profile!r} is full ({profile.size} members)")
        if kind == DELETE:
            assert old is not None  # a DELETE of a missing member is NOT_FOUND above
            self._check_unused_member(where, old)
            self._delete_member(old)
            return lambda: self._put_member(old, modify=False)
        self._put_member(member, modify=old is not None)
        if old is None:
            return lambda: self._delete_member(member)
        return lambda: self._put_member(old, modify=True)

    def _check_unused_member(self, where: str, member: ActionProfileMember) -> None:
        groups = sorted(g.group_id for g in self.groups.values() if member.member_id in g.members)
        if groups:
            raise P4RuntimeError(IN_USE, f"{where}: still in group(s) {groups}; modify them first")
        if self.refs[(MEMBER, member.member_id)]:
            raise P4RuntimeError(IN_USE, f"{where}: still named by {self.refs[(MEMBER, member.member_id)]} table entries")

    def _put_member(self, member: ActionProfileMember, modify: bool) -> None:
        backend_call(self.backend.write_member, member, modify)
        self.members[member.member_id] = member

    def _delete_member(self, member: ActionProfileMember) -> None:
        backend_call(self.backend.delete_member, member.member_id)
        del self.members[member.member_id]

    # -- groups ---------------------------------------------------------------------------
    def apply_group(self, kind: int, group: ActionProfileGroup, max_size: int = 0):
        """Apply one group update (``max_size`` as given, 0: none); return a function that
        undoes it. Raises ``P4RuntimeError``."""
        where = f"action profile {group.profile!r} group {group.group_id}"
        old = self.groups.get(group.group_id)
        old_size = self.sizes.get(group.group_id, 0)
        if kind == INSERT and old is not None:
            raise P4RuntimeError(EXISTS, f"{where}: already exists")
        if kind in (MODIFY, DELETE) and old is None:
            raise P4RuntimeError(NOT_FOUND, f"{where}: no such group")
        if kind == DELETE:
            if self.refs[(GROUP, group.group_id)]:
                raise P4RuntimeError(IN_USE, f"{where}: still named by {self.refs[(GROUP, group.group_id)]} table entries")
            assert old is not None  # a DELETE of a missing group is NOT_FOUND above
            self._delete_group(old)
            return lambda: self._put_group(old, old_size, modify=False)
        profile = self._info(group.profile)
        if kind == INSERT and len(self.groups) >= profile.spec.max_groups:
            raise P4RuntimeError(FULL, f"action profile {group.profile!r} holds at most "
                                       f"{profile.spec.max_groups} groups")
        if old is not None and max_size != old_size:
            raise P4RuntimeError(grpc.StatusCode.INVALID_ARGUMENT,
                                 f"{where}: max_size {max_size} differs from {old_size} given at INSERT")
        missing = [m for m in group.members if m not in self.members]
        if missing:
            raise P4RuntimeError(NOT_FOUND, f"{where}: member(s) {missing} do not exist")
        self._put_group(group, max_size, modify=old is not None)
        if old is None:
            return lambda: self._delete_group(group)
        return lambda: self._put_group(old, old_size, modify=True)

    def _put_group(self, group: ActionProfileGroup, max_size: int, modify: bool) -> None:
        backend_call(self.backend.write_group, group, modify)
        self.groups[group.group_id] = group
        if max_size:
            self.sizes[group.group_id] = max_size

    def _delete_group(self, group: ActionProfileGroup) -> None:
        backend_call(self.backend.delete_group, group.group_id)
        del self.groups[group.group_id]
        self.sizes.pop(group.group_id, None)
