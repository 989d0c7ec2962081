"""Applications that run on the emulated fabric (``mrckit.fabric``): they import it, and it
never imports them (docs/architecture.md).

- ``demo``: ``mrc demo``, a write that survives a link failure (docs/demo.md);
- ``traffic``: ``mrc traffic``, many QPs at once in a pattern (docs/traffic.md);
- ``chaos``: ``mrc experiment chaos``, a soak under seeded faults (docs/chaos.md);
- ``pairwise``: ``mrc fabric check``, UDP between every pair of hosts (docs/fabric.md);
- ``common``: what they share (a worker process in a host's namespace, seeded data, JSON reports).
"""
