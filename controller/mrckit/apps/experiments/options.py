"""Option values the experiments share: comma-separated number lists (``--per-minute 14,120``,
``--loss-percents 0.1,1,5``, ``--rc-qps 1,2,4``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from ...errors import MrcError

N = TypeVar("N", int, float)


def parse_numbers(text: str, option: str, cast: Callable[[str], N], example: str) -> tuple[N, ...]:
    """The numbers of ``text`` (comma-separated, blanks ignored), each made by ``cast``.

    Raises:
        MrcError: a part is not such a number, or there is none; the message names ``option``
            and shows ``example``.
    """
    parts = [p.strip() for p in text.split(",") if p.strip()]
    try:
        values = tuple(cast(p) for p in parts)
    except ValueError:
        raise MrcError(f"{option} {text!r}: expected comma-separated numbers such as {example}") from None
    if not values:
        raise MrcError(f"{option} {text!r}: expected comma-separated numbers such as {example}")
    return values
