"""The e2e switch tests reuse the frame builders and harness of tests/bpf/switch."""

import os


from support.switch_fixtures import switch  # noqa: F401  (the loaded-program fixture)


def pytest_sessionfinish(session, exitstatus):
    # The last line of defence for pins: switches of this run are named after its namespaces,
    # which start with the run prefix of tests/conftest.py (mrct<pid>).
    if os.geteuid() != 0:
        return
    from mrckit.switch.ebpf_target import pinned_switches, remove_pins

    prefix = f"mrct{os.getpid() % 100000}"
    for name in pinned_switches():
        if name.startswith(prefix):
            remove_pins(name)
