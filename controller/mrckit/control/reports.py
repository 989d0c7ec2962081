"""Link-state reports to a running controller: ``mrc controller link LINK --down|--up``.

A real switch learns that a port went down from its own PHY; P4Runtime has no standard message
for it, so whoever knows (the fabric emulator's fault commands, an operator, a monitoring
system) reports it. In EV-hash mode the controller reroutes on such a report (``reroute.py``);
in SRv6 mode it DENIES the link on every host at once (``reactor.py``), and lifts it on a
report that the link is up.

The reports go to an append-only JSON-lines file beside the status file,
``<status dir>/<name>.links.jsonl``, one line per report::

    {"link": "p0/t0-1/t1-0", "up": false, "time_ns": 1764470692942506000, "source": "fault"}

Chosen like the status file (``status.py``): no extra server to secure, readable with ``cat``,
and a restarted controller reads it again to learn which links are down. Each line is written
with one ``write`` on an ``O_APPEND`` descriptor, so concurrent reporters do not interleave.
"""

from __future__ import annotations

import asyncio
import ctypes
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

from ..errors import MrcError
from .status import STATUS_DIR, status_path


@dataclass(frozen=True)
class LinkReport:
    """One report: ``link`` (design 3.3 name) went down (``up`` False) or came back, at
    ``time_ns`` (wall clock), according to ``source``."""

    link: str
    up: bool
    time_ns: int
    source: str = ""


def reports_path(name: str, directory: Path | str = STATUS_DIR) -> Path:
    """The report file of the controller called ``name``: ``directory/<name>.links.jsonl``.

    Raises:
        MrcError: a bad controller name (see :func:`status_path`).
    """
    return status_path(name, directory).with_suffix(".links.jsonl")


def report_link(name: str, link: str, *, up: bool, status_dir: Path | str = STATUS_DIR, time_ns: int | None = None,
                source: str = "") -> LinkReport:
    """Tell the controller called ``name`` that ``link`` went down or came back up.

    The link name is checked for its form here and against the topology by the controller.

    Raises:
        MrcError: a malformed link name, a bad controller name, or the file cannot be written.
    """
    from ..wire.addressing import parse_link_name

    try:
        parse_link_name(link)
    except ValueError as exc:
        raise MrcError(f"link {link!r}: {exc}") from None
    report = LinkReport(link, up, time.time_ns() if time_ns is None else int(time_ns), source)
    path = reports_path(name, status_dir)
    line = json.dumps({"link": link, "up": up, "time_ns": report.time_ns, "source": source}) + "\n"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line.encode())
        finally:
            os.close(fd)
    except OSError as exc:
        raise MrcError(f"link report {path}: {exc.strerror or exc}") from None
    return report


class ReportInbox:
    """The reader side: follows a report file from where it last stopped.

    Args:
        path: the report file (it need not exist yet).
    """

    def __init__(self, path: Path):
        self.path = Path(path)
        self._offset = 0
        self.bad_lines = 0

    def read_new(self) -> list[LinkReport]:
        """The complete lines written since the last call (none if the file is absent).
        Malformed lines are counted in :attr:`bad_lines` and skipped."""
        try:
            with open(self.path, "rb") as f:
                f.seek(self._offset)
                data = f.read()
        except FileNotFoundError:
            return []
        end = data.rfind(b"\n") + 1  # a line still being written waits for the next call
        self._offset += end
        out = []
        for raw in data[:end].splitlines():
            try:
                d = json.loads(raw)
                out.append(LinkReport(str(d["link"]), bool(d["up"]), int(d["time_ns"]), str(d.get("source", ""))))
            except (ValueError, KeyError, TypeError):
                self.bad_lines += 1
        return out

    def discard(self) -> None:
        """Remove the file (a fresh controller must not take a dead fabric's reports)."""
        self.path.unlink(missing_ok=True)
        self._offset = 0


IN_MODIFY, IN_CLOSE_WRITE, IN_MOVED_TO, IN_CREATE = 0x2, 0x8, 0x80, 0x100
IN_NONBLOCK, IN_CLOEXEC = 0o4000, 0o2000000
"""linux/inotify.h."""


class FileWatch:
    """Wakes a coroutine when ``path`` is created or written, through inotify on its folder
    (the file need not exist yet). ``fd`` is None where inotify is unavailable; then
    :meth:`changed` only sleeps. Use as a context manager inside a running event loop."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.fd: int | None = None
        self._event: asyncio.Event | None = None

    def __enter__(self) -> "FileWatch":
        self._event = asyncio.Event()
        libc = ctypes.CDLL(None, use_errno=True)
        fd = libc.inotify_init1(IN_NONBLOCK | IN_CLOEXEC)
        if fd < 0:
            return self
        self.path.parent.mkdir(parents=True, exist_ok=True)
        mask = IN_MODIFY | IN_CLOSE_WRITE | IN_MOVED_TO | IN_CREATE
        if libc.inotify_add_watch(fd, str(self.path.parent).encode(), mask) < 0:
            os.close(fd)
            return self
        self.fd = fd
        asyncio.get_running_loop().add_reader(fd, self._readable)
        return self

    def _readable(self) -> None:
        try:
            data = os.read(self.fd, 65536)
        except BlockingIOError:
            return
        name = self.path.name.encode()
        offset = 0
        while offset + 16 <= len(data):  # struct inotify_event: wd, mask, cookie, len, name
            size = int.from_bytes(data[offset + 12:offset + 16], "little")
            if data[offset + 16:offset + 16 + size].rstrip(b"\0") == name:
                self._event.set()
            offset += 16 + size

    async def changed(self, timeout: float | None) -> None:
        """Return once the file changed since the last call, or after ``timeout`` s (None:
        no limit)."""
        try:
            await asyncio.wait_for(self._event.wait(), timeout)
        except asyncio.TimeoutError:
            pass
        self._event.clear()

    def __exit__(self, *exc) -> None:
        if self.fd is not None:
            asyncio.get_running_loop().remove_reader(self.fd)
            os.close(self.fd)
            self.fd = None
