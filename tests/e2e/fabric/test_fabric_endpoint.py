"""The fabric as an endpoint user meets it: the agents' RTO the fabric gives them, and
`mrc write`/`mrc listen` naming fabric hosts (issue 7) on the session's small fabric."""

import yaml


def test_agents_and_controller_get_the_fabric_rto_of_50_ms(small_fabric):
    st = small_fabric.state
    for host in st.hosts:
        doc = yaml.safe_load((st.dir / "hosts" / f"{host}.yaml").read_text())
        assert int(doc["settings"]["rto_ns"]) == 50_000_000, host
    argv = st.controller["argv"]
    assert argv[argv.index("--agent-setting") + 1] == "rto_ns=50000000"
