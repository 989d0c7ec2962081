"""A synthetic demo run, no fabric: the sender's EV table evolving as the agent would drive it.

Four paths (2 planes × 2 spines), 32 EVs each, one data packet of 2048 B per EV per tick of
10 ms at full rate. Path (0, 1) fails at 1 s:
- ``down``/``blackhole``: its EVs go ASSUMED_BAD 5 ms later and are replaced in their slots
  by backup EVs of spine 0 (fresh counters); at the restore (2 s) they are probed back and
  take their slots again;
- ``loss``/``flap``: the path carries a quarter of its normal rate and its EVs cycle through
  RTO_TIMEOUT and PROBE_OK.
"""

from __future__ import annotations

import hashlib

from mrckit.apps.demo.report import ByteCounts, EndpointCounts, FaultInfo, SpineCount, SwitchCounts
from mrckit.apps.demo.scenario import AgentEvent, ControllerEvent, RunRecord
from mrckit.apps.demo.series import Recorder

T0 = 10_000_000_000
MS = 1_000_000
PATHS = [(0, 0), (0, 1), (1, 0), (1, 1)]
PAYLOAD = 2048
NIC_B = "2001:db8:100:1::1"


def ev(plane: int, spine: int, salt: int) -> int:
    return plane << 28 | spine << 20 | salt


def synthetic_run(kind: str = "down", *, silent: bool = True, back: bool = True, ticks: int = 300,
                  corrupt: bool = False, drops: int | None = 100, flap_downs: int = 2,
                  path_retire: bool = False) -> RunRecord:
    """A RunRecord of ``ticks`` × 10 ms. ``silent=False`` keeps one packet per tick on the
    dead path during the fault; ``back=False`` never returns it; ``corrupt`` flips a byte.
    ``drops``: what the loss/blackhole program dropped; ``flap_downs``: the flap's down
    transitions reported to the controller during the fault; ``path_retire``: the dead path's
    EVs are retired in one step by path-aware retirement (one LOSS, 31 PATH_LOSS) instead of
    each by its own RTO_TIMEOUT."""
    t_fault, t_restore = T0 + 1000 * MS, T0 + 2000 * MS
    rec = Recorder(T0, PATHS)
    slots = {(p, s, i): [ev(p, s, i + 1), 0, 0] for p, s in PATHS for i in range(32)}  # ev, tx, last_tx
    retired: dict[int, list[int]] = {}
    events: list[AgentEvent] = []
    placed = 0
    fault_rows = restore_rows = None
    dead = [k for k in slots if k[:2] == (0, 1)]
    lossy = kind in ("loss", "flap")

    def rows():
        out = [dict(ev=v[0], plane=v[0] >> 28, t1=(v[0] >> 20) & 0xFF, tx_packets=v[1], last_tx_ns=v[2],
                    state="GOOD", retired=False) for v in slots.values()]
        out += [dict(ev=e, plane=e >> 28, t1=(e >> 20) & 0xFF, tx_packets=c[0], last_tx_ns=c[1],
                     state="ASSUMED_BAD", retired=True) for e, c in retired.items()]
        return out

    for tick in range(ticks + 1):
        now = T0 + tick * 10 * MS
        if now == t_fault:
            fault_rows = rows()
        if now == t_restore:
            restore_rows = rows()
        in_fault = t_fault <= now < t_restore
        if now == t_fault + 10 * MS and not lossy:
            for n, k in enumerate(dead):
                old = slots[k][0]
                reason = ("PATH_LOSS" if n else "LOSS") if path_retire else "RTO_TIMEOUT"
                t = t_fault + 5 * MS if path_retire else t_fault + 5 * MS + n
                events.append(AgentEvent("h0-0", t, NIC_B, old, "GOOD", "ASSUMED_BAD", reason))
                retired[old] = [slots[k][1], slots[k][2]]
                slots[k] = [ev(0, 0, 0x800 + n), 0, 0]
        if now == t_restore and not lossy and back:
            for n, k in enumerate(dead):
                old = ev(0, 1, k[2] + 1)
                events.append(AgentEvent("h0-0", now + 3 * MS, NIC_B, old, "ASSUMED_BAD", "GOOD", "PROBE_OK"))
                del retired[old]
                slots[k] = [old, 0, 0]
        if in_fault and lossy and tick % 10 == 0:
            k = dead[tick % 32]
            events.append(AgentEvent("h0-0", now, NIC_B, slots[k][0], "GOOD", "ASSUMED_BAD", "RTO_TIMEOUT"))
            events.append(AgentEvent("h0-0", now + 4 * MS, NIC_B, slots[k][0], "ASSUMED_BAD", "GOOD", "PROBE_OK"))
        for k, v in slots.items():
            on_dead = (v[0] >> 20) & 0xFF == 1 and v[0] >> 28 == 0
            if on_dead and in_fault and (lossy and tick % 4) :
                continue
            v[1] += 1
            v[2] = now
            placed += PAYLOAD
        if in_fault and not silent and not lossy and ev(0, 1, 1) in retired:
            retired[ev(0, 1, 1)][0] += 1
        rec.record(now + MS, placed, rows())
    size = placed
    data = hashlib.sha256(b"x" * 8).hexdigest()
    got = hashlib.sha256(b"y" * 8).hexdigest() if corrupt else data
    fault = FaultInfo(kind=kind, link="p0/t0-1/t1-1", node="p0-t1-1", ifname="t0-1", plane=0, spine=1,
                      loss_percent=10.0 if kind == "loss" else None, flap_hz=5.0 if kind == "flap" else None)
    return RunRecord(
        target="ebpf", topology=dict(planes=2, spines=2, leaves=3, hosts_per_leaf=2), sender="h0-0",
        receiver="h1-0", receiver_nic=NIC_B, fault=fault, recorder=rec, t_fault_ns=t_fault,
        t_restore_ns=t_restore, t_end_ns=T0 + ticks * 10 * MS + 2 * MS,
        bytes=ByteCounts(sent=size, placed=size, verified=0 if corrupt else size, sha256_sent=data,
                         sha256_received=got, hash_match=not corrupt),
        endpoint=EndpointCounts(data_packets=size // PAYLOAD, retransmits={"rto": 3, "sack_gap": 40},
                                retransmits_total=43, sacks=1000),
        switches=SwitchCounts(per_plane={"0": 100, "1": 120},
                              per_spine=[SpineCount(switch=f"p{p}-t1-{s}", plane=p, spine=s, packets=50 + s)
                                         for p, s in PATHS], trimmed=2, ecn_marked=5),
        events=events,
        controller=[ControllerEvent(t_fault + 30 * MS, "LOCALISED", ("p0/t0-1/t1-1",)),
                    ControllerEvent(t_fault + 31 * MS, "DENY", ("p0/t0-1/t1-1",)),
                    ControllerEvent(t_restore + 40 * MS, "LIFT", ("p0/t0-1/t1-1",))]
        + [ControllerEvent(t_fault + (20 + 200 * i) * MS, "LINK_DOWN", ("p0/t0-1/t1-1",))
           for i in range(flap_downs if kind == "flap" else 0)],
        dead_evs=frozenset(r["ev"] for r in fault_rows if (r["plane"], r["t1"]) == (0, 1) and not r["retired"]),
        fault_program_drops=drops if kind in ("loss", "blackhole") else None,
        fault_log=[(t_fault, f"{kind} p0/t0-1/t1-1"), (t_restore, "restore p0/t0-1/t1-1")],
        demo_log=[(T0, "write started"), (T0 + ticks * 10 * MS, "write complete")],
        fault_rows=fault_rows, restore_rows=restore_rows)


