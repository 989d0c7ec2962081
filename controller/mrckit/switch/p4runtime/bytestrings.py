"""P4Runtime bytestrings: unsigned big-endian integers with a declared bit width.

P4Runtime 1.3+ (spec section 8.4 "Bytestrings") defines the canonical form as the shortest
string that holds the value (zero is one ``\\x00`` byte). A server must also accept longer,
zero-padded strings from older clients as long as the value fits the width, and must answer
reads in the canonical form. An empty string, or a value wider than its field, is refused.
"""

from .errors import invalid


def decode(data: bytes, bitwidth: int, where: str) -> int:
    """Integer value of the bytestring ``data`` of a ``bitwidth``-bit field.

    ``where`` names the field for the error message. Raises ``P4RuntimeError``
    (INVALID_ARGUMENT) for an empty string or a value that needs more than ``bitwidth`` bits.
    """
    if not data:
        raise invalid(f"{where}: empty bytestring")
    value = int.from_bytes(data, "big")
    if value.bit_length() > bitwidth:
        raise invalid(f"{where}: value 0x{data.hex()} does not fit in {bitwidth} bits")
    return value


def encode(value: int) -> bytes:
    """Canonical bytestring of the non-negative integer ``value`` (shortest form, 0 -> b"\\x00")."""
    if value < 0:
        raise ValueError(f"bytestring value must be >= 0, got {value}")
    return value.to_bytes(max(1, (value.bit_length() + 7) // 8), "big")
