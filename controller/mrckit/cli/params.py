"""Click parameter types shared by the ``mrc`` commands."""

from __future__ import annotations

import click


class IntType(click.ParamType):
    """An integer in decimal or with a 0x/0o/0b prefix (EVs, uSIDs, QP numbers and rkeys are
    easier to read in hex). A bad value is a usage error naming the option."""

    name = "INT"

    def convert(self, value, param, ctx):
        if isinstance(value, int):
            return value
        try:
            return int(value, 0)
        except ValueError:
            self.fail(f"{value!r} is not an integer (decimal or 0x hex)", param, ctx)


INT = IntType()
