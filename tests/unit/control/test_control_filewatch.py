"""The controller's report inbox wakes on a write (inotify), not on a tick."""

import asyncio

from mrckit.control.reports import FileWatch, ReportInbox, report_link


def test_a_report_wakes_the_watch_and_is_read(tmp_path):
    async def run():
        inbox = ReportInbox(tmp_path / "lab.links.jsonl")
        with FileWatch(inbox.path) as watch:
            assert watch.fd is not None
            waiter = asyncio.create_task(watch.changed(None))
            await asyncio.sleep(0.05)
            assert not waiter.done()  # nothing written: no wake-up
            (tmp_path / "other.json").write_text("{}")  # another file of the folder
            await asyncio.sleep(0.05)
            assert not waiter.done()
            report_link("lab", "p0/t0-0/t1-0", up=False, status_dir=tmp_path)
            await asyncio.wait_for(waiter, 10)
            [r] = inbox.read_new()
            assert (r.link, r.up) == ("p0/t0-0/t1-0", False)

    asyncio.run(run())
