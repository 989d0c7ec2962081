"""Single-QP MRC goodput of the native and the Python endpoint, against a C sendmmsg blast of
datagrams of the same size on the same path, in one run, over two paths:

- veth: one veth between two namespaces;
- fabric: the default emulated fabric (eBPF switches, the host dataplane's tc egress spraying
  every packet over the EVs), h0-0 -> h2-1 across 3 switches.

The blast (bench/udp_blast.c, built here with cc -O2) sends WRITE_MIDDLE-shaped datagrams from
a socket bound to [NIC]:4791 to [peer]:4791, so tc egress sprays it exactly as it sprays the
endpoint; a recvmmsg receiver counts what arrives. It has no reliability, no ICRC and no
window: the limit of our socket path, and the baseline. The endpoints' writes are reliable and
verified (SHA-256 of the source against the responder's region). Each side runs in its own
process, as `mrc write` and `mrc listen` do. Across the fabric it also prints the CPU time the
two hosts' agents (Python processes that share the machine with the endpoints) used during
each run. Needs root (namespaces, BPF); without it, says so and exits 0.

    .venv/bin/python bench/endpoint.py [--size 384M] [--fabric-size 96M] [--repeat 1]
                                       [--paths veth,fabric] [--busy-poll] [--rto-exp N]
                                       [--max-cwnd PACKETS]
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile

from bench_result import result  # noqa: E402  (bench/: the common BENCH line)
from fabric_scale import TICK_S, cpu_ticks  # noqa: E402

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parent
A, B = "2001:db8:100:1::1", "2001:db8:100:1::2"
SRC_HOST, DST_HOST = "h0-0", "h2-1"
PYTHON_SHARE = 8
"""The Python endpoint writes 1/PYTHON_SHARE of the native size, so both take a few seconds."""
IDLE_MS = 3000
"""The blast receiver stops this long after the last datagram, if some were lost (a loaded
machine can stall a path for hundreds of ms: the last arrival ends the measure anyway)."""


def _wire():
    from mrckit.wire import constants as w

    return w


def _datagram(payload: int) -> int:
    """Bytes of one endpoint data packet's UDP payload (a WRITE_MIDDLE)."""
    w = _wire()
    return w.BTH_LEN + w.METH_LEN + w.TSETH_LEN + w.RETH_LEN + payload + w.ICRC_LEN


def _native_rto() -> int:
    from mrckit.endpoint.native import NATIVE_TIMEOUT_EXP

    return NATIVE_TIMEOUT_EXP


# --- the roles, each run in its own process inside a namespace ------------------------------
def _role_mrc_rx(a: dict) -> dict:
    from mrckit.endpoint import implementation

    kw = {"busy_poll": True} if a["busy_poll"] and a["impl"] == "native" else {}
    with implementation(a["impl"])(a["local"], **kw) as ep:
        mr = ep.register_mr(a["size"], rkey=0x1000)
        ep.create_qp(a["peer"], qpn=0x200, remote_qpn=0x100)
        print("ready", flush=True)
        comp = ep.poll_recv(300)
        st = ep.responder.stats
        return {"ok": comp is not None, "sha256": mr.sha256(), "bytes": st.placed_bytes,
                "duplicates": st.duplicates, "bad_icrc": st.bad_icrc}


def _role_mrc_tx(a: dict) -> dict:
    import hashlib

    from mrckit.endpoint import QpConfig, RetryConfig, implementation
    from mrckit.endpoint.cc import NsccConfig
    from mrckit.endpoint.native import NATIVE_TIMEOUT_EXP

    data = os.urandom(a["size"])
    kw, config = {}, QpConfig()
    if a["impl"] == "native":
        # no retry limit: the native 262 us RTO must not fail the QP on a loaded machine
        config = QpConfig(retry=RetryConfig(a.get("rto_exp") or NATIVE_TIMEOUT_EXP, 7, 25))
        if a.get("max_cwnd"):  # as mrc demo --max-cwnd: the window starts at and never passes it
            config.cc = NsccConfig.capped(a["max_cwnd"])
        if a["busy_poll"]:
            kw["busy_poll"] = True
    with implementation(a["impl"])(a["local"], **kw) as ep:
        qp = ep.create_qp(a["peer"], qpn=0x100, remote_qpn=0x200, config=config)
        comp = ep.write(qp, data, 0, 0x1000, imm=1).wait(300)
        st = qp.requestor.stats
        return {"bytes": a["size"], "seconds": (comp.finished_ns - comp.started_ns) / 1e9,
                "packets": st.packets, "sha256": hashlib.sha256(data).hexdigest(),
                "retransmits": sum(st.retransmits.values()), "timeouts": st.timeouts}


