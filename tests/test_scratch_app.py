"""The Scratch and Prune log panes through Pilot: the listing, the approval modal
(No changes nothing; Yes removes exactly the plan's candidates), restore, the log
table and its filters; an SVG snapshot."""

from __future__ import annotations

import os
from pathlib import Path

from engine.config import ScratchSettings, Settings
from engine.home import HomeLayout
from engine.scratch.audit import AuditLog
from hermes_tui.app import HermesApp
from tests.support import screen_shown, wait_workers
from tests.support import wait_until_pilot as wait_for
from tests.support.scratch import HOUR, make_entry, target_of
from widgets.prune_log.prune_log_pane import PruneLogPane
from widgets.scratch.prune_modal import PruneModal
from widgets.scratch.scratch_pane import ScratchPane

WIDE = (160, 48)


def build(home: HomeLayout) -> dict[str, Path]:
    t = target_of(home)
    paths = {
        "idle-lane": make_entry(t.scratch_dir, "idle-lane", {"src/main.py": "print(1)\n" * 50}),
        "old-run": make_entry(t.scratch_dir, "old-run", {"out.log": "x" * 2000}, hours=80),
        "active-lane": make_entry(t.scratch_dir, "active-lane", {"a/b/c/deep.txt": "work"}),
        "parked": make_entry(t.scratch_dir, "parked", {".scratch-keep": "", "notes.md": "keep"}),
    }
    deep = paths["active-lane"] / "a" / "b" / "c" / "deep.txt"
    when = deep.stat().st_mtime + 28 * HOUR  # written 2h ago
    os.utime(deep, (when, when))
    return paths


def make_app(home: HomeLayout) -> HermesApp:
    return HermesApp(home, Settings(scratch=ScratchSettings(arrival_hours=0.0)), home_label="~/.hermes")


async def _surveyed(pilot, app):
    pane = app.query_one(ScratchPane)
    assert await wait_for(pilot, lambda: pane.last_survey is not None)
    return pane


async def test_pane_lists_entries_with_state_and_reason(home):
    build(home)
    app = make_app(home)
    async with app.run_test(size=WIDE) as pilot:
        pane = await _surveyed(pilot, app)
        table = pane.table
        assert table.row_count == 4
        states = {table.get_row(k)[0].plain: table.get_row(k)[1].plain for k in pane.table.keys}
        assert states == {"idle-lane": "idle", "old-run": "idle", "active-lane": "active", "parked": "kept"}
        why = table.get_row("e:parked")[4].plain
        assert why == ".scratch-keep marker"
        assert table.get_row("e:old-run")[2].plain == "3d 8h"
        assert "4 entries" in pane.border_subtitle and "2 idle" in pane.border_subtitle
        table.move_cursor(row=table.get_row_index("e:parked"))
        await pilot.pause()
        detail = str(pane.query_one("#scratch-detail").render())
        assert "parked" in detail and "kept: .scratch-keep marker" in detail


async def test_sort_cycles_and_orders_by_size(home):
    build(home)
    app = make_app(home)
    async with app.run_test(size=WIDE) as pilot:
        pane = await _surveyed(pilot, app)
        await pilot.press("3")
        for _ in range(3):  # name -> state -> idle -> size
            await pilot.press("s")
        assert pane.sort_column == "size"
        table = pane.table
        sizes = [table.get_row_at(i)[3].sort_key for i in range(table.row_count)]
        assert sizes == sorted(sizes, reverse=True)


async def test_modal_no_changes_nothing(home):
    paths = build(home)
    app = make_app(home)
    async with app.run_test(size=WIDE) as pilot:
        await _surveyed(pilot, app)
        await pilot.press("3", "p")
        assert await wait_for(pilot, lambda: screen_shown(app, PruneModal))
        modal = app.screen
        assert [c.name for c in modal.plan.candidates] == ["idle-lane", "old-run"]
        body = str(modal.query_one(".body").render())
        assert "idle-lane" in body and "Staying:" in body and ".scratch-keep marker" in body
        assert app.focused.id == "no"  # default No
        await pilot.press("enter")
        assert await wait_for(pilot, lambda: not isinstance(app.screen, PruneModal))
        await wait_workers(app, ["scratch-prune"])  # a prune the No started by mistake has ended
    assert all(p.exists() for p in paths.values())
    assert not home.prune_log.exists()


