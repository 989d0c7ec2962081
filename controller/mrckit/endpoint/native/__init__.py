"""The native MRC endpoint (``native/`` in C, loaded with ctypes; design section 6).

Same API as the Python endpoint, which stays the readable reference; see docs/endpoint.md.
Importing this package never fails: :func:`available` says whether ``libmrcep.so`` is built.
"""

from ._lib import NativeUnavailable, available  # noqa: F401
from .state import NATIVE_TIMEOUT_EXP, NativeRequestorQp, NativeResponder, Outbox, default_retry  # noqa: F401
from .endpoint import NativeEndpoint  # noqa: F401
