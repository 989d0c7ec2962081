"""What the applications on the fabric share: the bytes a seed gives, their reports' JSON
file, and the worker process each runs in a fabric host's namespace, which speaks JSON lines."""

from __future__ import annotations

import json
import random
import subprocess
import sys
import threading
from pathlib import Path

from pydantic import BaseModel

from ..errors import MrcError

RANDBYTES_CHUNK = 64 << 20
"""randbytes() draws size x 8 bits as one C int count, so 256 MiB and more overflow: draw in
64 MiB chunks (a multiple of 4 bytes, so the result equals one draw where one draw works)."""


def seeded_bytes(seed: int | str, size: int) -> bytes:
    """``size`` pseudo-random bytes from ``random.Random(seed)``, any size up to memory."""
    rng = random.Random(seed)
    return b"".join(rng.randbytes(min(RANDBYTES_CHUNK, size - off)) for off in range(0, size, RANDBYTES_CHUNK))


class JsonFile(BaseModel):
    """A report model that is saved as one indented JSON file."""

    def write_json(self, path: str | Path) -> None:
        """Write the report as indented JSON to ``path`` (folders are created)."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(self.model_dump_json(indent=2) + "\n")

    @classmethod
    def read_json(cls, path: str | Path):
        """Read a report of this class written by :meth:`write_json`.

        Raises:
            pydantic.ValidationError: the file is not a report of this class and schema.
        """
        return cls.model_validate_json(Path(path).read_text())


class JsonLinesProcess:
    """A worker process of an application (``python -m module argv...``) in a fabric host's
    namespace (``host``: a ``mrckit.fabric.HostNode``) that prints one JSON object a line:
    each line is merged into ``state``; :meth:`wait` blocks until a key appears. ``role``
    names it in errors (default: ``argv[0]``)."""

    def __init__(self, host, argv: list[str], *, module: str, role: str | None = None):
        self.name = f"{role or argv[0]} on {host.name}"
        self.proc = host.popen([sys.executable, "-m", module, *argv], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.state: dict = {}
        self._cv = threading.Condition()
        self._reader = threading.Thread(target=self._read, name=f"worker-{self.name}", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            try:
                msg = json.loads(line)
            except ValueError:
                continue
            with self._cv:
                self._take(msg)
                self.state.update(msg)
                self._cv.notify_all()
        with self._cv:
            self.state.setdefault("exited", True)
            self._cv.notify_all()

    def _take(self, msg: dict) -> None:
        """Called with each line before it is merged into ``state``: a subclass may pop keys
        it keeps elsewhere."""

    def wait(self, key: str, timeout: float) -> dict:
        """The state once ``key`` is in it. Raises MrcError if the process exits or times out."""
        with self._cv:
            self._cv.wait_for(lambda: key in self.state or "exited" in self.state or "error" in self.state, timeout)
            if key in self.state:
                return dict(self.state)
        why = self.state.get("error") or ("exited" if "exited" in self.state else f"no {key!r} in {timeout:.0f} s")
        raise MrcError(f"the {self.name} process: {why}{self._stderr()}")

    def check_alive(self) -> None:
        """Raises MrcError if the process died before finishing."""
        if "exited" in self.state and "done" not in self.state and "error" not in self.state:
            raise MrcError(f"the {self.name} process exited early{self._stderr()}")

    def _stderr(self) -> str:
        if self.proc.poll() is None:
            return ""
        tail = (self.proc.stderr.read() or "").strip().splitlines()[-3:]
        return (": " + " | ".join(tail)) if tail else ""

    def send(self, line: str) -> None:
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def close(self) -> None:
        """Close its stdin (the responder's cue to exit); terminate it if it lingers."""
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.terminate()
            self.proc.wait(5)
        self._reader.join(5)  # every line it printed is in ``state`` now
