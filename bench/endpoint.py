"""Single-QP MRC goodput over a veth between two namespaces, next to a plain UDP socket blast of
the same bytes in datagrams of the same size on the same path, in the same run.

The ratio MRC / UDP is the endpoint's transport overhead (segmentation, ICRC on both sides,
SACK processing, window, placement). Each side runs in its own process, as `mrc write` and
`mrc listen` do. Needs root (namespaces); without it, says so and exits 0.

    .venv/bin/python bench/endpoint.py [--size 64M] [--repeat 2]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import time
from bench_result import result  # noqa: E402  (bench/: the common BENCH line)

A, B = "2001:db8:100:1::1", "2001:db8:100:1::2"
PORT_UDP = 5001
PAYLOAD = 2048
DATAGRAM = 12 + 4 + 4 + 16 + PAYLOAD + 4  # what the endpoint puts in one UDP datagram


def _role_udp_rx(size: int) -> dict:
    s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, 33, 32 << 20)  # SO_RCVBUFFORCE
    s.bind((B, PORT_UDP))
    s.settimeout(10)
    print("ready", flush=True)
    buf = bytearray(9216)
    got = 0
    first = last = None
    try:
        while True:
            n = s.recv_into(buf)
            if n == 1:  # end marker
                break
            last = time.monotonic()
            first = first or last
            got += n
            s.settimeout(1)
    except TimeoutError:
        pass
    payload = got * PAYLOAD // DATAGRAM
    return {"bytes": payload, "seconds": (last - first) if first and last else 0}


def _role_udp_tx(size: int) -> dict:
    s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, 32, 32 << 20)  # SO_SNDBUFFORCE
    data = os.urandom(DATAGRAM)
    for _ in range(-(-size // PAYLOAD)):
        s.sendto(data, (B, PORT_UDP))
    for _ in range(20):
        s.sendto(b"x", (B, PORT_UDP))
        time.sleep(0.05)
    return {}


def _role_mrc_rx(size: int) -> dict:
    from mrckit.endpoint import Endpoint

    with Endpoint(B) as ep:
        mr = ep.register_mr(size, rkey=0x1000)
        ep.create_qp(A, qpn=0x200, remote_qpn=0x100)
        print("ready", flush=True)
        comp = ep.poll_recv(120)
        st = ep.responder.stats
        return {"ok": comp is not None, "sha256": mr.sha256(), "bytes": st.placed_bytes,
                "duplicates": st.duplicates, "bad_icrc": st.bad_icrc}


def _role_mrc_tx(size: int) -> dict:
    import hashlib

    from mrckit.endpoint import Endpoint

    data = os.urandom(size)
    with Endpoint(A) as ep:
        qp = ep.create_qp(B, qpn=0x100, remote_qpn=0x200)
        comp = ep.write(qp, data, 0, 0x1000, imm=1).wait(120)
        st = qp.requestor.stats
        return {"bytes": size, "seconds": (comp.finished_ns - comp.started_ns) / 1e9,
                "sha256": hashlib.sha256(data).hexdigest(), "retransmits": sum(st.retransmits.values()),
                "timeouts": st.timeouts, "cwnd": qp.requestor.cc.cwnd, "base_rtt_ns": qp.requestor.cc.base_rtt,
                "window_decreases": qp.requestor.cc.decreases}


ROLES = {"udp-rx": _role_udp_rx, "udp-tx": _role_udp_tx, "mrc-rx": _role_mrc_rx, "mrc-tx": _role_mrc_tx}


def _spawn(ns: str, role: str, size: int) -> subprocess.Popen:
    return subprocess.Popen(["nsenter", f"--net=/var/run/netns/{ns}", sys.executable, __file__, "--role", role,
                             "--size", str(size)], stdout=subprocess.PIPE, text=True)


def _pair(rx_role: str, tx_role: str, ns_a: str, ns_b: str, size: int) -> tuple[dict, dict]:
    rx = _spawn(ns_b, rx_role, size)
    assert rx.stdout.readline().strip() == "ready"
    tx = _spawn(ns_a, tx_role, size)
    tx_out, _ = tx.communicate(timeout=180)
    rx_out, _ = rx.communicate(timeout=180)
    return json.loads(rx_out.strip().splitlines()[-1]), json.loads(tx_out.strip().splitlines()[-1])


def _setup() -> tuple[str, str]:
    from mrckit import netns

    ns_a, ns_b = netns.add(netns.unique_name("mrcbench")), netns.add(netns.unique_name("mrcbench"))
    netns.veth(ns_a, "mrca", ns_b, "mrcb", mtu=3500)
    netns.run(["ip", "-6", "addr", "add", f"{A}/64", "dev", "mrca", "nodad"], ns=ns_a)
    netns.run(["ip", "-6", "addr", "add", f"{B}/64", "dev", "mrcb", "nodad"], ns=ns_b)
    return ns_a, ns_b


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", default="64M", help="bytes per transfer (K/M/G suffixes)")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--role", choices=sorted(ROLES), help=argparse.SUPPRESS)
    args = ap.parse_args()
    from mrckit.cli.endpoint import parse_size

    size = parse_size(args.size)
    if args.role:
        print(json.dumps(ROLES[args.role](size)), flush=True)
        return 0
    if os.geteuid() != 0:
        print("bench/endpoint.py: needs root (network namespaces); skipped")
        return 0
    from mrckit import netns

    ns_a, ns_b = _setup()
    rows = []
    try:
        for i in range(args.repeat):
            udp_rx, _ = _pair("udp-rx", "udp-tx", ns_a, ns_b, size)
            mrc_rx, mrc_tx = _pair("mrc-rx", "mrc-tx", ns_a, ns_b, size)
            udp_gp = udp_rx["bytes"] / udp_rx["seconds"] if udp_rx["seconds"] else 0
            mrc_gp = mrc_tx["bytes"] / mrc_tx["seconds"]
            ok = mrc_rx["ok"] and mrc_rx["sha256"] == mrc_tx["sha256"]
            rows.append((i, udp_rx["bytes"] / size, udp_gp, mrc_gp, mrc_tx["retransmits"], ok))
    finally:
        netns.delete(ns_a)
        netns.delete(ns_b)
    print(f"single-QP goodput over one veth, {size} B per transfer, {PAYLOAD} B payload per packet")
    print(f"{'run':>3} {'UDP delivered':>13} {'UDP MB/s':>9} {'MRC MB/s':>9} {'MRC/UDP':>8} {'rtx':>5} {'sha256':>6}")
    for i, frac, u, m, rtx, ok in rows:
        ratio = m / u if u else float("nan")
        print(f"{i:>3} {frac:>12.1%} {u / 1e6:>9.1f} {m / 1e6:>9.1f} {ratio:>8.2f} {rtx:>5} {'ok' if ok else 'BAD':>6}")
    _, _, u, m, _, _ = max(rows, key=lambda r: r[3])
    result("MRC single-QP goodput (best run)", m / 1e6, "MB/s", "plain UDP blast", u / 1e6)
    print("UDP: unreliable blast, goodput of the datagrams that arrived; MRC: reliable, verified by SHA-256")
    if not all(r[5] for r in rows):
        print("an MRC transfer did not verify (SHA-256 mismatch)")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
