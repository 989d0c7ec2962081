"""Which headers follow the BTH, per opcode (design section 3.2 table). No scapy needed."""

from .constants import (
    AETH_LEN, CC_STATE_LEN, EETH_LEN, ERTH_LEN, IMM_OPCODES, IMMDT_LEN, METH_LEN, NETH_LEN,
    PETH_LEN, RETH_LEN, SETH_LEN, TSETH_LEN, WRITE_OPCODES, Opcode,
)

HEADER_LENS = {
    "meth": METH_LEN, "tseth": TSETH_LEN, "reth": RETH_LEN, "immdt": IMMDT_LEN, "aeth": AETH_LEN,
    "seth": SETH_LEN, "cc_state": CC_STATE_LEN, "neth": NETH_LEN, "peth": PETH_LEN,
    "erth": ERTH_LEN, "eeth": EETH_LEN,
}
"""Bytes of each header that can follow the BTH, by the name C and P4 use."""

_CONTROL_STACKS = {
    Opcode.SACK: ("seth", "cc_state"),
    Opcode.NACK: ("neth",),
    Opcode.ACK: ("aeth",),
    Opcode.PROBE: ("peth",),
    Opcode.EP_REQ: ("erth",),
    Opcode.EP_RESP: ("eeth",),
}


def header_stack(opcode: int, ts: bool = False) -> tuple[str, ...]:
    """The headers after the BTH for ``opcode`` (design section 3.2 table), by layer name.

    Data opcodes: ``("meth", ["tseth",] "reth", ["immdt"])``; the payload follows them.

    Raises:
        ValueError: ``opcode`` is not an MRC opcode.
    """
    if opcode in WRITE_OPCODES:
        stack = ("meth",) + (("tseth",) if ts else ()) + ("reth",)
        return stack + (("immdt",) if opcode in IMM_OPCODES else ())
    if opcode in _CONTROL_STACKS:
        return _CONTROL_STACKS[Opcode(opcode)]
    raise ValueError(f"opcode=0x{opcode:02x} is not an MRC opcode")


def headers_len(opcode: int, ts: bool = False) -> int:
    """Bytes from the end of the BTH to the payload (or to the ICRC for control packets).

    Raises:
        ValueError: ``opcode`` is not an MRC opcode.
    """
    return sum(HEADER_LENS[name] for name in header_stack(opcode, ts))
