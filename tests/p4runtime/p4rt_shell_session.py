"""Run by p4runtime-shell's own Python (the .venv-p4rt virtualenv), never imported by pytest.

Usage: python p4rt_shell_session.py ADDRESS P4INFO DEVICE_CONFIG STEP
STEP "setup" pushes the pipeline; "write" inserts in every table and modifies the default
entries; "modify", "delete" and "read" act on what "write" made. Each run prints one JSON object
with what p4runtime-shell read back, so the test can compare it with the BPF maps.
"""

import json
import sys

import p4runtime_sh.shell as sh

KEY = "hdr.outer_ipv6.dst_addr[127:80]"
PORT_KEY = "standard_metadata.egress_spec"


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