ROLES = {"mrc-rx": _role_mrc_rx, "mrc-tx": _role_mrc_tx}


# --- running a pair -------------------------------------------------------------------------
def _nsenter(ns: str) -> list[str]:
    return ["nsenter", f"--net=/var/run/netns/{ns}", "--"]


def _last_json(out: str, what: str) -> dict:
    lines = [ln for ln in out.strip().splitlines() if ln.startswith("{")]
    if not lines:
        raise RuntimeError(f"{what} printed no result")
    return json.loads(lines[-1])


def _pair(rx_cmd: list[str], tx_cmd: list[str]) -> tuple[dict, dict]:
    rx = subprocess.Popen(rx_cmd, stdout=subprocess.PIPE, text=True)
    try:
        if rx.stdout.readline().strip() != "ready":
            raise RuntimeError(f"receiver {rx_cmd[-1]} did not start")
        tx = subprocess.run(tx_cmd, stdout=subprocess.PIPE, text=True, timeout=400)
        rx_out, _ = rx.communicate(timeout=400)
    finally:
        if rx.poll() is None:
            rx.kill()
            rx.wait()
    return _last_json(rx_out, "receiver"), _last_json(tx.stdout, "sender")


def _mrc(path: dict, impl: str, size: int, busy_poll: bool, rto_exp: int | None = None,
         max_cwnd: int | None = None) -> dict:
    def cmd(ns, role, local, peer):
        arg = json.dumps({"impl": impl, "size": size, "local": local, "peer": peer, "busy_poll": busy_poll,
                          "rto_exp": rto_exp, "max_cwnd": max_cwnd})
        return _nsenter(ns) + [sys.executable, __file__, "--role", role, "--role-args", arg]

    rx, tx = _pair(cmd(path["ns_b"], "mrc-rx", path["b"], path["a"]), cmd(path["ns_a"], "mrc-tx", path["a"], path["b"]))
    s = tx["seconds"]
    return {"MBps": tx["bytes"] / s / 1e6, "kpps": tx["packets"] / s / 1e3, "seconds": s, "rtx": tx["retransmits"],
            "ok": rx["ok"] and rx["sha256"] == tx["sha256"] and rx["bytes"] >= size}