def with_rx(run, lost_per_ev: int, mode: str):
    """Give a synthetic run the responder's side: every packet arrives, dated by the last send
    of the sample that first counted it, but the first ``lost_per_ev`` packets that each EV of
    the failed path sent after the fault (the synthetic dead path sends a few before its EVs
    retire)."""
    run.mode = mode
    sent: dict[int, list[int]] = {}
    prev: dict[int, int] = {}
    for (t, per_ev), cut in zip(run.recorder.ev_samples, run.recorder.ev_last_tx):
        for ev, n in per_ev.items():
            sent.setdefault(ev, []).extend([cut.get(ev, t)] * (n - prev.get(ev, 0)))
        prev = per_ev
    dead = [ev for ev in sent if (ev >> 28, (ev >> 20) & 0xFF) == (0, 1)]
    for ev in dead:
        after = [t for t in sent[ev] if t > run.t_fault_ns]
        assert len(after) >= lost_per_ev, "the synthetic run sends too little after the fault"
        sent[ev] = [t for t in sent[ev] if t <= run.t_fault_ns] + after[lost_per_ev:]
    run.rx_sent = sent
    run.packets_sent = sum(prev.values())
    run.packets_received = sum(len(v) for v in sent.values())
    run.link_packets_lost = lost_per_ev * len(dead) + 7
    return run
