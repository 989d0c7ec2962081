"""Range checks shared by the codecs: one error message shape for every field."""


def check_range(name: str, value: int, lo: int, hi: int) -> int:
    """Return ``value`` if ``lo <= value <= hi``.

    Raises:
        ValueError: naming the field and the allowed range, e.g.
            ``plane=16 is out of range 0..15``.
        TypeError: if ``value`` is not an int (bool is refused too).
    """
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if not lo <= value <= hi:
        raise ValueError(f"{name}={value} is out of range {lo}..{hi}")
    return value
