"""Malformed topology files: each gives ``file:line: problem`` from the loader, and the CLI
prints that one line on stderr and exits 2, with no traceback."""

import re
import subprocess
import sys

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from mrckit.cli import main
from mrckit.topology import TopologyError, dumps_topology, generate_clos, load_topology, loads_topology

BASE = dumps_topology(generate_clos())  # 2 planes, 2 T1 + 3 T0 per plane, 2 hosts per leaf


def _drop_line(text, needle):
    lines = text.splitlines(keepends=True)
    return "".join(line for line in lines if needle not in line)


def _many_switches(role, count):
    head = "version: 1\nplanes: 1\nswitches:\n"
    body = "".join(f"  - {{name: s{i}, role: {role}, plane: 0, index: {i}}}\n" for i in range(count))
    return head + body + "hosts: []\nlinks: []\n"


def _many_downlinks(count):
    head = "version: 1\nplanes: 1\nswitches:\n  - {name: t0, role: t0, plane: 0, index: 0}\n"
    head += "  - {name: t1, role: t1, plane: 0, index: 0}\nhosts:\n"
    hosts = "".join(f"  - {{name: h{d}, leaf: 0, downlink: {d}}}\n" for d in range(count))
    links = "".join(f"  - [t0:{d}, h{d}:0]\n" for d in range(count))
    return head + hosts + "links:\n" + links


