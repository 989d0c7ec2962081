"""Run by p4runtime-shell's own Python (the .venv-p4rt virtualenv), never imported by pytest.

Usage: python p4rt_shell_session.py ADDRESS P4INFO DEVICE_CONFIG STEP
STEP "setup" pushes the pipeline; "write" inserts in every table and modifies the default
entries; "modify", "delete" and "read" act on what "write" made. "ecmp" inserts ecmp_selector
members 2 and 3, group 7 of both, and ipv6_fib entries naming the group and a member;
"ecmp-modify" and "ecmp-delete" change and remove them; "ecmp-bad" tries a weighted member.
"metadata" inserts usid_fib entries with and without metadata and reads them back, also
filtered by metadata and by action (spec 9.1.6). "arbitration" tries one insert with the
shell's election id (0, 1) and reports the error, if any (spec 5.3: primary or not).
Each run prints one JSON object with what p4runtime-shell read back, so the test can compare
it with the BPF maps.
"""

import json
import sys

import p4runtime_sh.shell as sh

KEY = "hdr.outer_ipv6.dst_addr[127:80]"
PORT_KEY = "standard_metadata.egress_spec"
FIB_KEY = "hdr.outer_ipv6.dst_addr"
SELECTOR = "ecmp_selector"
NET, HOST = "2001:db8:100:1::/64", "2001:db8:100:1::2/128"


def entry(table, key_field, key, action=None, **params):
    te = sh.TableEntry(table)(action=action) if action else sh.TableEntry(table)
    te.match[key_field] = key
    for name, value in params.items():
        te.action[name] = value
    return te


def dump(table):
    out = []
    for te in sh.TableEntry(table).read():
        msg = te.msg()
        out.append({"key": msg.match[0].exact.value.hex(), "action": msg.action.action.action_id,
                    "params": [p.value.hex() for p in msg.action.action.params]})
    return out


def counters(name, index=None):
    ce = sh.CounterEntry(name)
    if index is not None:
        ce.index = index
    return [(c.msg().index.index, c.msg().data.packet_count, c.msg().data.byte_count) for c in ce.read()]


def member(member_id, action, **params):
    m = sh.ActionProfileMember(SELECTOR)(action=action, member_id=member_id)
    for name, value in params.items():
        m.action[name] = value
    return m


def route(prefix, **ref):
    te = sh.TableEntry("ipv6_fib")
    te.match[FIB_KEY] = prefix
    for name, value in ref.items():  # member_id= or group_id=
        setattr(te, name, value)
    return te


def ecmp_step(step, out):
    if step == "ecmp":
        member(2, "set_egress", port="1").insert()
        member(3, "set_egress", port="2").insert()
        sh.ActionProfileGroup(SELECTOR)(group_id=7).add(3).add(2).insert()
        route(NET, group_id=7).insert()
        route(HOST, member_id=3).insert()
    elif step == "ecmp-modify":
        member(2, "set_egress", port="4").modify()
        sh.ActionProfileGroup(SELECTOR)(group_id=7).add(2).modify()
        route(HOST, member_id=2).modify()
    elif step == "ecmp-delete":
        route(NET).delete()
        route(HOST).delete()
        sh.ActionProfileGroup(SELECTOR)(group_id=7).delete()
        sh.ActionProfileMember(SELECTOR)(member_id=2).delete()
        sh.ActionProfileMember(SELECTOR)(member_id=3).delete()
    elif step == "ecmp-bad":
        try:
            sh.ActionProfileGroup(SELECTOR)(group_id=8).add(2, weight=3).insert()
            out["error"] = None
        except Exception as exc:  # p4runtime-shell's P4RuntimeWriteException
            out["error"] = str(exc)
    out["members"] = sorted([m.msg().member_id, m.msg().action.action_id, [p.value.hex() for p in m.msg().action.params]]
                            for m in sh.ActionProfileMember(SELECTOR).read())
    out["groups"] = sorted([g.msg().group_id, [(x.member_id, x.weight) for x in g.msg().members]]
                           for g in sh.ActionProfileGroup(SELECTOR).read())
    out["routes"] = sorted([te.msg().match[0].lpm.value.hex(), te.msg().match[0].lpm.prefix_len,
                            te.msg().action.WhichOneof("type"), te.msg().action.action_profile_member_id
                            or te.msg().action.action_profile_group_id]
                           for te in sh.TableEntry("ipv6_fib").read())


