"""A mount inside a scratch entry is never entered and keeps its entry (issue 35.1).

The family: every walk that decides or deletes (the survey's walk, the size, the
plan, the re-check, the move, the verify walk, the delete walk, the quarantine
expiry) must tell a mount point from the entry's own directories. A bind mount of a
directory on the same filesystem has the same ``st_dev`` (and its root the same
inode as its source), so only the mount id tells it apart; before, a prune deleted
the bound directory's files (data outside scratch).

Real bind mounts (``mount --bind``) of a real "precious" directory outside scratch,
inside aged entries, with ``arrival_hours: 0`` (so the entry is idle by its mtimes),
through ``prune --yes`` (quarantine 0 and the default), the app's approve, the
automatic pass, a mount deeper inside, and mounts that appear after the plan. These
tests need root (as the suite has in CI) and say so when skipped.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from engine.fsutil import tree_size
from engine.scratch.activity import scan_activity
from engine.scratch.auto_pass import main as auto_pass_main
from engine.scratch.delete import DeleteStop, delete_tree, delete_unless_written
from engine.scratch.execute import execute_plan
from engine.scratch.plan import plan_prune
from engine.scratch.quarantine import quarantine_target
from engine.scratch.target import TRASH_PREFIX
from tests.conftest import run_cli
from tests.support.mounts import bind, intact, precious, unbind
from tests.support.scratch import HOUR, age_tree, log_text, make_entry, options, target_of

INSIDE = {"bind": "bind", "deep": "a/b/bind"}


@pytest.fixture
def binds():
    """``binds(src, dst)`` bind-mounts ``src`` on ``dst``; every mount is undone at the
    end of the test, wherever it is then."""
    made: list[int] = []

    def make(src: Path, dst: Path) -> None:
        dst.mkdir(parents=True, exist_ok=True)
        made.append(bind(src, dst))

    yield make
    for mount_id in reversed(made):
        unbind(mount_id)


def _mounted_entry(scratch: Path, tmp_path: Path, binds, where: str = "bind", name: str = "e") -> tuple[Path, Path]:
    """An idle entry (30h by its mtimes) with somebody's data bind-mounted at ``where``
    inside it; returns (entry, the data's own directory)."""
    data = precious(tmp_path)
    entry = make_entry(scratch, name, {"own.log": "the entry's own file\n"})
    binds(data, entry / where)
    age_tree(entry, 30)  # the mount point and everything behind it look old too: the worst case
    return entry, data


def _reason(where: str) -> str:
    return f"a mount inside: {where!r} (never entered, never pruned)"


@pytest.mark.parametrize("where", INSIDE.values(), ids=INSIDE.keys())
@pytest.mark.parametrize("quarantine", ["0", "default"])
def test_prune_yes_keeps_an_entry_with_a_bind_mount_inside_and_never_enters_it(home, tmp_path, binds, where,
                                                                                quarantine):
    t = target_of(home)
    config = "scratch:\n  arrival_hours: 0\n" + ("  quarantine_hours: 0\n" if quarantine == "0" else "")
    home.config_file.write_text(config)
    entry, data = _mounted_entry(t.scratch_dir, tmp_path, binds, where)
    other = make_entry(t.scratch_dir, "plain")  # an idle entry without a mount still goes

    listing = json.loads(run_cli("--home", str(home.root), "scratch", "--json").stdout)
    row = {e["name"]: e for e in listing["entries"]}["e"]
    assert row["state"] == "kept" and row["kept_reason"] == _reason(where)
    assert row["size_bytes"] == len("the entry's own file\n")  # the mount's bytes are not the entry's

    out = run_cli("--home", str(home.root), "prune", "--yes", "--json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert intact(data) and (entry / "own.log").exists() and (entry / where / "notes.txt").exists()
    assert {k["path"]: k["reason"] for k in doc["kept"]}[str(entry)] == _reason(where)
    assert doc["removed_count"] == 1 and not other.exists()
    assert f"kept {str(entry)!r} — {_reason(where)}" in log_text(home)
    text = run_cli("--home", str(home.root), "scratch").stdout
    assert _reason(where) in text


def test_the_entry_that_is_a_mount_point_itself_is_kept(home, tmp_path, binds):
    t = target_of(home)
    data = precious(tmp_path)
    entry = t.scratch_dir / "bound"
    binds(data, entry)
    age_tree(entry, 30)
    plan = plan_prune(t, options())
    assert plan.candidates == ()
    assert [k.reason for k in plan.kept] == ["it is a mount point (never entered, never pruned)"]
    execute_plan(t, plan, options(), just_planned=True)
    assert intact(data)


@pytest.mark.parametrize("quarantine_hours", [0.0, 12.0])
def test_the_automatic_pass_never_enters_a_bind_mount(home, tmp_path, binds, quarantine_hours):
    t = target_of(home)
    entry, data = _mounted_entry(t.scratch_dir, tmp_path, binds, "a/b/bind")
    rc = auto_pass_main(["--home", str(home.root), "--scratch", str(t.scratch_dir), "--idle-hours", "24",
                         "--quarantine-hours", str(quarantine_hours), "--arrival-hours", "0", "--grace", "1",
                         "--lineage", ""])
    assert rc == 0
    assert intact(data) and (entry / "own.log").exists()
    assert _reason("a/b/bind") in log_text(home)


def test_the_quarantine_expiry_never_deletes_through_a_bind_mount(home, tmp_path, binds):
    """An entry already in quarantine with a mount inside (moved there before this rule,
    or mounted into the quarantine): its hours are over, the pass restores it instead
    of deleting, and the bound data is whole."""
    t = target_of(home)
    home.config_file.write_text("scratch:\n  arrival_hours: 0\n")  # the default quarantine hours
    home.ensure_dir(t.quarantine_dir)
    q = quarantine_target(t.quarantine_dir, "e", now=time.time() - 48 * HOUR)
    q.mkdir()
    (q / "own.log").write_text("x")
    data = precious(tmp_path)
    binds(data, q / "a" / "bind")
    age_tree(q, 48)
    out = run_cli("--home", str(home.root), "prune", "--yes", "--json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert intact(data)
    assert doc["expired"] == []
    [back] = doc["restored"]
    assert back["path"] == str(t.scratch_dir / "e") and back["reason"] == _reason("a/bind")
    assert intact(t.scratch_dir / "e" / "a" / "bind")  # the mount went back with its entry


@pytest.mark.parametrize("just_planned", [False, True], ids=["approved", "planned-and-run"])
@pytest.mark.parametrize("quarantine_hours", [0.0, 12.0])
def test_a_mount_made_after_the_plan_keeps_the_entry(home, tmp_path, binds, just_planned, quarantine_hours):
    """The plan found the entry idle and mount-free; a mount made before the pass
    acts keeps it (checked right before the move)."""
    t = target_of(home)
    entry = make_entry(t.scratch_dir, "e", {"own.log": "x", "a/b/keep": "y"})
    opts = options(quarantine_hours=quarantine_hours)
    plan = plan_prune(t, opts)
    assert [c.name for c in plan.candidates] == ["e"]
    data = precious(tmp_path)
    binds(data, entry / "a" / "b" / "bind")
    result = execute_plan(t, plan, opts, just_planned=just_planned)
    assert intact(data) and (entry / "own.log").exists()
    assert result.removed_count == 0
    assert [k.reason for k in result.kept] == [_reason("a/b/bind")]


def test_a_mount_made_after_the_verify_walk_stops_the_delete(home, tmp_path, binds):
    """The entry is moved to the pruner's name and verified; a mount made then, right
    before its delete, is seen (the table right before the delete, and the delete
    walk's own check of every directory it opens): the tree goes back whole."""
    t = target_of(home)
    entry = make_entry(t.scratch_dir, "e", {"own.log": "x", "a/b/keep": "y"})
    trash = t.scratch_dir / (TRASH_PREFIX + "e")
    data = precious(tmp_path)

    def progress(done, total, freed, path):
        if trash.exists() and not (trash / "a" / "bind").exists():  # moved and verified, not yet deleted
            binds(data, trash / "a" / "bind")

    opts = options()
    result = execute_plan(t, plan_prune(t, opts), opts, progress)
    assert intact(data) and (entry / "own.log").exists() and (entry / "a" / "b" / "keep").exists()
    assert result.removed_count == 0 and [k.reason for k in result.kept] == [_reason("a/bind")]
    assert intact(entry / "a" / "bind")


def test_the_delete_walk_stops_at_a_mount_before_anything_beside_it_goes(tmp_path, binds):
    tree = tmp_path / "tree"
    (tree / "a" / "b").mkdir(parents=True)
    (tree / "a" / "sibling").write_text("x")
    (tree / "top").write_text("x")
    data = precious(tmp_path)
    binds(data, tree / "a" / "bind")
    out = delete_unless_written(str(tree), since=float("inf"))
    assert out.stop is DeleteStop.MOUNT and out.detail == repr("a/bind")
    assert intact(data) and (tree / "a" / "sibling").exists()


def test_delete_tree_walk_and_size_never_enter_a_bind_mount(tmp_path, binds):
    tree = tmp_path / "tree"
    (tree / "x" / "y").mkdir(parents=True)
    (tree / "x" / "own").write_text("12345")
    data = precious(tmp_path)
    binds(data, tree / "x" / "y" / "bind")
    assert tree_size(tree) == 5
    act = scan_activity(tree, cutoff=float("inf"))
    assert act.mount == "x/y/bind" and not act.idle
    delete_tree(str(tree))
    assert intact(data)
    assert (tree / "x" / "y" / "bind").exists()  # residue: it and its parents stay


@pytest.mark.parametrize("quarantine_hours", [0.0, 12.0])
async def test_the_apps_approve_keeps_the_mounted_entry_and_says_why(home, tmp_path, binds, quarantine_hours):
    from engine.config import ScratchSettings, Settings
    from hermes_tui.app import HermesApp
    from tests.support import screen_shown
    from tests.support import wait_until_pilot as wait_for
    from widgets.scratch.prune_modal import PruneModal
    from widgets.scratch.scratch_pane import ScratchPane

    t = target_of(home)
    entry, data = _mounted_entry(t.scratch_dir, tmp_path, binds, "a/b/bind")
    plain = make_entry(t.scratch_dir, "plain")
    app = HermesApp(home, Settings(scratch=ScratchSettings(arrival_hours=0.0, quarantine_hours=quarantine_hours)),
                    home_label="~/.hermes")
    async with app.run_test(size=(160, 48)) as pilot:
        pane = app.query_one(ScratchPane)
        assert await wait_for(pilot, lambda: pane.last_survey is not None and pane.table.row_count == 2)
        row = pane.table.get_row("e:e")
        assert row[1].plain == "kept" and row[4].plain.startswith("a mount inside: 'a/b/bind'")  # fitted: may end in …
        await pilot.press("3")
        pane.table.move_cursor(row=pane.table.get_row_index("e:e"))
        await pilot.pause()
        assert f"kept: {_reason('a/b/bind')}" in str(pane.query_one("#scratch-detail").render())
        await pilot.press("p")
        assert await wait_for(pilot, lambda: screen_shown(app, PruneModal))
        assert [c.name for c in app.screen.plan.candidates] == ["plain"]
        assert _reason("a/b/bind") in str(app.screen.query_one(".body").render())
        await pilot.click("#yes")
        assert await wait_for(pilot, lambda: not plain.exists() and not pane.pruning)
    assert intact(data) and (entry / "own.log").exists()


def test_without_mount_ids_the_mount_table_alone_keeps_the_entry(home, tmp_path, binds, monkeypatch):
    """A kernel before 5.8 gives no mount id: the walks fall back to st_dev, which a
    bind mount shares, and the mount table (its escaped names read back: a space is
    \\040) is what keeps the entry, in the plan and right before the move."""
    from engine.scratch import mounts

    t = target_of(home)
    data = precious(tmp_path)
    entry = make_entry(t.scratch_dir, "my entry", {"own.log": "x"})
    binds(data, entry / "a b" / "bind")
    age_tree(entry, 30)
    monkeypatch.setattr(mounts, "_libc_statx", lambda: None)
    opts = options()
    plan = plan_prune(t, opts)
    assert plan.candidates == () and [k.reason for k in plan.kept] == [_reason("a b/bind")]
    late = make_entry(t.scratch_dir, "late", {"own.log": "x"})
    plan = plan_prune(t, opts)
    assert [c.name for c in plan.candidates] == ["late"]
    binds(data, late / "bind")
    result = execute_plan(t, plan, opts, just_planned=True)
    assert intact(data) and (late / "own.log").exists() and result.removed_count == 0


def test_a_symlink_entry_is_not_judged_by_the_mounts_where_it_points(home, tmp_path):
    t = target_of(home)
    link = t.scratch_dir / "to-root"
    link.symlink_to("/")
    os.utime(link, (time.time() - 30 * HOUR,) * 2, follow_symlinks=False)
    plan = plan_prune(t, options())
    assert [c.name for c in plan.candidates] == ["to-root"]
    execute_plan(t, plan, options(), just_planned=True)
    assert not os.path.lexists(link) and os.path.exists("/proc/self")
