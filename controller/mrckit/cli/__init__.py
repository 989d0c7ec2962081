"""The ``mrc`` command: the only place that parses arguments or prints for humans.

Each module in this package adds its commands to the ``main`` group through a ``register(main)``
function, so that one concern keeps one module. A user mistake (``MrcError``, ``ValueError``,
a missing file) is printed as one line on stderr with exit code 2, never as a traceback.
"""

import importlib
import pkgutil
import sys

import click

from ..errors import MrcError


def _interrupted() -> None:
    """Ctrl-C: one line on stderr and exit status 130 (128 + SIGINT), no traceback."""
    click.echo("mrc: interrupted", err=True)
    sys.exit(130)


class _Group(click.Group):
    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except (MrcError, ValueError, FileNotFoundError, PermissionError) as exc:
            click.echo(f"mrc: error: {exc}", err=True)
            sys.exit(2)
        except KeyboardInterrupt:
            _interrupted()


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="mrckit")
def main() -> None:
    """mrckit: P4 and eBPF dataplanes for MRC (Multipath Reliable Connection)."""


def _register_all() -> None:
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        module = importlib.import_module(f"{__name__}.{info.name}")
        register = getattr(module, "register", None)
        if register is not None:
            register(main)


try:
    _register_all()
except KeyboardInterrupt:
    # Ctrl-C while the commands load (most of mrc's start-up, a second on a busy machine):
    # nothing has started yet, so there is nothing to undo.
    _interrupted()
