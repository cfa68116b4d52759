"""The scratch pane's sort of a long table runs in a thread (issue 22), through the real
app (Pilot) on a real scratch folder: `s` sorted 100,000 keys on the UI thread; the
order that lands is the one asked for last, and a short table still sorts at once."""

from __future__ import annotations

import threading
from dataclasses import replace

from engine.config import Settings
from hermes_tui.app import HermesApp
from tests.support import wait_until_pilot as wait_for
from tests.support.scratch import make_entry, target_of
from widgets.scratch import scratch_pane
from widgets.scratch.scratch_pane import ScratchPane


async def test_a_long_tables_sort_runs_in_a_thread_and_the_last_asked_lands(home, monkeypatch):
    monkeypatch.setattr(scratch_pane, "SORT_IN_THREAD", 2)  # "long": more than two rows here
    where: list[threading.Thread] = []
    real = scratch_pane.sorted_keys

    def watched(*args):
        where.append(threading.current_thread())
        return real(*args)

    t = target_of(home)
    for name, size in (("a-small", 10), ("b-big", 5000), ("c-mid", 700)):
        make_entry(t.scratch_dir, name, {"f": "x" * size})
    s = Settings()
    app = HermesApp(home, replace(s, scratch=replace(s.scratch, arrival_hours=0.0)), home_label="~/.hermes")
    async with app.run_test(size=(160, 48)) as pilot:
        pane = app.query_one(ScratchPane)
        await wait_for(pilot, lambda: pane.last_survey is not None and pane.table.row_total == 3)
        monkeypatch.setattr(scratch_pane, "sorted_keys", watched)
        await pilot.press("3")
        for _ in range(3):  # name -> state -> idle -> size: the last one asked for lands
            await pilot.press("s")
        assert pane.sort_column == "size"
        await wait_for(pilot, lambda: pane.table.keys == ["e:b-big", "e:c-mid", "e:a-small"],
                       what="the table sorted by size, biggest first")
        assert where and threading.main_thread() not in where
