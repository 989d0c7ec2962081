"""Every command's one-line help, as `mrc --help` and each group's --help list it, reads as
a phrase: click cuts a docstring at its first full stop, so an "(e.g. 64M)" there would leave
the listing with an unclosed parenthesis."""

import click

from mrckit.cli import main


def _commands(group: click.Group, prefix=()):
    for name, cmd in group.commands.items():
        yield prefix + (name,), cmd
        if isinstance(cmd, click.Group):
            yield from _commands(cmd, prefix + (name,))


def test_short_helps_are_whole_phrases():
    cut = {" ".join(path): cmd.get_short_help_str(limit=1000) for path, cmd in _commands(main)
           if cmd.get_short_help_str(limit=1000).count("(") != cmd.get_short_help_str(limit=1000).count(")")}
    assert cut == {}
