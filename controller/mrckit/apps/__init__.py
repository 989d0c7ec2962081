"""Applications that run on the emulated fabric (``mrckit.fabric``): they import it, and it
never imports them. ``traffic``: many QPs at once in a pattern (docs/traffic.md)."""
