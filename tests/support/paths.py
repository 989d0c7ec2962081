"""Where the tests find the repository and p4c's committed outputs."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
"""The repository's top directory."""
P4INFO = ROOT / "p4src/build/mrc_switch.p4info.txtpb"
"""p4c's P4Info of ``mrc_switch.p4`` (text proto), as committed."""
DEVICE_CONFIG_PATH = ROOT / "p4src/build/mrc_switch.json"
"""p4c's bmv2 JSON of ``mrc_switch.p4``: the device config every P4Runtime pipeline push sends."""
DEVICE_CONFIG = DEVICE_CONFIG_PATH.read_bytes()
"""The device config's bytes."""
