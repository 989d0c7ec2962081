"""The software MRC endpoint: RDMA WRITE and WRITE_WITH_IMM requestor and responder with
out-of-order placement, SACK/NACK and selective retransmission (design section 6).

Imports only :mod:`mrckit.wire`. See ``docs/endpoint.md``.
"""

from .cc import NsccConfig, NsccWindow  # noqa: F401
from .endpoint import Endpoint, QpConfig, QueuePair  # noqa: F401
from .memory import MemoryRegion, MemoryTable  # noqa: F401
from .requestor import Completion, QpError, RequestorQp, RetryConfig  # noqa: F401
from .responder import RecvCompletion, Responder, ResponderQp  # noqa: F401


def implementation(name: str):
    """The endpoint class called ``name``: ``"python"`` (:class:`Endpoint`, the reference) or
    ``"native"`` (``NativeEndpoint``, the C one; docs/endpoint.md). Both take the same
    arguments and have the same API.

    Raises:
        ValueError: an unknown name, or the native library is not built (the reason).
    """
    if name == "python":
        return Endpoint
    if name != "native":
        raise ValueError(f"endpoint {name!r}: use python or native")
    from .native import NativeEndpoint, available

    why = available()
    if why is not None:
        raise ValueError(why)
    return NativeEndpoint
