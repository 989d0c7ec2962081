"""Internal test support: frame builders, BPF and P4Runtime harnesses, golden cases and fixtures
shared by the test folders (docs/testing.md). On the path through pytest's ``pythonpath``
setting in pyproject.toml; the public packet-test API is ``mrckit.testing``."""
