"""The build step of the mrckit package: it compiles the dataplanes that ship inside it.

Everything declarative lives in pyproject.toml; this file only adds two setuptools commands:

- ``build_py`` also runs ``make bpf native`` (the Makefile holds the one copy of the clang and
  gcc flags), writing the BPF objects into ``mrckit/bpf/obj/`` and ``libmrcep.so`` into
  ``mrckit/endpoint/native/`` of the build tree, or of ``controller/`` in an editable install.
  p4c's outputs reach the package through ``controller/mrckit/p4`` (a link to ``p4src/build``),
  declared as package data.
- ``bdist_wheel`` tags the wheel ``py3-none-<platform>``: no CPython extension module, but BPF
  objects and a shared library built for this kernel's architecture (docs/packaging.md).

Why a setuptools hook and not an in-tree PEP 517 backend: setuptools already finds the packages,
writes the entry points and builds editable installs; a custom backend would redo all of that
to add one compile step.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from setuptools import Distribution, setup
from setuptools.command.bdist_wheel import bdist_wheel
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent
TOOLS = {"make": "make", "clang": "clang", "gcc": "gcc"}
HEADERS = {"/usr/include/bpf/libbpf.h": "libbpf-dev", "/usr/include/isa-l/crc.h": "libisal-dev"}


def _missing_tools() -> list[str]:
    missing = [pkg for tool, pkg in TOOLS.items() if shutil.which(tool) is None]
    return missing + [pkg for path, pkg in HEADERS.items() if not os.path.exists(path)]


def compile_dataplanes(package: Path) -> None:
    """Build the BPF objects and the native endpoint library into the package folder
    ``package`` (``.../mrckit``) with the Makefile's rules."""
    missing = _missing_tools()
    if missing:
        raise SystemExit("mrckit's build compiles its BPF objects and native library: install the Debian "
                         f"packages {' '.join(missing)} (or run `make deps` in the clone) and build again")
    subprocess.run(["make", "-s", "-C", str(HERE), "bpf", "native", "DEPS=",
                    f"BPF_OUT={package / 'bpf' / 'obj'}",
                    f"NATIVE_LIB={package / 'endpoint' / 'native' / 'libmrcep.so'}"], check=True)


class BuildPyWithDataplanes(build_py):
    """build_py, then the dataplanes into the same package tree."""

    def run(self) -> None:
        super().run()
        if self.editable_mode:
            package = HERE / self.get_package_dir("mrckit")
        else:
            package = Path(self.build_lib).resolve() / "mrckit"
        compile_dataplanes(package)


class BinaryDistribution(Distribution):
    """Not pure Python: installs into platlib, and the wheel is not tagged ``any``."""

    def has_ext_modules(self) -> bool:
        return True


class PlatformWheel(bdist_wheel):
    """A platform wheel without a Python ABI: ``py3-none-linux_<arch>``."""

    def get_tag(self) -> tuple[str, str, str]:
        _, _, plat = super().get_tag()
        return "py3", "none", plat


setup(distclass=BinaryDistribution, cmdclass={"build_py": BuildPyWithDataplanes, "bdist_wheel": PlatformWheel})
