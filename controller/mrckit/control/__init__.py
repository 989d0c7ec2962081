"""mrckit.control: the fabric controller (design section 7).

Talks to switches only over P4Runtime (finsy's asyncio client) and to hosts only over the host
agent's gRPC API, so it cannot tell bmv2 from the eBPF target, nor an emulated node from a real
one; whatever sits above it talks to it over its own gRPC northbound (``northbound.py``,
``client.py``). Commands, usage from Python, the modules and the failure reaction:
``docs/controller.md``.
"""

from .controller import Controller, HostState, SwitchState
from .diff import EcmpDiff, EcmpTables, EntryDiff, diff_ecmp, diff_entries
from .hosts import HostSession, host_config_proto, open_host
from .localise import Localisation, localise
from .p4rt import SwitchSession, WriteCounts, default_election_id, open_session
from .pipeline import Pipeline, load_pipeline
from .reactor import Action, FailureReactor
from .client import RUN_DIR, ControllerClient, controller_address, read_status, report_link
from .reports import LinkReport
from .reroute import Reroute, Rerouter
from .status import saved_status_path
from .targets import DEFAULT_DEVICE_ID, HostTarget, SwitchTarget, targets_from_topology
from .timeline import Mark, Timeline, format_marks

__all__ = [
    "Controller", "HostState", "SwitchState", "EntryDiff", "diff_entries", "EcmpDiff", "EcmpTables", "diff_ecmp",
    "LinkReport", "report_link", "Reroute", "Rerouter", "ControllerClient", "controller_address", "RUN_DIR",
    "HostSession", "host_config_proto",
    "open_host", "Localisation", "localise", "SwitchSession", "WriteCounts", "default_election_id", "open_session",
    "Pipeline", "load_pipeline", "Action", "FailureReactor", "read_status", "saved_status_path",
    "DEFAULT_DEVICE_ID", "HostTarget", "SwitchTarget", "targets_from_topology", "Mark", "Timeline", "format_marks",
]
