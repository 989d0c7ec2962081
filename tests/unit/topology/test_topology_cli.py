"""``mrc topo gen/check/compile/link``, ``mrc paths`` and ``mrc trace`` on a generated file."""

import json

import pytest
from click.testing import CliRunner

from mrckit.cli import main
from mrckit.topology import compile_fabric, dumps_topology, generate_clos, load_topology


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


@pytest.fixture(scope="module")
def topo_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("topo") / "fabric.yaml"
    result = run("topo", "gen", "--planes", 2, "--spines", 2, "--leaves", 3, "--hosts-per-leaf", 2, "-o", path)
    assert result.exit_code == 0, result.stderr
    return path


def test_gen_writes_the_generated_fabric(topo_file):
    assert topo_file.read_text() == dumps_topology(generate_clos(2, 2, 3, 2))
    assert run("topo", "gen").stdout == dumps_topology(generate_clos())


def test_gen_options(tmp_path):
    path = tmp_path / "t.yaml"
    result = run("topo", "gen", "--planes", 4, "--spines", 3, "--leaves", 2, "--hosts-per-leaf", 1,
                 "--locator", "fcbb:bb01::/32", "--mtu", 2400, "-o", path)
    assert result.exit_code == 0
    topo = load_topology(str(path))
    assert (topo.planes, topo.t1_per_plane, len(topo.hosts), topo.locator, topo.mtu) == (
        4, (3, 3, 3, 3), 2, 0xFCBBBB01, 2400)


def test_check(topo_file):
    result = run("topo", "check", topo_file)
    assert result.exit_code == 0
    assert result.stdout == f"{topo_file}: ok: 2 planes, 6 T0, 4 T1, 6 hosts, 24 links, mtu 3500\n"


def test_paths_lists_every_path(topo_file):
    out = run("paths", topo_file, "h0-0", "2001:db8:100:2::2").stdout.splitlines()
    assert out[0] == "h0-0 (2001:db8:100::1) -> h2-1 (2001:db8:100:2::2): 4 paths"
    assert out[5].split() == ["1", "1", "0x101xxxxx", "fcbb:bb00:1400:1801:1402:1c01::",
                              "p1/t0-0/down-0", "p1/t0-0/t1-1", "p1/t0-2/t1-1", "p1/t0-2/down-1"]
    assert len(out) == 6


def test_trace_delivers(topo_file):
    result = run("trace", topo_file, "h0-0", "h2-1", "--ev", "0x10100005")
    assert result.exit_code == 0
    out = result.stdout.splitlines()
    assert out[0] == ("h0-0 -> h2-1, EV 0x10100005 (plane 1, T1 1, salt 0x00005), "
                      "DA fcbb:bb00:1400:1801:1402:1c01::")
    assert "usid_fib 0xfcbbbb001801 -> port 3; out p1/t0-0/t1-1" in out[3]
    assert out[-2:] == ["delivered to h2-1 on plane1", "links match mrc paths: yes"]


def test_trace_shows_a_drop_and_exits_1(topo_file):
    result = run("trace", topo_file, "h0-0", "h2-1", "--ev", str(0x10500000))
    assert result.exit_code == 1
    assert result.stdout.splitlines()[-1] == "dropped: no_route"


def test_compile_json_is_the_compiled_entries(topo_file):
    result = run("topo", "compile", topo_file, "--switch", "p0-t1-0", "--switch", "p1-t0-2", "--json")
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    expected = compile_fabric(load_topology(str(topo_file)))
    assert [d["name"] for d in lines] == ["p0-t1-0", "p1-t0-2"]
    for d in lines:
        entries = expected.entries(d["name"])
        assert [(e["table"], e["match"], e["action"], e["params"]) for e in d["entries"]] == [
            (e.table, e.match, e.action, e.params) for e in entries]


def test_compile_text_and_bmv2(topo_file):
    result = run("topo", "compile", topo_file, "--target", "bmv2", "--host", "h2-1")
    assert result.exit_code == 0
    assert result.stdout.splitlines()[2] == ("  plane1   2001:db8:201:2::2  02:03:10:02:00:01 -> p1-t0-2:1 "
                                             "02:01:10:02:00:01  p1/t0-2/down-1")


def test_link_classes(topo_file):
    assert run("topo", "link", topo_file, "p1/t0-2/t1-0").stdout.splitlines() == [
        "plane 1, T1 0, leaf 2 -> leaf *", "plane 1, T1 0, leaf * -> leaf 2"]


