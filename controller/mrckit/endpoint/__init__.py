"""The software MRC endpoint: RDMA WRITE and WRITE_WITH_IMM requestor and responder with
out-of-order placement, SACK/NACK and selective retransmission (design section 6).

Imports only :mod:`mrckit.wire`. See ``docs/endpoint.md``.
"""

from .cc import NsccConfig, NsccWindow  # noqa: F401
from .endpoint import Endpoint, QpConfig, QueuePair  # noqa: F401
from .memory import MemoryRegion, MemoryTable  # noqa: F401
from .requestor import Completion, QpError, RequestorQp, RetryConfig  # noqa: F401
from .responder import RecvCompletion, Responder, ResponderQp  # noqa: F401
