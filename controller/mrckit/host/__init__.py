"""mrckit.host: the host side of MRC (design section 5, docs/host.md).

Imports ``bpf``, ``wire`` and ``proto`` only (design section 2). Bottom up:

- ``maps``: ctypes views of the maps of ``ebpf/mrc_host.bpf.c`` (EV sets, plane ports,
  stats, events); ``dataplane``: :class:`~mrckit.host.dataplane.HostDataplane` loads the
  program (tc egress on the NIC device, XDP ingress on each plane port) and owns those maps.
- ``evset``: :func:`~mrckit.host.evset.build_template`, the template EV set and its backups.
- ``config``: :class:`~mrckit.host.config.AgentConfig` (the controller's host config plus
  :class:`~mrckit.host.config.Settings`: timers in ns, counts in EVs) and its proto form.
- ``agent``: :class:`~mrckit.host.agent.HostAgent`, one per host: ``configure(cfg)`` attaches
  everything; a sweep retires EVs on RTO and replaces them, probes bring them back, a port
  going down retires its plane (``sweep``, ``probing``, ``ports``, mixins checked against
  ``core``'s :class:`~mrckit.host.core.AgentCore`); ``close()`` detaches.
- ``service``: the gRPC ``HostAgent`` service (``proto/host_agent.proto``) and ``serve``.
- ``run``: the agent as a process (``mrc host up/down``): ``load_config``, ``run_agent``,
  ``stop_agent``; ``nicdev``: the virtual NIC device the NIC address lives on.
- ``planestats``: per-plane statistics of the EV sets (``HostAgent.plane_stats``, failure
  reports): the localisation evidence of EV-hash mode.

Two forwarding modes (``AgentConfig.mode``): ``srv6`` pushes the outer uSID header (design
3.1); ``ecmp`` (EV-hash mode) sends the packet as is with the EV in its flow label and
UDP source port, the switches hash it, and EVs are opaque to the agent (docs/host.md).

Errors: :class:`mrckit.errors.MrcError` for bad configs, :class:`mrckit.bpf.BpfError` when
the kernel refuses a program or an attachment.
"""