# --- EV-hash (ECMP) mode ----------------------------------------------------------------------
def test_compile_ecmp_mode_prints_members_groups_routes(topo_file):
    out = run("topo", "compile", topo_file, "--mode", "ecmp", "--switch", "p0-t0-0", "--down", "p0/t0-1/t1-0")
    assert out.exit_code == 0, out.output
    lines = out.stdout.splitlines()
    assert "  ecmp_selector group 2 -> members 4" in lines and "  ipv6_fib 2001:db8:100:1::/64 -> group 2" in lines
    assert not any("usid_fib" in ln for ln in lines)
    as_json = json.loads(run("topo", "compile", topo_file, "--mode", "ecmp", "--switch", "p0-t1-0", "--json").stdout)
    assert as_json["groups"] == [] and as_json["routes"][0] == {"table": "ipv6_fib", "prefix": "2001:db8:100::/64",
                                                                "member": 1}
    srv6_down = run("topo", "compile", topo_file, "--down", "p0/t0-1/t1-0")
    assert srv6_down.exit_code == 2 and "ecmp mode only" in srv6_down.output


def test_link_ecmp_mode_lists_the_group_changes(topo_file):
    out = run("topo", "link", topo_file, "p0/t0-1/t1-0", "--mode", "ecmp")
    assert out.exit_code == 0, out.output
    assert out.stdout.splitlines()[1:] == [
        "  p0-t0-0: group 2: members (new) -> 4",
        "  p0-t0-0: route 2001:db8:100:1::/64: group 1025 -> group 2",
        "  p0-t0-1: group 1025: members 3, 4 -> 4",
        "  p0-t0-2: group 2: members (new) -> 4",
        "  p0-t0-2: route 2001:db8:100:1::/64: group 1025 -> group 2"]
    bad = run("topo", "link", topo_file, "p0/t0-9/t1-0", "--mode", "ecmp")
    assert bad.exit_code != 0 and "no link p0/t0-9/t1-0" in bad.output


def test_paths_and_trace_ecmp_mode(topo_file):
    from mrckit.wire.ecmp import ev_member

    ev = 0x10001234
    spine = ev_member((3, 4), ev) - 3  # the uplink members of p1-t0-0 are 3 (T1 0) and 4 (T1 1)
    out = run("paths", topo_file, "h0-0", "h2-1", "--mode", "ecmp", "--ev", hex(ev))
    assert out.exit_code == 0, out.output
    assert "not known from the EV's fields" in out.stdout
    assert f"EV 0x{ev:08x}: plane 1, spine p1-t1-{spine} by the hash" in out.stdout
    trace = run("trace", topo_file, "h0-0", "h2-1", "--ev", hex(ev), "--mode", "ecmp")
    assert trace.exit_code == 0 and "delivered to h2-1" in trace.stdout
    assert f"out p1/t0-0/t1-{spine}" in trace.stdout
    avoid = run("trace", topo_file, "h0-0", "h2-1", "--ev", hex(ev), "--mode", "ecmp",
                "--down", f"p1/t0-2/t1-{spine}")
    assert avoid.exit_code == 0 and f"out p1/t0-0/t1-{1 - spine}" in avoid.stdout
    assert run("paths", topo_file, "h0-0", "h2-1", "--ev", "5").exit_code == 2


@pytest.mark.parametrize("down, dropped_on", [
    (["p0/t0-0/t1-0", "p0/t0-0/t1-1"], None),
    (["p0/t0-1/down-0"], "p0/t0-1/down-0"),
    (["p0/t0-1/t1-0", "p0/t0-1/t1-1"], None),
])
def test_ecmp_trace_drops_on_a_down_link_the_groups_still_use(topo_file, down, dropped_on):
    args = [a for link in down for a in ("--down", link)]
    out = run("trace", topo_file, "h0-0", "h1-0", "--mode", "ecmp", "--ev", "0x1", *args)
    assert out.exit_code == 1, out.output
    assert "delivered" not in out.stdout
    link = out.stdout.split("dropped: link_down: sent on ")[1].split(",")[0]
    assert link in down and (dropped_on is None or link == dropped_on)
    assert f"out {link}, which is down: DROP" in out.stdout


def test_srv6_trace_with_a_link_down(topo_file):
    down = run("trace", topo_file, "h0-0", "h1-0", "--ev", "0x00100001", "--down", "p0/t0-0/t1-1")
    assert down.exit_code == 1 and "dropped: link_down: sent on p0/t0-0/t1-1" in down.stdout
    assert "links match mrc paths up to the down link: yes" in down.stdout
    other = run("trace", topo_file, "h0-0", "h1-0", "--ev", "0x00100001", "--down", "p0/t0-0/t1-0")
    assert other.exit_code == 0 and "delivered to h1-0" in other.stdout
    src = run("trace", topo_file, "h0-0", "h1-0", "--ev", "0x00100001", "--down", "p0/t0-0/down-0")
    assert src.exit_code == 1 and "dropped: link_down: sent on p0/t0-0/down-0" in src.stdout


@pytest.mark.parametrize("ev, what", [("0x1ffffffff", "out of range"), ("0xF0000001", "plane 15"),
                                      ("-1", "out of range")])
def test_ecmp_paths_checks_the_ev_before_printing(topo_file, ev, what):
    out = run("paths", topo_file, "h0-0", "h1-0", "--mode", "ecmp", "--ev", ev)
    assert out.exit_code == 2, out.output
    assert out.stdout == "" and what in out.stderr and len(out.stderr.strip().splitlines()) == 1
