"""The error a user can cause. The CLI prints it as one line, never as a traceback.

``mrckit.wire`` raises plain ``ValueError`` so that it imports nothing of mrckit; every other
layer raises :class:`MrcError` (or a subclass) for bad input and unusable environments.
"""


class MrcError(Exception):
    """A user-facing error: the message names what is wrong and where, and how to fix it."""


class PrerequisiteError(MrcError):
    """Something the command needs is missing on this machine (see ``mrc doctor``)."""
