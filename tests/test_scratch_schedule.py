"""The automatic pass: once per process, once per hour per home, in a detached child
that outlives its launcher and spares the launcher's lineage."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import replace

import pytest

from engine.config import ScratchSettings, Settings
from engine.scratch import schedule
from engine.scratch.auto_pass import main as auto_pass_main
from engine.scratch.schedule import maybe_start_auto_prune, stamp_is_fresh
from tests.conftest import REPO
from tests.support import wait_until
from tests.support.scratch import log_text, make_entry, target_of

NO_QUARANTINE = Settings(scratch=ScratchSettings(quarantine_hours=0.0, arrival_hours=0.0))


@pytest.fixture(autouse=True)
def fresh_flag():
    schedule._reset_for_tests()
    yield
    schedule._reset_for_tests()


def _gone(pid: int) -> bool:
    return not os.path.exists(f"/proc/{pid}")


def test_runs_once_per_process_and_touches_the_stamp_first(home):
    t = target_of(home)
    idle = make_entry(t.scratch_dir, "idle")
    child = maybe_start_auto_prune(home, NO_QUARANTINE)
    assert child is not None
    assert stamp_is_fresh(t.stamp_file)
    assert child.wait(timeout=60) == 0
    assert not idle.exists() and "removed " in log_text(home)
    assert maybe_start_auto_prune(home, NO_QUARANTINE) is None  # once per process


def test_fresh_stamp_skips_and_old_stamp_runs(home):
    t = target_of(home)
    t.stamp_file.write_text("")
    assert maybe_start_auto_prune(home, NO_QUARANTINE) is None
    schedule._reset_for_tests()
    old = time.time() - 2 * 3600
    os.utime(t.stamp_file, (old, old))
    child = maybe_start_auto_prune(home, NO_QUARANTINE)
    assert child is not None and child.wait(timeout=60) == 0


def test_mark_started_spends_the_pass(home):
    schedule.mark_started()
    assert maybe_start_auto_prune(home, NO_QUARANTINE) is None
    assert not target_of(home).stamp_file.exists()


def test_disabled_by_config(home):
    off = replace(NO_QUARANTINE, scratch=ScratchSettings(auto_prune=False))
    assert maybe_start_auto_prune(home, off) is None
    assert not target_of(home).stamp_file.exists()


def test_detached_pass_outlives_a_launcher_that_exits_at_once(home, children):
    """A short CLI command must not cut the pass short: the child is in its own session."""
    t = target_of(home)
    idle = make_entry(t.scratch_dir, "idle", {f"d{i}/f{j}": "x" for i in range(20) for j in range(20)})
    shell_entry = make_entry(t.scratch_dir, "shell-here")
    code = (
        "import sys; from pathlib import Path\n"
        "from engine.home import HomeLayout\n"
        "from engine.config import Settings, ScratchSettings\n"
        "from engine.scratch import maybe_start_auto_prune\n"
        "c = maybe_start_auto_prune(HomeLayout(Path(sys.argv[1])), Settings(scratch=ScratchSettings(quarantine_hours=0, arrival_hours=0)))\n"
        "print(c.pid, flush=True)\n"
    )
    # The user's shell sits in an idle entry and runs a quick command that launches the pass.
    shell = children(["sh", "-c", f'"{sys.executable}" -c "$0" "$1"; sleep 60', code, str(home.root)],
                     cwd=shell_entry, stdout=subprocess.PIPE, env={**os.environ, "PYTHONPATH": str(REPO)})
    pass_pid = int(shell.stdout.readline())
    assert wait_until(lambda: _gone(pass_pid), timeout=60)
    assert not idle.exists()
    assert shell_entry.exists() and shell.poll() is None  # the launcher's shell: kept, never signalled
    assert "this prune's own lineage pid=" in log_text(home)
    os.killpg(shell.pid, 9)


def test_child_with_unknown_lineage_signals_nothing(home, children):
    t = target_of(home)
    busy = make_entry(t.scratch_dir, "busy")
    empty = make_entry(t.scratch_dir, "empty")
    p = children(["sleep", "60"], cwd=busy)
    assert wait_until(lambda: os.path.exists(f"/proc/{p.pid}/cwd") and os.readlink(f"/proc/{p.pid}/cwd") == str(busy))
    rc = auto_pass_main(["--home", str(home.root), "--scratch", str(t.scratch_dir), "--idle-hours", "24",
                         "--quarantine-hours", "0", "--grace", "1", "--arrival-hours", "0",
                         "--lineage-unknown", "launcher had no /proc"])
    assert rc == 0 and busy.exists() and not empty.exists() and p.poll() is None


def test_failing_child_leaves_one_line(home):
    t = target_of(home)
    bogus = home.root / "not-a-dir"
    bogus.write_text("")
    rc = auto_pass_main(["--home", str(home.root), "--scratch", str(bogus / "scratch"), "--idle-hours", "24",
                         "--quarantine-hours", "0", "--grace", "1", "--lineage", ""])
    lines = log_text(home).splitlines()
    assert rc == 1 and len(lines) == 1 and "scratch prune: pass failed: " in lines[0]
    assert t.scratch_dir.exists()


def test_child_failing_inside_the_pass_leaves_one_line(home, monkeypatch):
    """The pass logs its own failure; the child adds no second line for it."""
    from engine.scratch import execute

    t = target_of(home)
    make_entry(t.scratch_dir, "e")

    def boom(*a, **k):
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(execute, "_execute", boom)
    rc = auto_pass_main(["--home", str(home.root), "--scratch", str(t.scratch_dir), "--idle-hours", "24",
                         "--quarantine-hours", "0", "--grace", "1", "--lineage", ""])
    lines = log_text(home).splitlines()
    assert rc == 1 and len(lines) == 1, lines
    assert lines[0].endswith("scratch prune: pass failed: RuntimeError: disk on fire")


def test_child_argv_carries_paths_and_lineage(home):
    argv = schedule.child_argv(target_of(home), NO_QUARANTINE, "1=abc|5", None)
    assert argv[:2] == [sys.executable, "-I"]
    assert argv[argv.index("--scratch") + 1] == str(home.scratch_dir)
    assert argv[argv.index("--lineage") + 1] == "1=abc|5"
