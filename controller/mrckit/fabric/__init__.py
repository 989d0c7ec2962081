"""Fabric emulation on one machine: namespaces, veth links, faults, scenarios."""
