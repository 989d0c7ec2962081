"""Action profile members and groups: ``p4.v1.ActionProfileMember`` / ``ActionProfileGroup`` to
plain values and back, with every check of P4Runtime spec 1.4 section 9.2.

The messages become mrckit's own types, ``mrckit.topology.entries.ActionProfileMember`` (an
action, name and integer parameters by name, under a non-zero member id) and
``ActionProfileGroup`` (member ids, kept ascending: the order the selector hashes over, and the
order a Read returns), the types the topology compiler emits and the eBPF switch's maps take.
A group's ``max_size`` (given at INSERT) is P4Runtime's alone and travels beside it. mrckit
has no weighted members and no watch ports: a weight other than the one valid weight, or a
watch port, is UNIMPLEMENTED.
"""

import grpc
from finsy.proto import p4r

from ...topology.entries import ActionProfileGroup, ActionProfileMember
from .entries import action_proto, parse_params
from .errors import P4RuntimeError, invalid
from .p4info import Pipeline, ProfileInfo


def profile_of(pipeline: Pipeline, profile_id: int) -> ProfileInfo:
    """The action profile with P4Runtime id ``profile_id``; INVALID_ARGUMENT if there is none."""
    profile = pipeline.profiles.get(profile_id)
    if profile is None:
        raise invalid(f"unknown action profile id {profile_id:#x}")
    return profile


def parse_member(pipeline: Pipeline, msg: p4r.ActionProfileMember, need_action: bool) -> ActionProfileMember:
    """Check ``msg`` against the P4Info (``need_action`` for INSERT and MODIFY); a DELETE's
    member has no action.

    Raises ``P4RuntimeError`` INVALID_ARGUMENT: unknown profile, member id 0, no action, an
    action its table cannot take as an entry's action, bad parameters.
    """
    profile = profile_of(pipeline, msg.action_profile_id)
    where = f"action profile {profile.name!r} member {msg.member_id}"
    if msg.member_id == 0:
        raise invalid(f"action profile {profile.name!r}: member id 0 (ids are non-zero)")
    if not need_action:
        return ActionProfileMember(msg.member_id, None, {}, profile.name)
    if not msg.HasField("action"):
        raise invalid(f"{where}: no action")
    action = profile.actions.get(msg.action.action_id)
    if action is None:
        raise invalid(f"{where}: action id {msg.action.action_id:#x} is not an action of its tables")
    if not action.table_ok:
        raise invalid(f"{where}: action {action.name!r} is @defaultonly, a member cannot take it")
    return ActionProfileMember(msg.member_id, action.name, parse_params(where, action, msg.action.params), profile.name)


def parse_group(pipeline: Pipeline, msg: p4r.ActionProfileGroup,
                need_members: bool) -> tuple[ActionProfileGroup, int]:
    """Check ``msg`` against the P4Info and the spec's rules (``need_members`` for INSERT and
    MODIFY; a DELETE names only the group); return the group and its ``max_size`` (0: the
    profile's max_group_size).

    Raises ``P4RuntimeError``: INVALID_ARGUMENT for an unknown profile, a profile without
    selector, group or member id 0, a duplicate member, an invalid weight, a negative
    ``max_size`` or one above the P4Info's max_group_size (spec 9.2.2.1); RESOURCE_EXHAUSTED
    for a ``max_size`` the target cannot hold or more members than the group may hold;
    UNIMPLEMENTED for a weight other than 1 or a watch port.
    """
    profile = profile_of(pipeline, msg.action_profile_id)
    if not profile.with_selector:
        raise invalid(f"action profile {profile.name!r} has no selector, so no groups")
    if msg.group_id == 0:
        raise invalid(f"action profile {profile.name!r}: group id 0 (ids are non-zero)")
    where = f"action profile {profile.name!r} group {msg.group_id}"
    if not need_members:
        return ActionProfileGroup(msg.group_id, (), profile.name), 0
    _check_max_size(where, profile, msg.max_size)
    ids = [_member_id(where, profile, m) for m in msg.members]
    twice = sorted({i for i in ids if ids.count(i) > 1})
    if twice:
        raise invalid(f"{where}: member {twice[0]} is listed twice (a weight repeats a member, not a duplicate)")
    limit = msg.max_size or profile.max_group_size
    if len(ids) > limit:
        raise P4RuntimeError(grpc.StatusCode.RESOURCE_EXHAUSTED,
                             f"{where}: {len(ids)} members, more than its max size {limit}")
    return ActionProfileGroup(msg.group_id, tuple(sorted(ids)), profile.name), msg.max_size


def _check_max_size(where: str, profile: ProfileInfo, max_size: int) -> None:
    # With a P4Info max_group_size > 0 the spec wants 0 < max_size <= max_group_size; like
    # bmv2's server (PI), 0 is taken to mean max_group_size: p4runtime-shell and finsy send 0.
    if max_size < 0:
        raise invalid(f"{where}: max_size {max_size} is negative")
    if profile.declared_max_group_size and max_size > profile.declared_max_group_size:
        raise invalid(f"{where}: max_size {max_size} exceeds the P4Info max_group_size "
                      f"{profile.declared_max_group_size} of {profile.name!r}")
    if max_size > profile.max_group_size:
        raise P4RuntimeError(grpc.StatusCode.RESOURCE_EXHAUSTED,
                             f"{where}: max_size {max_size}: the eBPF switch holds at most {profile.max_group_size} "
                             "members per group")


def _member_id(where: str, profile: ProfileInfo, m: p4r.ActionProfileGroup.Member) -> int:
    if m.member_id == 0:
        raise invalid(f"{where}: member id 0 (ids are non-zero)")
    if m.watch or m.watch_port:
        raise P4RuntimeError(grpc.StatusCode.UNIMPLEMENTED,
                             f"{where} member {m.member_id}: mrckit does not support watch ports "
                             "(the controller modifies the group when a link fails)")
    if profile.weights_disallowed:
        if m.weight != 0:
            raise invalid(f"{where} member {m.member_id}: weight {m.weight}, but weights are disallowed (0 only)")
    elif m.weight < 1:
        raise invalid(f"{where} member {m.member_id}: weight {m.weight} (weights are >= 1)")
    elif m.weight != 1:
        raise P4RuntimeError(grpc.StatusCode.UNIMPLEMENTED,
                             f"{where} member {m.member_id}: weight {m.weight}; mrckit does not support weighted "
                             "members (every member has weight 1)")
    return m.member_id


def member_proto(profile: ProfileInfo, member: ActionProfileMember) -> p4r.ActionProfileMember:
    """The canonical ``p4.v1.ActionProfileMember`` of ``member`` of ``profile`` (as a Read returns it)."""
    action = next(a for a in profile.actions.values() if a.name == member.action)
    return p4r.ActionProfileMember(action_profile_id=profile.id, member_id=member.member_id,
                                   action=action_proto(action, member.params))


def group_proto(profile: ProfileInfo, group: ActionProfileGroup, max_size: int = 0) -> p4r.ActionProfileGroup:
    """The ``p4.v1.ActionProfileGroup`` of ``group`` of ``profile``: members ascending, each
    with the profile's one weight, and the ``max_size`` written at INSERT."""
    msg = p4r.ActionProfileGroup(action_profile_id=profile.id, group_id=group.group_id, max_size=max_size)
    for member_id in group.members:
        msg.members.add(member_id=member_id, weight=profile.weight)
    return msg
