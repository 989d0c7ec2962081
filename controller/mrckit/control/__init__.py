"""mrckit.control: the fabric controller (design section 7, issue 9).

Talks to switches only over P4Runtime (finsy's asyncio client) and to hosts only over the host
agent's gRPC API; imports ``topology``, ``wire`` and ``proto`` (design section 2). It cannot
tell bmv2 from the eBPF target, nor an emulated node from a real one. See ``docs/controller.md``.

Modules, bottom up:

- ``targets``: :class:`SwitchTarget` (name, P4Runtime address, device id, TLS) and
  :class:`HostTarget` (name, agent address, NIC device, agent settings, TLS);
  :func:`targets_from_topology` reads them from a topology's ``p4runtime:``/``agent:`` fields.
- ``pipeline``: :func:`load_pipeline` -> :class:`Pipeline` (P4Info + bmv2 JSON + cookie).
- ``diff``: :func:`diff_entries` (pure): insert / modify / delete; :func:`diff_ecmp` for the
  EV-hash mode members, groups and routes (:class:`EcmpTables`), in dependency order.
- ``p4rt``: :func:`open_session` -> :class:`SwitchSession` (arbitration, cookie check,
  VERIFY_AND_COMMIT only on a cookie mismatch, Read, batched Write) with :class:`WriteCounts`.
- ``hosts``: :func:`open_host` -> :class:`HostSession` (Configure, SetEvState by link,
  WatchEvents, GetStats).
- ``localise``: :func:`localise` (pure): failing and good paths -> :class:`Localisation`.
- ``reach``: ``newly_cut``, ``safe_subset`` (pure): which host pairs a deny set cuts off;
  the reactor's connectivity guard.
- ``reactor``: :class:`FailureReactor` (no I/O): events in, DENY / lift :class:`Action` s out,
  and the :class:`Timeline`.
- ``reports``: :class:`LinkReport`, a link down or up as reported to a running controller.
- ``reroute``: :class:`Rerouter` (no I/O): EV-hash mode's reaction: link reports in, the
  switches whose groups change out (issue 11).
- ``client``: :class:`ControllerClient` (``report_link``, ``status``, ``watch``), the client of
  a running controller's northbound (``mrckit/proto/controller.proto``); ``northbound``: its
  server, on the controller's loop.
- ``controller``: :class:`Controller`, the runtime; ``status``: its saved status, for a
  restarted successor.

Using it from the fabric emulator (``mrckit.fabric``), which starts the servers itself::

    from mrckit.control import Controller, HostTarget, SwitchTarget, load_pipeline

    ctl = Controller(topology,
                     [SwitchTarget("p0-t0-0", "unix:/run/mrckit/fab1/p0-t0-0.sock", device_id=1), ...],
                     [HostTarget("h0-0", "unix:/run/mrckit/fab1/h0-0.sock", nic_device="nic0"), ...],
                     load_pipeline(), target="ebpf", name="fab1")
    counts = asyncio.run(ctl.program_switches())   # {switch: WriteCounts}, one shot
    asyncio.run(ctl.configure_hosts())              # Configure agents that have no config yet

or, to keep the controller running (and kill/restart it under traffic), write the topology with
the addresses (``Switch.p4runtime``, ``Host.agent``; ``mrckit.topology.dump_topology``) and
start ``mrc controller run TOPO --name fab1`` as its own process (``subprocess.Popen``; never
fork a process that runs gRPC threads). It prints ``ready`` once every switch is reconciled
and every host configured, and serves its northbound on ``unix:/run/mrckit/controller/fab1.sock``:
``read_status("fab1")`` gives per switch the last and total :class:`WriteCounts`, per host its
state, the links believed down, the denials, the last localisation and the timeline;
``ControllerClient.named("fab1").watch()`` follows the timeline. In-process, ``await ctl.run(stop)``
does the same until the ``asyncio.Event`` ``stop`` is set; ``ctl.note_link_down(link)`` puts
a fault injection on the timeline.

EV-hash (ECMP) mode (issue 11): ``Controller(..., mode="ecmp")`` or ``mrc controller run TOPO
--mode ecmp`` programs ``ipv6_fib`` routes and ``ecmp_selector`` members and groups as well, and
reroutes on link reports instead of denying links on hosts: ``await ctl.link_report(link,
up=False)`` in-process, or ``report_link(name, link, up=False)`` (gRPC) / ``mrc controller link
LINK --down --name NAME`` for a controller in its own process. The timeline gets ``link_down``,
``first_assumed_bad``, ``reroute``, ``link_up`` and ``restore`` marks.

Device ids: finsy's default is 1, bmv2's 0. Every :class:`SwitchTarget` carries its own
(default 1, like our eBPF P4Runtime server); start bmv2 with ``--device-id 1`` or say
``device_id: 0`` in the topology.
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