# (case id, file text, expected problem text, text on the line the error must name)
CASES = [
    ("yaml-syntax", BASE.replace("planes: 2", "planes: [2"), "YAML syntax error", "locator:"),
    ("empty", "", "empty file", None),
    ("not-a-mapping", "- 1\n- 2\n", "topology must be a mapping", "- 1"),
    ("unknown-key", BASE.replace("mtu: 3500", "mtuu: 3500"), "unknown key 'mtuu'", "mtuu"),
    ("missing-key", BASE.split("links:")[0], "missing key 'links'", "version:"),
    ("bad-version", BASE.replace("version: 1", "version: 2"), "version 2 is not supported", "version: 2"),
    ("planes-overflow", BASE.replace("planes: 2", "planes: 17"), "17 planes: at most 16", "planes: 17"),
    ("t1-overflow", _many_switches("t1", 257), "more than 256 T1 in plane 0", "name: s256,"),
    ("t0-overflow", _many_switches("t0", 1025), "more than 1024 T0 in plane 0", "name: s1024,"),
    ("downlink-overflow", _many_downlinks(1025), "more than 1024 downlinks on t0", "[t0:1024, h1024:0]"),
    ("unknown-node", BASE.replace("[p0-t0-1:2, p0-t1-0:1", "[p0-t0-9:2, p0-t1-0:1"),
     "unknown node 'p0-t0-9'", "p0-t0-9:2"),
    ("duplicate-port", BASE.replace("[p0-t0-1:3, p0-t1-1:1", "[p0-t0-1:2, p0-t1-1:1"),
     "duplicate port 2 on p0-t0-1", "[p0-t0-1:2, p0-t1-1:1"),
    ("host-missing-plane", _drop_line(BASE, "h1-1:1"), "host h1-1 has no port in plane 1", "name: h1-1"),
    ("t0-missing-t1", _drop_line(BASE, "p1/t0-2/t1-0"), "p1-t0-2 has no link to T1 0 of plane 1",
     "name: p1-t0-2,"),
    ("bad-end", BASE.replace("[p0-t0-1:2,", "[p0-t0-1,"), "is not <node>:<port>", "[p0-t0-1,"),
    ("bad-port", BASE.replace("[p0-t0-1:2,", "[p0-t0-1:two,"), "port 'two' is not", "p0-t0-1:two"),
    ("port-out-of-range", BASE.replace("[p0-t0-1:2,", "[p0-t0-1:600,"), "port 600 of p0-t0-1 is out of range 0..511",
     "p0-t0-1:600"),
    ("t1-to-host", BASE.replace("[p0-t0-0:0, h0-0:0", "[p0-t1-0:5, h0-0:0"),
     "a link joins a T0 to a T1 or to a host", "[p0-t1-0:5, h0-0:0"),
    ("plane-mismatch", BASE.replace("[p0-t0-0:2, p0-t1-0:0", "[p0-t0-0:2, p1-t1-0:9"),
     "link p0-t0-0-p1-t1-0 joins plane 0 to plane 1", "[p0-t0-0:2, p1-t1-0:9"),
    ("host-port-plane", BASE.replace("[p1-t0-0:0, h0-0:1", "[p1-t0-0:0, h0-0:0"),
     "host h0-0 port 0 links to p1-t0-0 of plane 1", "[p1-t0-0:0, h0-0:0"),
    ("rail", BASE.replace("[p0-t0-0:0, h0-0:0", "[p0-t0-1:7, h0-0:0"),
     "host h0-0 (leaf 0) links to p0-t0-1, which is T0 1", "[p0-t0-1:7, h0-0:0"),
    ("wrong-type", BASE.replace("name: p0-t1-1, role: t1, plane: 0", "name: p0-t1-1, role: t1, plane: zero"),
     "switch p0-t1-1: plane must be an integer, got 'zero'", "plane: zero"),
    ("bad-role", BASE.replace("name: p0-t1-1, role: t1", "name: p0-t1-1, role: t2"), "role 't2' is not t0 or t1",
     "role: t2"),
    ("duplicate-name", BASE.replace("name: h0-1\n", "name: h0-0 \n"), "duplicate node name 'h0-0'",
     "name: h0-0 "),
    ("duplicate-key", BASE.replace("index: 0, usid: 0x0400", "index: 0, index: 1"), "duplicate key 'index'",
     "name: p0-t0-0,"),
    ("duplicate-place", BASE.replace("name: h0-1\n    leaf: 0\n    downlink: 1", "name: h0-1\n    leaf: 0\n    downlink: 0"),
     "hosts h0-0 and h0-1 both sit on leaf 0, downlink 0", "name: h0-1"),
    ("downlink-range", BASE.replace("name: h0-1\n    leaf: 0\n    downlink: 1", "name: h0-1\n    leaf: 0\n    downlink: 1023"),
     "host h0-1: downlink=1023 is out of range 0..1022", "name: h0-1"),
    ("bad-name", BASE.replace("name: h0-1\n", "name: h/1\n").replace("h0-1:", "h/1:"),
     "bad node name 'h/1'", "name: h/1"),
    ("port-address-disagrees", BASE.replace('address: "2001:db8:201:1::2"', 'address: "2001:db8:201:1::3"'),
     "host h1-1: port 1: address 2001:db8:201:1::3 disagrees with the plan: 2001:db8:201:1::2", "201:1::3"),
    ("port-mac-disagrees", BASE.replace('mac: "02:03:10:01:00:01"', 'mac: "02:03:10:01:00:07"'),
     "host h1-1: port 1: mac 02:03:10:01:00:07 disagrees with the plan: 02:03:10:01:00:01", "02:03:10:01:00:07"),
    ("port-usid-disagrees", BASE.replace('mac: "02:03:10:01:00:01", usid: 0x1c01', 'mac: "02:03:10:01:00:01", usid: 0x1c02'),
     "host h1-1: port 1: usid 0x1c02 disagrees with the plan: 0x1c01", "usid: 0x1c02"),
    ("port-bad-mac", BASE.replace('mac: "02:03:10:01:00:01"', 'mac: "02:03:10"'),
     "host h1-1: port 1: mac: malformed MAC address '02:03:10'", 'mac: "02:03:10"'),
    ("ports-count", BASE.replace('      - {address: "2001:db8:201:1::2"', '      # - {address: "2001:db8:201:1::2"'),
     "host h1-1: ports lists 1 ports; there is one per plane (2)", '{address: "2001:db8:200:1::2"'),
    ("usid-disagrees", BASE.replace("usid: 0x1801", "usid: 0x1802"), "usid 0x1802 disagrees with the plan",
     "usid: 0x1802"),
    ("nic-disagrees", BASE.replace('"2001:db8:100:1::2"', '"2001:db8:100:1::9"'), "nic 2001:db8:100:1::9 disagrees",
     "name: h1-1"),
    ("link-name-disagrees", BASE.replace("h2-1:1, p1/t0-2/down-1]", "h2-1:1, p1/t0-2/down-0]"),
     "name 'p1/t0-2/down-0' disagrees with the plan: it is p1/t0-2/down-1", "h2-1:1, p1/t0-2/down-0]"),
    ("t1-gap", BASE.replace("name: p0-t1-1, role: t1, plane: 0, index: 1, usid: 0x0801",
                            "name: p0-t1-1, role: t1, plane: 0, index: 2"),
     "switch p0-t1-1: T1 index 2 leaves a gap; the T1 indexes of plane 0 must run 0..1", "name: p0-t1-1,"),
    ("locator", BASE.replace("fcbb:bb00::/32", "fcbb:bb00::/48"), "must be a /32", "locator:"),
    ("mtu", BASE.replace("mtu: 3500", "mtu: 1000"), "mtu=1000 is out of range 1320..9216", "mtu:"),
    ("duplicate-link", BASE.replace("links:\n", "links:\n  - [p0-t0-1:9, p0-t1-1:9]\n"),
     "p0-t0-1 links to p0-t1-1 twice", "[p0-t0-1:3, p0-t1-1:1"),
    ("host-two-links", BASE.replace("links:\n", "links:\n  - [p0-t0-1:9, h1-1:0]\n"),
     "host h1-1 has two links on port 0", "[p0-t0-1:1, h1-1:0"),
    ("link-shape", BASE.replace("[p0-t0-0:2, p0-t1-0:0, p0/t0-0/t1-0]", "p0-t0-0:2"),
     "a link is [<node>:<port>, <node>:<port>]", "  - p0-t0-0:2"),
]


def _line_of(text, marker):
    if marker is None:
        return 1
    return next(i for i, line in enumerate(text.splitlines(), 1) if marker in line)


