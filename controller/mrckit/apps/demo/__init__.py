"""``mrc demo``: one MRC write across the emulated fabric, a link failed and restored mid-flight,
every byte verified, and its report, plot and ECMP comparison. See ``docs/demo.md``.

``run`` drives it (``run_demo``); ``worker`` is the endpoint process in a host's namespace;
``observe`` and ``counters`` read the parts while it runs; ``scenario``, ``series`` and ``loss``
turn what was read into a ``report.DemoReport``; ``render`` and ``plots`` show it; ``compare``
runs it in both forwarding modes.
"""
