"""The fabric emulator on one machine: namespaces, veth links, switch targets, host agents, the
controller, faults, their processes, state and teardown (design sections 8 and 9). See
``docs/fabric.md``. The applications that run on it (the demo, traffic) are ``mrckit.apps``,
which this package never imports.

- :class:`Fabric` (``fabric.py``): ``Fabric.up(topology, name=..., target=...)`` builds and
  programs a fabric; ``Fabric.open(name)`` opens a running one; ``fail_link``,
  ``fail_switch``, ``restore``; ``host(name)`` gives a :class:`HostNode` to run commands or
  open sockets inside a host's namespace.
- ``state.py``: the state file under ``/run/mrckit/<name>/``; ``teardown.py``: ``down``,
  ``down_all``; ``faultctl.py``: link and switch faults; ``faults.py``: the fault BPF program.
- ``hostref.py``: ``find_host`` looks a host name up among the running fabrics (its NIC
  address and namespace), for ``mrc write``/``mrc listen h1-0``.
"""


def __getattr__(name: str):
    # Lazy: ``mrckit.fabric.faults`` is used alone (by tests and the host), without the rest.
    if name in ("Fabric", "HostNode"):
        from . import fabric

        return getattr(fabric, name)
    raise AttributeError(name)
