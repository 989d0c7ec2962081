"""``mrc wire``: decode EVs, uSIDs, paths and captures of the MRC wire format (design section 3)."""

from __future__ import annotations

import ipaddress

import click

from .params import INT


@click.group()
def wire() -> None:
    """The MRC wire format: EVs, uSIDs, uSID paths, captures, generated C/P4 constants."""


@wire.command()
@click.argument("value", type=INT, required=False)
@click.option("--plane", type=INT, help="Build the EV from fields instead (with --t1, --salt).")
@click.option("--t1", type=INT, default=0, show_default=True)
@click.option("--salt", type=INT, default=0, show_default=True)
def ev(value: int | None, plane: int | None, t1: int, salt: int) -> None:
    """Show an EV's fields and wire form: VALUE, or --plane/--t1/--salt."""
    from ..wire import ev_pack, ev_to_wire, ev_unpack

    if (value is None) == (plane is None):
        raise click.UsageError("give either VALUE or --plane (with --t1 and --salt)")
    if value is None:
        value = ev_pack(plane or 0, t1, salt)  # plane is given when value is not
    fields = ev_unpack(value)
    flow_label, sport = ev_to_wire(value)
    click.echo(f"ev 0x{value:08x}: plane {fields.plane}, t1 {fields.t1}, salt 0x{fields.salt:05x}; "
               f"udp sport 0x{sport:04x} ({sport}), flow label 0x{flow_label:05x}")


@wire.command()
@click.argument("value", type=INT, required=False)
@click.option("--plane", type=INT, help="Build the uSID from fields instead (with --role, --index).")
@click.option("--role", type=click.Choice(["t0", "t1", "down"]), default="t0", show_default=True)
@click.option("--index", type=INT, default=0, show_default=True)
def usid(value: int | None, plane: int | None, role: str, index: int) -> None:
    """Show a uSID's fields: VALUE, or --plane/--role/--index."""
    from ..wire import UsidRole, usid_pack, usid_unpack

    if (value is None) == (plane is None):
        raise click.UsageError("give either VALUE or --plane (with --role and --index)")
    if value is None:
        value = usid_pack(plane or 0, UsidRole[role.upper()], index)  # plane is given when value is not
    fields = usid_unpack(value)
    click.echo(f"usid 0x{value:04x}: plane {fields.plane}, role {fields.role.name}, index {fields.index}")


@wire.command()
@click.option("--plane", type=INT, required=True)
@click.option("--t1", type=INT, default=0, show_default=True, help="T1 index (ignored on one leaf).")
@click.option("--src-leaf", type=INT, required=True)
@click.option("--dst-leaf", type=INT, required=True)
@click.option("--downlink", type=INT, required=True, help="Downlink of the destination host.")
@click.option("--locator", default="fcbb:bb00::", show_default=True, callback=lambda c, p, v: _locator(v),
              help="uSID block (/32).")
def path(plane: int, t1: int, src_leaf: int, dst_leaf: int, downlink: int, locator: int) -> None:
    """Show the outer DA of a path and how each switch shifts it (RFC 9800 uN)."""
    from ..wire import active_prefix, path_da, path_usids, to_ipv6, un_shift, usid_unpack

    loc = locator
    hops = path_usids(plane, t1, src_leaf, dst_leaf, downlink)
    da = int(path_da(plane, t1, src_leaf, dst_leaf, downlink, locator=loc))
    click.echo(f"{'sent':<16} {str(to_ipv6(da)):<40} -> {_name(usid_unpack(hops[0]))}")
    for i, hop in enumerate(hops[:-1]):
        da = un_shift(da)
        nxt = "host" if i == len(hops) - 2 else _name(usid_unpack(hops[i + 1]))
        click.echo(f"{'after ' + _name(usid_unpack(hop)):<16} {str(to_ipv6(da)):<40} "
                   f"FIB key 0x{active_prefix(da):012x} -> {nxt}")


def _locator(text: str) -> int:
    """The top 32 bits of a uSID block given as ``fcbb:bb00::`` or ``fcbb:bb00::/32``; bits
    below /32 would be cut off silently by the shift, so they are an error."""
    try:
        net = ipaddress.IPv6Network(text if "/" in text else f"{text}/32", strict=True)
    except ValueError as exc:
        raise click.BadParameter(f"{text!r}: {exc}") from None
    if net.prefixlen != 32:
        raise click.BadParameter(f"{text!r} is not a /32 uSID block")
    return int(net.network_address) >> 96


def _name(fields) -> str:
    return f"{fields.role.name}({fields.plane},{fields.index})"


@wire.command()
@click.argument("pcap", type=click.Path(exists=True, dir_okay=False))
def decode(pcap: str) -> None:
    """List the MRC packets of a capture: opcode, QP, PSN, flags, EV, DSCP, ICRC."""
    from scapy.error import Scapy_Exception
    from scapy.utils import PcapReader

    from ..errors import MrcError
    from ..wire.packet import describe, parse_frame

    try:
        reader = PcapReader(pcap)
    except Scapy_Exception as exc:
        raise MrcError(f"{pcap}: not a pcap or pcapng capture ({exc})") from None
    with reader:
        for number, packet in enumerate(reader, 1):
            try:
                info = describe(parse_frame(bytes(packet)))
            except ValueError as exc:
                click.echo(f"{number:>6}  unreadable: {exc}")
                continue
            click.echo(f"{number:>6}  {_line(info)}")


def _line(info: dict) -> str:
    if info["opcode"] is None:
        return "not MRC"
    line = (f"{info['opcode']:<15} qp 0x{info['qp']:06x} psn {info['psn']:<8} "
            f"flags {info['flags'] or '-':<3} ev 0x{info['ev']:08x} dscp {info['dscp']:<2} "
            f"icrc {info['icrc']}")
    if "echoed_ev" in info:
        line += f"  echoed ev 0x{info['echoed_ev']:08x}"
    if "nack_reason" in info:
        line += f" reason {info['nack_reason']}"
    if "m" in info:
        line += f" M {info['m']}"
    return line


@wire.command()
@click.option("--check", is_flag=True, help="Only report stale files; exit 1 if any.")
def gen(check: bool) -> None:
    """Regenerate the C and P4 constants (and docs tables) from mrckit.wire (a source checkout)."""
    from ..wire.gen import repo_root, stale_files, write_all

    try:
        root = repo_root()
    except FileNotFoundError as exc:
        raise click.ClickException(str(exc)) from None
    if check:
        stale = stale_files(root)
        for rel in stale:
            click.echo(f"stale: {rel}")
        raise SystemExit(1 if stale else 0)
    for rel in write_all(root):
        click.echo(f"wrote {rel}")


def register(main: click.Group) -> None:
    main.add_command(wire)
