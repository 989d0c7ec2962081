"""Bring-up steps run in parallel: one function over many nodes on a few threads.

The work of one item is mostly waiting on the kernel or on a child process (``ip``, a BPF
load, a process start), so threads overlap it even on two cores. Each thread enters a node's
namespace with ``netns.enter`` (``setns`` acts on the calling thread only).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait

WORKERS = 8
"""Threads per step: enough to overlap the waits, few enough not to thrash two cores."""

Progress = Callable[[str, int, int], None]
"""``progress(step, done, total)``: called as each item of a bring-up step completes."""


def each(step: str, fn: Callable, items: Iterable, progress: Progress | None = None) -> None:
    """Run ``fn(item)`` for every item on :data:`WORKERS` threads; return once all are done,
    calling ``progress(step, done, total)`` as they complete.

    On a failure or an interrupt (Ctrl-C reaches the main thread, which waits here), the items
    not started are cancelled and the running ones are waited for, so the caller's teardown
    never races a thread that is still creating something.

    Raises:
        the first exception an item raised; KeyboardInterrupt as it came.
    """
    items = list(items)
    report = progress or (lambda *_: None)
    report(step, 0, len(items))
    pool = ThreadPoolExecutor(min(WORKERS, max(len(items), 1)), thread_name_prefix=f"fabric-{step}")
    try:
        pending = {pool.submit(fn, item) for item in items}
        done_count = 0
        while pending:
            done, pending = wait(pending, return_when=FIRST_EXCEPTION)
            for future in done:
                future.result()  # raises the item's error
            done_count += len(done)
            report(step, done_count, len(items))
    except BaseException:
        _drain(pool)
        raise
    pool.shutdown(wait=True)


def _drain(pool: ThreadPoolExecutor) -> None:
    """Cancel what has not started and wait for the running items, through any further
    Ctrl-C: the teardown that follows must not race a thread still making something."""
    while True:
        try:
            pool.shutdown(wait=True, cancel_futures=True)
            return
        except KeyboardInterrupt:
            continue
