"""The error every ``mrckit.bpf`` call raises."""

from __future__ import annotations

from ..errors import MrcError


class BpfError(MrcError):
    """A libbpf or kernel BPF call failed.

    Attributes:
        errno: the errno the kernel or libbpf returned (0 when not from a syscall).
        log: libbpf's messages during the failed step; for a load failure this holds the full
            verifier log (``-- BEGIN PROG LOAD LOG --`` ... ``-- END PROG LOAD LOG --``).
    """

    def __init__(self, message: str, *, errno: int = 0, log: str = ""):
        super().__init__(message)
        self.errno = errno
        self.log = log