async def test_modal_yes_removes_exactly_the_plan_candidates(home):
    paths = build(home)
    app = make_app(home)
    async with app.run_test(size=WIDE) as pilot:
        pane = await _surveyed(pilot, app)
        await pilot.press("3", "p")
        assert await wait_for(pilot, lambda: screen_shown(app, PruneModal))
        planned = {c.path for c in app.screen.plan.candidates}
        await pilot.click("#yes")
        assert await wait_for(pilot, lambda: not paths["idle-lane"].exists() and not pane.pruning)
        assert await wait_for(pilot, lambda: "e:idle-lane" not in pane.table.keys and "e:old-run" not in pane.table.keys)
        gone = {str(p) for p in paths.values() if not p.exists()}
        assert gone == planned
        # the quarantined rows are listed; u on one restores it
        qkeys = [k for k in pane.table.keys if k.startswith("q:")]
        assert len(qkeys) == 2
        table = pane.table
        restored = qkeys[0][2:].rsplit(".", 1)[0]
        # A background re-survey may re-sort the rows between placing the cursor and the
        # key: place it again until the key lands on the quarantined row (at most 3 tries).
        for _attempt in range(3):
            table.focus()
            table.move_cursor(row=table.get_row_index(qkeys[0]))
            await pilot.pause()
            if table.coordinate_to_cell_key((table.cursor_row, 0)).row_key.value != qkeys[0]:
                continue
            await pilot.press("u")
            await wait_workers(app, ["scratch-restore"])
            if paths[restored].exists():
                break
        assert paths[restored].exists()
        # the prune log pane shows what happened
        log = app.query_one(PruneLogPane)
        assert await wait_for(pilot, lambda: sum(r.action == "quarantined" for r in log.records) == 2)
        assert await wait_for(pilot, lambda: any(r.action == "restored" for r in log.records))


async def test_prune_log_pane_reads_rotations_colours_and_filters(home):
    home.ensure_dir(home.logs_dir)
    older = Path(f"{home.prune_log}.1")
    older.write_text("2026-09-30 12:00:00,000 scratch prune: removed '/s/rotated' (5 bytes)\n")
    with AuditLog(home.prune_log) as audit:
        audit.removed("/s/a", 10)
        audit.sent_term(42, "sleep", "/s/a")
        audit.kept("/s/b", ".scratch-keep marker")
        audit.rescued("/s/c")
    app = make_app(home)
    async with app.run_test(size=WIDE) as pilot:
        pane = app.query_one(PruneLogPane)
        assert await wait_for(pilot, lambda: len(pane.records) == 5)
        table = pane.query_one("#prune-log-table")
        assert table.get_row_at(0)[2].plain == "/s/rotated"  # oldest first
        assert [table.get_row_at(i)[1].plain for i in range(5)] == ["removed", "removed", "TERM", "kept", "rescued"]
        assert str(table.get_row_at(0)[1].style) == "bold red"
        await pilot.press("4", "a")  # action filter: removed
        assert await wait_for(pilot, lambda: table.row_count == 2)
        await pilot.press("escape")
        assert await wait_for(pilot, lambda: table.row_count == 5)
        await pilot.press("slash")
        await pilot.press(*"rescued")
        assert await wait_for(pilot, lambda: table.row_count == 1)
        # live tail: a new record appears without a restart
        with AuditLog(home.prune_log) as audit:
            audit.removed("/s/new", 1)
        assert await wait_for(pilot, lambda: len(pane.records) == 6)


def test_scratch_pane_snapshot(snap_compare, tmp_path):
    home = HomeLayout(tmp_path / "home").ensure()
    build(home)

    async def run_before(pilot):
        pane = pilot.app.query_one(ScratchPane)
        await wait_for(pilot, lambda: pane.last_survey is not None)
        await pilot.press("3", "z")
        await wait_for(pilot, lambda: pane.region.width == pilot.app.size.width)  # zoomed, laid out
        await wait_for(pilot, lambda: pilot.app.attention.current)  # the header's count is in

    assert snap_compare(make_app(home), terminal_size=(120, 24), run_before=run_before)


async def test_empty_home_shows_the_empty_states(home):
    app = make_app(home)
    async with app.run_test(size=WIDE) as pilot:
        pane = await _surveyed(pilot, app)
        assert pane.has_class("-empty")
        log = app.query_one(PruneLogPane)
        assert await wait_for(pilot, lambda: log.has_class("-empty"))
