"""An independent CRC-32, bit by bit: the reference the ICRC tests check against."""


def crc32_bitwise(data: bytes) -> int:
    """CRC-32 (IEEE 802.3, reflected 0xEDB88320, init and final XOR all ones), bit by bit."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0xEDB88320 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF
