"""A tree that just arrived in scratch is not idle (issue 20).

A tree moved, copied, synced, extracted or cloned into scratch keeps the mtimes of
its origin; its arrival (the top inode's ctime, set by the rename or the create)
counts as activity for the arrival window (default: the idle window). Each tool is
the real one; the trees are aged with os.utime before they arrive, as a user's old
work is.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from engine.scratch.auto_pass import main as auto_pass_main
from engine.scratch.entries import survey_scratch
from engine.scratch.execute import execute_plan, prune_pass, restore
from engine.scratch.plan import plan_prune
from engine.scratch.quarantine import list_quarantine
from engine.scratch.target import TRASH_PREFIX
from tests.conftest import run_cli
from tests.support.scratch import HOUR, NO_ARRIVAL_CONFIG, age_tree, log_text, make_entry, options, target_of

OLD_HOURS = 699 * 24  # "idle 699d" the moment it lands, by its mtimes


def _old_tree(root: Path) -> Path:
    """Somebody's old work outside scratch: every mtime 699 days ago."""
    src = root / "old-work"
    (src / "src" / "pkg").mkdir(parents=True)
    (src / "src" / "pkg" / "mod.py").write_text("x = 1\n")
    (src / "README").write_text("old\n")
    age_tree(src, OLD_HOURS)
    return src


def _git(*args: str, cwd: Path) -> None:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t", "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_SYSTEM": "/dev/null"}
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, env=env)


def _arrive(tool: str, src: Path, dest: Path, tmp: Path) -> None:
    if tool == "mv":
        subprocess.run(["mv", str(src), str(dest)], check=True)
    elif tool == "cp -a":
        subprocess.run(["cp", "-a", str(src), str(dest)], check=True)
    elif tool == "rsync -a":
        subprocess.run(["rsync", "-a", f"{src}/", f"{dest}/"], check=True)
    elif tool == "tar -x":
        archive = tmp / "work.tar"
        subprocess.run(["tar", "-cf", str(archive), "-C", str(src.parent), src.name], check=True)
        assert src.name == dest.name
        subprocess.run(["tar", "-xf", str(archive), "-C", str(dest.parent)], check=True)
    elif tool == "git clone --local":
        _git("init", "-q", cwd=src)
        _git("add", "-A", cwd=src)
        _git("commit", "-qm", "old", cwd=src)
        age_tree(src, OLD_HOURS)
        _git("clone", "-q", "--local", str(src), str(dest), cwd=tmp)
    else:  # pragma: no cover
        raise AssertionError(tool)


TOOLS = ["mv", "cp -a", "rsync -a", "tar -x", "git clone --local"]


@pytest.mark.parametrize("tool", TOOLS)
def test_a_tree_that_just_arrived_is_active_and_survives_the_pass(home, tmp_path, tool):
    if tool == "rsync -a" and shutil.which("rsync") is None:
        pytest.skip("rsync is not installed on this machine")
    t = target_of(home)
    home.config_file.write_text("scratch:\n  quarantine_hours: 0\n")  # the default arrival window
    src = _old_tree(tmp_path)
    dest = t.scratch_dir / "old-work"
    _arrive(tool, src, dest, tmp_path)
    if tool != "git clone --local":  # the tool kept the origin's mtimes: by them it is 699 days idle
        assert (dest / "src" / "pkg" / "mod.py").stat().st_mtime < time.time() - 600 * 24 * HOUR

    listing = run_cli("--home", str(home.root), "scratch", "--json")
    assert listing.returncode == 0, listing.stderr
    [entry] = json.loads(listing.stdout)["entries"]
    assert entry["state"] == "active", entry
    text = run_cli("--home", str(home.root), "scratch").stdout
    dry = run_cli("--home", str(home.root), "prune", "--dry-run")
    assert "idle 699d" not in dry.stdout and "699d" not in text
    if tool != "git clone --local":  # a clone writes its checkout now: a write, not only an arrival
        assert entry["arrived_seconds"] is not None and entry["arrived_seconds"] < 600
        assert re.search(r"arrived \d+s ago", text), text
        assert re.search(r"old-work: active: arrived \d+s ago", dry.stdout), dry.stdout

    result = run_cli("--home", str(home.root), "prune", "--yes", "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["removed_count"] == 0
    assert (dest / "src" / "pkg" / "mod.py").read_text() == "x = 1\n"


def test_the_automatic_pass_keeps_an_arrived_tree(home, tmp_path):
    """The pass any ``run --bg`` starts, with the default arrival window."""
    t = target_of(home)
    src = _old_tree(tmp_path)
    dest = t.scratch_dir / "old-work"
    os.rename(src, dest)
    rc = auto_pass_main(["--home", str(home.root), "--scratch", str(t.scratch_dir), "--idle-hours", "24",
                         "--quarantine-hours", "0", "--grace", "1", "--lineage", ""])
    assert rc == 0 and (dest / "README").exists()
    assert "removed" not in log_text(home) and "removing" not in log_text(home)


def test_an_arrival_counts_for_the_arrival_window_then_the_entry_is_judged_by_its_writes(home, tmp_path):
    """The same arrived tree, judged two hours later (the survey's clock shifted
    forward, the one thing a test cannot wait for): with a one-hour window it is idle
    again, and its idle age is that of its newest write."""
    t = target_of(home)
    os.rename(_old_tree(tmp_path), t.scratch_dir / "old-work")
    opts = options(idle_hours=1, arrival_hours=None)
    [now] = survey_scratch(t, opts).entries
    assert now.state == "active" and now.age_text.startswith("arrived ")
    [later] = survey_scratch(t, opts, now=time.time() + 2 * HOUR).entries
    assert later.state == "idle" and later.arrived_seconds is None and later.idle_seconds > 600 * 24 * HOUR
    assert survey_scratch(t, options(idle_hours=1, arrival_hours=0)).entries[0].state == "idle"


def test_a_hardlinked_file_does_not_arrive_and_its_data_stays_where_it_lives(home, tmp_path):
    """The documented cost: a hardlinked regular file's ctime moves with every link
    made or removed elsewhere, so it is no arrival; taking it removes one name only."""
    t = target_of(home)
    src = tmp_path / "shared.bin"
    src.write_text("data")
    age_tree(src, OLD_HOURS)
    os.link(src, t.scratch_dir / "shared.bin")
    result = prune_pass(t, options(arrival_hours=None))
    assert result.removed_count == 1 and src.read_text() == "data"


def test_a_tree_moved_over_an_emptied_candidate_after_the_plan_is_not_deleted(home, tmp_path):
    """The plan found the empty directory ``slot`` idle; before the pass moves it, a
    user's old tree is renamed over it (``mv -T``). The verify walk ignores the moved
    top (whose ctime the pass's own rename sets), so only the inode tells them apart:
    the tree goes back whole."""
    t = target_of(home)
    slot = t.scratch_dir / "slot"
    slot.mkdir()
    age_tree(slot, 30)
    plan = plan_prune(t, options())  # (its own arrival is not counted: the slot was made just now)
    assert [c.name for c in plan.candidates] == ["slot"]
    os.rename(_old_tree(tmp_path), slot)  # replaces the empty directory
    result = execute_plan(t, plan, options(), just_planned=True)
    assert result.removed_count == 0 and (slot / "src" / "pkg" / "mod.py").read_text() == "x = 1\n"
    assert "rescued" in log_text(home)


def test_restore_accepts_the_original_name_of_a_shortened_quarantine_name(home):
    t = target_of(home)
    name = "n" * 250 + "\u00e9\u00e9x"  # 255 bytes: too long to take the stamp
    other = "m" * 255
    make_entry(t.scratch_dir, name)
    make_entry(t.scratch_dir, other)
    assert prune_pass(t, options(quarantine_hours=12)).removed_count == 2
    q = {e.name[0]: e for e in list_quarantine(t.quarantine_dir)}
    assert "~" in q["n"].file_name and "~" in q["m"].file_name
    back = restore(t, name)
    assert Path(back.path).exists() and back.from_path == q["n"].path
    out = run_cli("--home", str(home.root), "scratch", "restore", other)  # the name as typed
    assert out.returncode == 0, out.stderr
    assert not os.path.exists(q["m"].path)


def test_a_leftover_of_a_killed_pass_is_listed_as_being_removed(home):
    """A pass killed mid-delete leaves its trash entry (what
    test_kill_9_of_the_pruner_mid_delete_leaves_a_record_and_no_deleter makes for
    real); the listing and the dry run say what it is and what the next pass does."""
    t = target_of(home)
    home.config_file.write_text(NO_ARRIVAL_CONFIG)
    e = make_entry(t.scratch_dir, "e")
    os.rename(e, t.scratch_dir / (TRASH_PREFIX + "e"))
    doc = json.loads(run_cli("--home", str(home.root), "scratch", "--json").stdout)
    [entry] = doc["entries"]
    assert entry["name"] == "e" and entry["state"] == "kept" and entry["kept_reason"].startswith("being removed, will be put back")
    text = run_cli("--home", str(home.root), "scratch").stdout
    assert "being removed, will be put back" in text
    dry = run_cli("--home", str(home.root), "prune", "--dry-run")
    assert "being removed, will be put back" in dry.stdout
    assert (t.scratch_dir / (TRASH_PREFIX + "e")).exists()  # the dry run changed nothing
    prune_pass(t, options(idle_hours=10_000))
    assert e.exists()


async def test_the_scratch_pane_says_arrived_in_its_idle_column_and_detail_line(home, tmp_path):
    from engine.config import Settings
    from hermes_tui.app import HermesApp
    from tests.support import wait_until_pilot
    from widgets.scratch.scratch_pane import ScratchPane

    t = target_of(home)
    os.rename(_old_tree(tmp_path), t.scratch_dir / "old-work")
    app = HermesApp(home, Settings(), home_label="~/.hermes")
    async with app.run_test(size=(160, 48)) as pilot:
        pane = app.query_one(ScratchPane)
        await wait_until_pilot(pilot, lambda: pane.last_survey is not None and pane.table.row_count == 1)
        row = pane.table.get_row("e:old-work")
        assert row[1].plain == "active" and re.fullmatch(r"arrived \d+s ago", row[2].plain), row[2].plain
        await pilot.press("3")
        pane.table.move_cursor(row=0)
        await pilot.pause()
        detail = str(pane.query_one("#scratch-detail").render())
        assert re.search(r"active · arrived \d+s ago", detail), detail
