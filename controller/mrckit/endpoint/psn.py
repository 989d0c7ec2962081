"""24-bit PSN arithmetic. Internally the endpoint counts PSNs as unbounded integers
("absolute" PSNs) and converts at the wire, so comparisons never wrap."""

from mrckit.wire.constants import PSN_MOD

HALF = PSN_MOD // 2


def unwrap(psn: int, ref_abs: int) -> int:
    """The absolute PSN nearest to ``ref_abs`` whose low 24 bits are ``psn``."""
    d = (psn - ref_abs) % PSN_MOD
    return ref_abs + (d - PSN_MOD if d >= HALF else d)