@pytest.mark.parametrize("text, problem, marker", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_loader_names_file_line_and_problem(tmp_path, text, problem, marker):
    path = tmp_path / "topo.yaml"
    path.write_text(text)
    with pytest.raises(TopologyError) as err:
        load_topology(str(path))
    message = str(err.value)
    assert message.startswith(f"{path}:{_line_of(text, marker)}: "), message
    assert problem in message


@pytest.mark.parametrize("text, problem, marker", [c[1:] for c in CASES[:12]], ids=[c[0] for c in CASES[:12]])
def test_cli_prints_one_line_and_exits_2(tmp_path, text, problem, marker):
    path = tmp_path / "topo.yaml"
    path.write_text(text)
    for args in (["topo", "check", str(path)], ["paths", str(path), "h0-0", "h2-1"],
                 ["trace", str(path), "h0-0", "h2-1", "--ev", "0x1"]):
        result = CliRunner().invoke(main, args)
        assert result.exit_code == 2
        assert result.stdout == ""
        lines = result.stderr.splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"mrc: error: {path}:{_line_of(text, marker)}: ")
        assert problem in lines[0] and "Traceback" not in result.stderr


def test_real_cli_process_has_no_traceback(tmp_path):
    path = tmp_path / "topo.yaml"
    path.write_text(BASE.replace("planes: 2", "planes: 17"))
    proc = subprocess.run([sys.executable, "-m", "mrckit.cli", "topo", "check", str(path)],
                          capture_output=True, text=True)
    if "No module named mrckit.cli.__main__" in proc.stderr:
        proc = subprocess.run([sys.executable, "-c", "from mrckit.cli import main; main()", "topo", "check",
                               str(path)], capture_output=True, text=True)
    assert proc.returncode == 2
    assert proc.stderr.strip() == f"mrc: error: {path}:3: 17 planes: at most 16 (the EV plane field is 4 bits)"


def test_missing_file_and_bad_arguments(tmp_path):
    for missing, problem in ((tmp_path / "nope.yaml", "cannot read: No such file or directory"),
                             (tmp_path, "cannot read: Is a directory")):
        result = CliRunner().invoke(main, ["paths", str(missing), "a", "b"])
        assert result.exit_code == 2 and result.stderr == f"mrc: error: {missing}: {problem}\n"
    binary = tmp_path / "bin.yaml"
    binary.write_bytes(b"\xff\xfe\x00")
    result = CliRunner().invoke(main, ["topo", "check", str(binary)])
    assert result.exit_code == 2 and "not a UTF-8 text file" in result.stderr
    path = tmp_path / "t.yaml"
    path.write_text(BASE)
    for args, problem in ((["paths", str(path), "h0-0", "h9-9"], "no host named 'h9-9'"),
                          (["paths", str(path), "h0-0", "h0-0"], "same host"),
                          (["trace", str(path), "h0-0", "h2-1", "--ev", "0x30000000"], "names plane 3"),
                          (["trace", str(path), "h0-0", "h2-1", "--ev", "zz"], "'zz' is not an integer"),
                          (["topo", "link", str(path), "p0/t0-7/t1-0"], "no link p0/t0-7/t1-0"),
                          (["topo", "link", str(path), "p0/t0-7"], "is not p<plane>"),
                          (["topo", "gen", "--planes", "17"], "planes=17 is out of range 1..16"),
                          (["topo", "gen", "--hosts-per-leaf", "300", "--spines", "256"], "ports are 9 bits")):
        result = CliRunner().invoke(main, args)
        assert result.exit_code == 2, args
        assert problem in result.stderr and "Traceback" not in result.stderr, (args, result.stderr)


@st.composite
def mutated(draw):
    """The base file with a few random edits: characters replaced, deleted or inserted, lines
    dropped, duplicated or swapped."""
    lines = BASE.splitlines(keepends=True)
    for _ in range(draw(st.integers(1, 4))):
        i = draw(st.integers(0, len(lines) - 1))
        edit = draw(st.sampled_from(["char", "drop", "dup", "swap", "insert"]))
        if edit == "char" and lines[i]:
            j = draw(st.integers(0, len(lines[i]) - 1))
            lines[i] = lines[i][:j] + draw(st.sampled_from(list(":-[]{}, 0129x\"#'\tabt"))) + lines[i][j + 1:]
        elif edit == "insert":
            j = draw(st.integers(0, len(lines[i])))
            lines[i] = lines[i][:j] + draw(st.text(":-[]{},0129x\" &*!|>%@`", max_size=3)) + lines[i][j:]
        elif edit == "drop" and len(lines) > 1:
            del lines[i]
        elif edit == "dup":
            lines.insert(i, lines[i])
        elif edit == "swap":
            k = draw(st.integers(0, len(lines) - 1))
            lines[i], lines[k] = lines[k], lines[i]
    return "".join(lines)


@settings(max_examples=300, deadline=None)
@given(text=mutated())
def test_any_edit_loads_or_gives_a_located_error(text):
    try:
        loads_topology(text, "fuzz.yaml")
    except TopologyError as exc:
        assert re.match(r"fuzz\.yaml:\d+: \S", str(exc)), str(exc)
