"""Whether a command line that a doc shows is one of the `mrc` CLI (tests/unit/test_docs.py,
tests/unit/test_doc_samples.py)."""

from __future__ import annotations

import click

from mrckit.cli import main as mrc_main


def check_mrc(words: list[str]) -> str | None:
    """Why ``mrc WORDS`` is not a command of the CLI, or None: its commands and subcommands
    exist, and so does every ``--option`` it gives them."""
    cmd: click.Command = mrc_main
    ctx = click.Context(mrc_main, info_name="mrc")
    path = ["mrc"]
    options = []
    for word in words:
        if word.startswith("-"):
            options.append(word.split("=", 1)[0])
        elif isinstance(cmd, click.Group) and not options:
            sub = cmd.get_command(ctx, word)
            if sub is None:
                return f"`{' '.join(path)}` has no command {word!r}"
            cmd, path = sub, path + [word]
    known = {o for p in cmd.params for o in (*p.opts, *p.secondary_opts)} | {"--help", "-h"}
    bad = [o for o in options if o.startswith("--") and o not in known]
    if bad:
        return f"`{' '.join(path)}` has no option {bad}"
    return None