def metadata_step(out):
    """Entries with metadata; what reads return: all, filtered by metadata, by action."""
    tagged = entry("usid_fib", KEY, "0xfcbbbb00a001", "drop")
    tagged.metadata = b"shell"
    tagged.insert()
    entry("usid_fib", KEY, "0xfcbbbb00a002", "set_egress", port="5").insert()

    def keys(te):
        return sorted([t.msg().match[0].exact.value.hex(), t.msg().metadata.hex()] for t in te.read())

    out["all"] = keys(sh.TableEntry("usid_fib"))
    by_metadata = sh.TableEntry("usid_fib")
    by_metadata.metadata = b"shell"
    out["by_metadata"] = keys(by_metadata)
    out["by_action"] = keys(sh.TableEntry("usid_fib")(action="set_egress"))


def main():
    address, p4info, device_config, step = sys.argv[1:5]
    config = sh.FwdPipeConfig(p4info, device_config) if step == "setup" else None
    sh.setup(device_id=1, grpc_addr=address, election_id=(0, 1), config=config, verbose=False)
    out = {"step": step}
    try:
        if step == "write":
            entry("my_usid", KEY, "0xfcbbbb000101", "usid_un").insert()
            entry("usid_fib", KEY, "0xfcbbbb001001", "set_egress", port="2").insert()
            entry("port_config", PORT_KEY, "2", "set_port", src_mac="02:00:00:00:00:a2", dst_mac="02:00:00:00:00:b2",
                  faces_host="1", trim_threshold="100", ecn_threshold="50").insert()
            default = sh.TableEntry("usid_fib")(is_default=True)
            default.action = sh.Action("set_egress")
            default.action["port"] = "7"
            default.modify()
        elif step == "modify":
            entry("my_usid", KEY, "0xfcbbbb000101", "NoAction").modify()
            entry("usid_fib", KEY, "0xfcbbbb001001", "set_egress", port="3").modify()
            entry("port_config", PORT_KEY, "2", "set_port", src_mac="02:00:00:00:00:a2", dst_mac="02:00:00:00:00:c2",
                  faces_host="0", trim_threshold="10", ecn_threshold="5").modify()
        elif step == "delete":
            entry("my_usid", KEY, "0xfcbbbb000101").delete()
            entry("usid_fib", KEY, "0xfcbbbb001001").delete()
            entry("port_config", PORT_KEY, "2").delete()
            sh.TableEntry("usid_fib")(is_default=True).modify()  # no action: back to the initial default
        elif step == "duplicate":
            try:
                entry("usid_fib", KEY, "0xfcbbbb001001", "set_egress", port="2").insert()
                out["error"] = None
            except Exception as exc:  # p4runtime-shell's P4RuntimeWriteException
                out["error"] = str(exc)
        elif step == "arbitration":
            # The shell arbitrates once, with election id (0, 1): a write shows whether that
            # made it primary.
            try:
                entry("usid_fib", KEY, "0xfcbbbb001001", "drop").insert()
                out["error"] = None
            except Exception as exc:  # p4runtime-shell's P4RuntimeWriteException / P4RuntimeException
                out["error"] = str(exc)
        elif step == "metadata":
            metadata_step(out)
        elif step.startswith("ecmp"):
            ecmp_step(step, out)
        out["tables"] = {t: dump(t) for t in ("my_usid", "usid_fib", "port_config")}
        out["default"] = [te.msg().action.action.params[0].value.hex() if te.msg().action.action.params else ""
                          for te in sh.TableEntry("usid_fib")(is_default=True).read()]
        out["tx_port_2"] = counters("tx_port", 2)
        out["drop_reason"] = counters("drop_reason")
        out["cells"] = len(counters("rx_port"))
    finally:
        sh.teardown()
    print("RESULT " + json.dumps(out))


if __name__ == "__main__":
    main()
