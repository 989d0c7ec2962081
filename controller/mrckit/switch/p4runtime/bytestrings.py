"""P4Runtime bytestrings: unsigned big-endian integers with a declared bit width.

P4Runtime 1.4 (spec section 8.3 "Bytestrings") defines the canonical form as the shortest
string that holds the value (zero is one ``\\x00`` byte). A receiver puts no limit on the
length of a string: longer, zero-padded strings are accepted as long as the value fits the
width, and reads are answered in the canonical form. An empty string, or a value wider than
its field, is refused with OUT_OF_RANGE, as the spec says.
"""

import grpc

from .errors import P4RuntimeError


def decode(data: bytes, bitwidth: int, where: str) -> int:
    """Integer value of the bytestring ``data`` of a ``bitwidth``-bit field.

    ``where`` names the field for the error message. Raises ``P4RuntimeError``
    (OUT_OF_RANGE) for an empty string or a value that needs more than ``bitwidth`` bits.
    """
    if not data:
        raise P4RuntimeError(grpc.StatusCode.OUT_OF_RANGE, f"{where}: empty bytestring")
    value = int.from_bytes(data, "big")
    if value.bit_length() > bitwidth:
        raise P4RuntimeError(grpc.StatusCode.OUT_OF_RANGE, f"{where}: value 0x{data.hex()} does not fit in {bitwidth} bits")
    return value


def encode(value: int) -> bytes:
    """Canonical bytestring of the non-negative integer ``value`` (shortest form, 0 -> b"\\x00")."""
    if value < 0:
        raise ValueError(f"bytestring value must be >= 0, got {value}")
    return value.to_bytes(max(1, (value.bit_length() + 7) // 8), "big")