def _blast(path: dict, exe: str, size: int, payload: int) -> dict:
    packets = -(-size // payload)
    rx, tx = _pair(_nsenter(path["ns_b"]) + [exe, "rx", path["b"], str(payload), str(packets), str(IDLE_MS)],
                   _nsenter(path["ns_a"]) + [exe, "tx", path["a"], path["b"], str(packets), str(payload)])
    s = rx["seconds"]
    return {"MBps": rx["bytes"] / s / 1e6 if s else 0.0, "kpps": rx["packets"] / s / 1e3 if s else 0.0,
            "delivered": rx["packets"] / packets, "seconds": s, "send_errors": tx["errors"]}


def _build_blast(where: str) -> str:
    exe = os.path.join(where, "udp_blast")
    subprocess.run(["cc", "-O2", "-Wall", "-I", str(REPO / "native/include"), "-I", str(REPO / "ebpf/include"),
                    str(HERE / "udp_blast.c"), str(REPO / "native/src/util.c"), "-o", exe], check=True)
    return exe


# --- the two paths --------------------------------------------------------------------------
def _veth(cleanup: list) -> dict:
    from mrckit import netns

    ns_a = netns.add(netns.unique_name("mrcbench"))
    cleanup.append(lambda: netns.delete(ns_a))
    ns_b = netns.add(netns.unique_name("mrcbench"))
    cleanup.append(lambda: netns.delete(ns_b))
    netns.veth(ns_a, "mrca", ns_b, "mrcb", mtu=3500)
    netns.run(["ip", "-6", "addr", "add", f"{A}/64", "dev", "mrca", "nodad"], ns=ns_a)
    netns.run(["ip", "-6", "addr", "add", f"{B}/64", "dev", "mrcb", "nodad"], ns=ns_b)
    return {"ns_a": ns_a, "ns_b": ns_b, "a": A, "b": B}


def _fabric(cleanup: list) -> dict:
    from mrckit.fabric.fabric import Fabric
    from mrckit.topology import generate_clos

    fab = Fabric.up(generate_clos(), name=f"bep{os.getpid() % 100000}", target="ebpf")
    cleanup.append(fab.down)
    src, dst = fab.host(SRC_HOST), fab.host(DST_HOST)
    return {"ns_a": src.ns, "ns_b": dst.ns, "a": src.nic_address, "b": dst.nic_address, "fabric": fab}


def _agents_cpu(path: dict, run):
    """``run()``'s result, and the CPU seconds the source and destination hosts' agents used
    meanwhile ({} off the fabric)."""
    fab = path.get("fabric")
    pids = {h: fab.state.hosts[h].pid for h in (SRC_HOST, DST_HOST)} if fab else {}
    before = {h: cpu_ticks(p) for h, p in pids.items()}
    out = run()
    return out, {h: (cpu_ticks(p) - before[h]) / TICK_S for h, p in pids.items()}


def _measure(name: str, path: dict, exe: str, args, payload: int) -> dict:
    size = args.size if name == "veth" else args.fabric_size
    py_size = max(size // PYTHON_SHARE, 1 << 20)
    rows = []
    for _ in range(args.repeat):
        blast, blast_cpu = _agents_cpu(path, lambda: _blast(path, exe, size, payload))
        native, native_cpu = _agents_cpu(path, lambda: _mrc(path, "native", size, args.busy_poll, args.rto_exp,
                                                            args.max_cwnd))
        rows.append({"blast": blast, "native": native, "python": _mrc(path, "python", py_size, False),
                     "agents": {"blast": blast_cpu, "native": native_cpu}})
    return {"name": name, "rows": rows, "size": size, "py_size": py_size}


def _agents_line(m: dict) -> str | None:
    """The agents' CPU during each run of ``m``, or None when it has none (the veth)."""
    runs = [r["agents"] for r in m["rows"] if r["agents"]["native"]]
    if not runs:
        return None
    fmt = lambda cpu: "+".join(f"{cpu[h]:.2f}" for h in (SRC_HOST, DST_HOST))  # noqa: E731
    return (f"{m['name']}: CPU seconds of the agents of {SRC_HOST}+{DST_HOST} per run: during the native write "
            f"{', '.join(fmt(r['native']) for r in runs)}; during the blast {', '.join(fmt(r['blast']) for r in runs)}")


def _report(measures: list[dict], args, payload: int) -> bool:
    ok = True
    sizes = "; ".join(f"{m['name']}: native {m['size']} B, Python {m['py_size']} B" for m in measures)
    print(f"single-QP goodput per write ({sizes}), blast of the native bytes; "
          f"{payload} B payload, {_datagram(payload)} B UDP payload per packet"
          f"{', native busy-polling' if args.busy_poll else ''}, native RTO exponent {args.rto_exp or _native_rto()}"
          f"{f', native window at most {args.max_cwnd} packets' if args.max_cwnd else ''}")
    print(f"{'path':>6} {'run':>3} {'blast MB/s':>10} {'kpps':>6} {'arrived':>7} {'native MB/s':>11} {'kpps':>6} "
          f"{'rtx':>5} {'python MB/s':>11} {'kpps':>6} {'rtx':>5} {'nat/blast':>9} {'nat/py':>6} {'sha256':>6}")
    for m in measures:
        for i, r in enumerate(m["rows"]):
            b, n, p = r["blast"], r["native"], r["python"]
            good = n["ok"] and p["ok"]
            ok &= good
            print(f"{m['name']:>6} {i:>3} {b['MBps']:>10.1f} {b['kpps']:>6.1f} {b['delivered']:>7.1%} {n['MBps']:>11.1f} "
                  f"{n['kpps']:>6.1f} {n['rtx']:>5} {p['MBps']:>11.1f} {p['kpps']:>6.1f} {p['rtx']:>5} "
                  f"{n['MBps'] / b['MBps'] if b['MBps'] else float('nan'):>9.2f} {n['MBps'] / p['MBps']:>6.1f} "
                  f"{'ok' if good else 'BAD':>6}")
    print("blast: unreliable, goodput of the datagrams that arrived; endpoints: reliable, verified by SHA-256; "
          "best run of each")
    for line in filter(None, map(_agents_line, measures)):
        print(line)
    for m in measures:
        best = lambda k, m=m: max((r[k] for r in m["rows"]), key=lambda x: x["MBps"])  # noqa: E731
        b, n, p = best("blast"), best("native"), best("python")
        goal = ">= 0.7" if m["name"] == "fabric" else ""
        result(f"native endpoint goodput, {m['name']}", n["MBps"], "MB/s", f"C sendmmsg blast, {m['name']}",
               b["MBps"], goal)
        result(f"native endpoint vs Python endpoint, {m['name']}", n["MBps"], "MB/s",
               f"Python endpoint, {m['name']}", p["MBps"], ">= 10x")
    return ok


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", default="384M", help="bytes per native write and per blast over the veth "
                    "(K/M/G suffixes); the Python endpoint writes 1/8 of it")
    ap.add_argument("--fabric-size", default="96M", help="the same across the fabric")
    ap.add_argument("--repeat", type=int, default=1, help="runs per path; the best one is reported")
    ap.add_argument("--paths", default="veth,fabric", help="comma-separated: veth, fabric")
    ap.add_argument("--busy-poll", action="store_true", help="the native endpoints busy-poll")
    ap.add_argument("--rto-exp", type=int, default=None,
                    help="native RTO = 1.024 us x 2^N (default: mrc write's, NATIVE_TIMEOUT_EXP)")
    ap.add_argument("--max-cwnd", type=int, default=None, metavar="PACKETS",
                    help="cap the native writer's window (default: none, up to the MPR), as mrc demo --max-cwnd")
    ap.add_argument("--role", choices=sorted(ROLES), help=argparse.SUPPRESS)
    ap.add_argument("--role-args", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.role:
        print(json.dumps(ROLES[args.role](json.loads(args.role_args))), flush=True)
        return 0
    from mrckit.cli.endpoint import parse_size
    from mrckit.errors import MrcError

    try:
        args.size, args.fabric_size = parse_size(args.size), parse_size(args.fabric_size)
    except MrcError as exc:
        print(f"bench/endpoint.py: {exc}", file=sys.stderr)
        return 2
    paths = [p for p in args.paths.split(",") if p]
    if not paths or set(paths) - {"veth", "fabric"} or args.repeat < 1 or not 0 <= (args.rto_exp or 0) <= 24 \
            or (args.max_cwnd is not None and not 1 <= args.max_cwnd <= 1024):
        print("bench/endpoint.py: --paths takes veth and/or fabric, --repeat at least 1, --rto-exp 0..24, "
              "--max-cwnd 1..1024", file=sys.stderr)
        return 2
    if os.geteuid() != 0:
        print("bench/endpoint.py: needs root (network namespaces, BPF); skipped")
        return 0
    from mrckit.endpoint.native import available

    if available() is not None:
        print(f"bench/endpoint.py: the native endpoint is not available ({available()}); skipped")
        return 0
    payload = _wire().DEFAULT_PAYLOAD_LEN
    cleanup: list = []
    tmp = tempfile.mkdtemp(prefix="mrcbench-")
    measures = []
    try:
        exe = _build_blast(tmp)
        for name in paths:
            path = (_veth if name == "veth" else _fabric)(cleanup)
            measures.append(_measure(name, path, exe, args, payload))
    except KeyboardInterrupt:
        print("bench/endpoint.py: interrupted; cleaning up", file=sys.stderr)
        return 130
    finally:
        for undo in reversed(cleanup):
            try:
                undo()
            except Exception as exc:  # keep undoing the rest
                print(f"bench/endpoint.py: cleanup: {exc}", file=sys.stderr)
        shutil.rmtree(tmp, ignore_errors=True)
    if not _report(measures, args, payload):
        print("an endpoint transfer did not verify (SHA-256 mismatch)")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
