"""What the eBPF switch's maps refuse, by P4Runtime's status codes.

Each is an ``MrcError`` (a one-line message naming the table or action profile and the key),
so the CLI reports it without a traceback; the P4Runtime server maps each class to the code in
its docstring (P4Runtime spec 1.4 sections 9.1 and 9.2).
"""

from ..errors import MrcError


class EntryExists(MrcError):
    """An insert found the key present (P4Runtime ALREADY_EXISTS)."""


class EntryNotFound(MrcError):
    """A modify or delete found no entry for the key (P4Runtime NOT_FOUND)."""


class EntryInUse(MrcError):
    """A delete of an ECMP member still in a group or named by a route, or of a group still
    named by a route (P4Runtime FAILED_PRECONDITION)."""


class UnknownReference(MrcError):
    """A group naming a member that does not exist, or a route naming a member or group that
    does not exist (P4Runtime NOT_FOUND)."""


class GroupTooLarge(MrcError):
    """A group of more members than ``ecmp_selector`` allows per group (256, the pipeline contract)
    (P4Runtime RESOURCE_EXHAUSTED)."""
