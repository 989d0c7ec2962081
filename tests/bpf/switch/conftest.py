"""Fixture ``switch``: a loaded ``mrc_switch`` object in a fresh test namespace."""

from support.switch_fixtures import switch  # noqa: F401
