"""``mrc shell ADDRESS``: open p4runtime-shell on any P4Runtime server, bmv2 or eBPF switch.

p4runtime-shell pins protobuf < 3.21, so it lives in its own virtualenv (``make p4rt-shell``
makes ``.venv-p4rt``) and runs as its own process (design section 9).
"""

import os
import subprocess
import sys

import click

from .doctor_checks import P4RT_SHELL_ENV as SHELL_ENV
from .doctor_checks import p4rt_shell_python
from ..errors import MrcError, PrerequisiteError

REACH_TIMEOUT_S = 5.0
"""How long ``mrc shell`` waits for the server's gRPC channel before it gives up."""


def shell_python() -> str:
    """The Python of p4runtime-shell's virtualenv: $MRC_P4RT_PYTHON when set, else ``.venv-p4rt``
    of the source checkout. Raises PrerequisiteError with the command that makes it."""
    path = p4rt_shell_python()
    if os.access(path, os.X_OK):
        return path
    raise PrerequisiteError(
        f"p4runtime-shell not found at {path}: run `make p4rt-shell` "
        f"in the mrckit checkout, or set {SHELL_ENV} to the python of a virtualenv that has it")


def shell_argv(python: str, address: str, device_id: int, election_id: str, p4info: str | None,
               device_config: str | None, extra: tuple) -> list[str]:
    """The p4runtime-shell command line (its own options: ``--grpc-addr`` and so on)."""
    argv = [python, "-m", "p4runtime_sh", "--grpc-addr", address, "--device-id", str(device_id),
            "--election-id", election_id]
    if p4info:
        argv += ["--config", f"{p4info},{device_config}"]
    return argv + list(extra)


def register(main: click.Group) -> None:
    """Add ``mrc shell`` to the ``mrc`` command."""

    @main.command(context_settings={"ignore_unknown_options": True})
    @click.argument("address")
    @click.option("--device-id", type=int, help="P4Runtime device id (default 1, or the switch's own when ADDRESS "
                                               "is a switch name; bmv2 uses 0).")
    @click.option("--topo", type=click.Path(dir_okay=False), help="Resolve a switch name in this topology file.")
    @click.option("--fabric", help="Resolve a switch name in this running fabric (its controller's --name); "
                                   "needed when several running fabrics have the name.")
    @click.option("--election-id", default="0,1", show_default=True, help="HIGH,LOW of the election id.")
    @click.option("--p4info", type=click.Path(exists=True, dir_okay=False),
                  help="Push this P4Info (text) first, with --device-config.")
    @click.option("--device-config", type=click.Path(exists=True, dir_okay=False),
                  help="p4_device_config file (bmv2 JSON) pushed with --p4info.")
    @click.argument("extra", nargs=-1, type=click.UNPROCESSED)
    def shell(address, device_id, election_id, p4info, device_config, topo, fabric, extra):
        """Open p4runtime-shell on the P4Runtime server at ADDRESS.

        ADDRESS is unix:/path/to/socket (an emulated switch's socket) or HOST:PORT, or a switch
        name: of --topo TOPO, or of a fabric a running `mrc controller run` manages (--fabric
        NAME when several running fabrics have that switch). Options after
        the address that mrc does not know go to p4runtime-shell (e.g. --ssl --cacert CA).
        """
        if bool(p4info) != bool(device_config):
            raise click.UsageError("--p4info and --device-config go together")
        parts = election_id.split(",")
        if len(parts) != 2 or not all(p.strip().isdigit() for p in parts):
            raise click.BadParameter(f"{election_id!r}: expected HIGH,LOW, e.g. 0,1", param_hint="--election-id")
        from ..control.lookup import locate_switch, looks_like_address

        if fabric is not None and (topo is not None or looks_like_address(address)):
            raise click.UsageError("--fabric resolves a switch name; not with --topo or an address")
        device_id = 1 if device_id is None and looks_like_address(address) else device_id
        if not looks_like_address(address):
            fab, target = locate_switch(address, topo, fabric=fabric)
            where = f"fabric {fab}" if fab is not None else topo
            click.echo(f"{address}: switch of {where}, P4Runtime at {target.address}, device id "
                       f"{target.device_id}", err=True)
            address, device_id = target.address, target.device_id if device_id is None else device_id
        _check_reachable(address, extra)
        argv = shell_argv(shell_python(), address, device_id, election_id, p4info, device_config, extra)
        sys.exit(subprocess.call(argv))


def _check_reachable(address: str, extra: tuple, timeout: float = REACH_TIMEOUT_S) -> None:
    """Refuse, with a plain message, an address where no gRPC server answers: p4runtime-shell
    would print its own CRITICAL log lines and exit 0 instead. A TLS channel (``--ssl`` among
    the shell's options) is left for the shell to check."""
    if any(arg.startswith("--ssl") for arg in extra):
        return
    path = address.removeprefix("unix:")
    if address.startswith("unix:") and not os.path.exists(path):
        raise MrcError(f"no P4Runtime server at {address}: the socket {path} does not exist (is the switch up?)")
    import grpc

    channel = grpc.insecure_channel(address)
    try:
        grpc.channel_ready_future(channel).result(timeout=timeout)
    except grpc.FutureTimeoutError:
        raise MrcError(f"no P4Runtime server answers at {address} within {timeout:g} s") from None
    finally:
        channel.close()
