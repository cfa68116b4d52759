"""Trying to trick the prune (issue 9): every removal and every signal happens only
after every keep rule was checked against the state right then, nothing written
before an entry left its place is lost, and the log stays honest whatever the names.

Real processes, real trees, real renames; the only hooks are at the re-check walk
(to land a write exactly while it runs) and at the deleter's first unlink (to hold
a pruner mid-delete before killing it).
"""

from __future__ import annotations

import fcntl
import os
import re
import signal
import sys
import time
from pathlib import Path

import pytest

from engine import identity
from engine.scratch import entries as entries_mod
from engine.scratch import execute as execute_mod
from engine.scratch.audit import AuditLog
from engine.scratch.execute import execute_plan, prune_pass, restore
from engine.scratch.plan import plan_prune
from engine.scratch.quarantine import list_quarantine
from engine.scratch.target import TRASH_PREFIX
from tests.conftest import REPO, run_cli
from tests.support import wait_until
from tests.support.scratch import (
    HOUR,
    NO_ARRIVAL_CONFIG,
    exited,
    log_text,
    make_entry,
    options,
    prune_on_pty,
    start_in,
    target_of,
)

RECORD = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} scratch prune: ")


def _rebuild(build: Path) -> None:
    """``rm -rf build && mkdir build``: whoever sat in the old build has a gone cwd."""
    import shutil

    shutil.rmtree(build)
    build.mkdir()


# --------------------------------------------------------------------------------------
# Processes
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("why", ["kept", "active"])
def test_compiler_in_a_rebuilt_build_of_a_staying_entry_is_never_signalled(home, children, why):
    t = target_of(home)
    proj = make_entry(t.scratch_dir, "proj", {"build/obj.o": "o", "src/main.c": "int main;"})
    compiler = start_in(children, ["sleep", "60"], proj / "build")
    _rebuild(proj / "build")
    if why == "kept":
        make_entry(t.scratch_dir, "unrelated")  # something idle, so the pass really runs
        (proj / ".scratch-keep").touch()
    else:
        (proj / "src" / "main.c").write_text("int main(void);")  # written just now: active
    assert os.readlink(f"/proc/{compiler.pid}/cwd").endswith(" (deleted)")
    plan = plan_prune(t, options())
    assert all(s.pid != compiler.pid for s in plan.signals)
    result = execute_plan(t, plan, options())
    assert compiler.poll() is None and proj.exists()
    assert all(s.pid != compiler.pid for s in result.signalled)
    assert f"pid={compiler.pid}" not in log_text(home)


def test_gone_cwd_at_the_scratch_root_itself_is_spared(home, children):
    import shutil

    t = target_of(home)
    p = start_in(children, ["sleep", "60"], t.scratch_dir)
    shutil.rmtree(t.scratch_dir)
    t.scratch_dir.mkdir()
    make_entry(t.scratch_dir, "idle")
    result = prune_pass(t, options())
    assert result.removed_count == 1 and p.poll() is None and result.signalled == ()


def test_orphan_of_an_entry_that_is_gone_is_still_reaped(home, children):
    import shutil

    t = target_of(home)
    gone = make_entry(t.scratch_dir, "gone")
    p = start_in(children, ["sleep", "60"], gone / "a")
    shutil.rmtree(gone)
    result = prune_pass(t, options())
    assert exited(p) and [s.pid for s in result.signalled] == [p.pid]


@pytest.mark.parametrize("rule", ["marker", "flock"])
def test_a_keep_rule_made_at_the_terminal_prompt_keeps_the_entry_and_spares_its_process(home, children, rule):
    t = target_of(home)
    e = make_entry(t.scratch_dir, "idle")
    p = start_in(children, ["sleep", "60"], e)
    held: list[int] = []

    def keep_it() -> None:  # what a person does while the plan is on screen
        if rule == "marker":
            (e / ".scratch-keep").touch()
        else:
            held.append(os.open(e, os.O_RDONLY | os.O_DIRECTORY))
            fcntl.flock(held[0], fcntl.LOCK_EX)

    home.config_file.write_text(NO_ARRIVAL_CONFIG)
    try:
        rc, out = prune_on_pty(home, b"y\n", at_prompt=keep_it)
    finally:
        for fd in held:
            os.close(fd)
    assert f"pid {p.pid}" in out  # the plan did show it would be signalled
    assert rc == 0 and e.exists() and p.poll() is None, out
    assert "sent TERM" not in log_text(home)
    why = ".scratch-keep marker" if rule == "marker" else "locked by another process (flock)"
    assert f"kept {str(e)!r} \u2014 {why}" in log_text(home)


def test_flock_taken_after_the_plan_keeps_the_entry_and_spares_its_process(home, children):
    t = target_of(home)
    e = make_entry(t.scratch_dir, "idle")
    p = start_in(children, ["sleep", "60"], e)
    plan = plan_prune(t, options())
    assert [s.pid for s in plan.signals] == [p.pid]
    fd = os.open(e, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # another open file description: the pass sees it held
        result = execute_plan(t, plan, options())
    finally:
        os.close(fd)
    assert e.exists() and p.poll() is None and result.signalled == ()
    assert "locked by another process (flock)" in log_text(home)


def _write_at_the_process_rescan(monkeypatch, entry: Path) -> list[bool]:
    """Land a write in ``entry`` inside execute_plan, at its fresh /proc scan: after
    the plan, before any keep rule, re-check or signal of the pass."""
    real = execute_mod.scan_processes
    done: list[bool] = []

    def scan(*a, **kw):
        if not done:
            done.append(True)
            (entry / "a" / "fresh.txt").write_text("written while the pass started")
        return real(*a, **kw)

    monkeypatch.setattr(execute_mod, "scan_processes", scan)
    return done


@pytest.mark.parametrize("when", ["after the plan", "at the pass's process re-scan",
                                  "at the process re-scan of a pass that plans and acts at once"])
def test_an_entry_written_to_after_the_plan_is_kept_and_its_process_never_signalled(
        home, children, monkeypatch, when):
    """Issue 9: "no signal is sent for an entry that is then kept". The activity
    re-check of an entry comes before any signal for it (red before: the sleeper got
    TERM, then the re-check found the write and kept the entry), also in a pass that
    plans and acts at once, which walks again only the entries it would signal in."""
    t = target_of(home)
    e = make_entry(t.scratch_dir, "idle")
    other = make_entry(t.scratch_dir, "other")
    p = start_in(children, ["sleep", "60"], e)
    plan = plan_prune(t, options())
    assert [s.pid for s in plan.signals] == [p.pid]
    if when == "after the plan":
        (e / "a" / "fresh.txt").write_text("written after the plan")
    else:
        hooked = _write_at_the_process_rescan(monkeypatch, e)
    if when.endswith("plans and acts at once"):
        result = prune_pass(t, options())
    else:
        result = execute_plan(t, plan, options())
    if when != "after the plan":
        assert hooked
    assert p.poll() is None, "a process of a kept entry was signalled"
    assert e.exists() and (e / "a" / "fresh.txt").exists() and not other.exists()
    assert result.signalled == () and "sent TERM" not in log_text(home)
    assert any(k.path == str(e) for k in result.kept)


def test_a_pass_that_plans_and_acts_at_once_walks_an_entry_with_nobody_inside_once_before_moving_it(
        home, monkeypatch):
    """The plan's walk, a moment before, is the check of an entry with no process to
    signal: it is not walked again before its move (its moved tree still is, by the
    verify walk). Red before: the re-check walked it a second time."""
    t = target_of(home)
    e = make_entry(t.scratch_dir, "e")
    real = execute_mod.scan_many
    walked: list[str] = []

    def scan(paths, cutoff, *a, **kw):
        walked.extend(map(os.fspath, paths))
        return real(paths, cutoff, *a, **kw)

    monkeypatch.setattr(execute_mod, "scan_many", scan)
    result = prune_pass(t, options())
    assert result.removed_count == 1 and not e.exists()
    assert str(e) not in walked  # no re-check walk (its moved tree's verify walk is scan_ahead's)


@pytest.mark.parametrize("quarantine_hours", [0.0, 12.0])
def test_an_entry_gone_between_the_plan_and_its_move_is_recorded_as_vanished(home, monkeypatch, quarantine_hours):
    """Not walked again, an entry removed by its owner after the plan is found gone at
    its move: recorded as vanished (as the re-check would), not as a failure."""
    import shutil

    t = target_of(home)
    e = make_entry(t.scratch_dir, "e")
    real = execute_mod.scan_processes

    def scan(*a, **kw):
        if e.exists():
            shutil.rmtree(e)
        return real(*a, **kw)

    monkeypatch.setattr(execute_mod, "scan_processes", scan)
    result = prune_pass(t, options(quarantine_hours=quarantine_hours))
    assert result.ok and result.removed_count == 0 and not e.exists()
    assert f"entry {str(e)!r} vanished since selection" in log_text(home)
    assert list_quarantine(t.quarantine_dir) == []


# --------------------------------------------------------------------------------------
# Writes during a prune
# --------------------------------------------------------------------------------------


# The walk that is an entry's last activity check before it is moved: the re-check walk
# when the plan was shown before it is carried out (the dialog, the terminal prompt),
# the plan's own walk in a pass that plans and acts at once (the automatic pass,
# ``prune --yes``), for an entry with no process to signal.
FLOWS = ["shown plan: re-check walk", "plan and act at once: the plan's walk"]


def _last_check_walk(flow: str):
    """(module whose ``scan_many`` is that walk, how the pass is run)."""
    if flow == FLOWS[0]:
        return execute_mod, lambda t, opts: execute_plan(t, plan_prune(t, opts), opts)
    return entries_mod, prune_pass


def _hook_walk(monkeypatch, module, hook) -> None:
    """Patch that walk: ``hook(paths, cutoff, real, *a, **kw)`` returns its results.
    The survey's walk is ``iter_scan`` (streamed): its results are yielded once the
    hook has returned, i.e. after every walk of the call and before any is used."""
    if module is entries_mod:
        real = module.iter_scan

        def streamed(paths, cutoff, *a, **kw):
            yield from hook(paths, cutoff, lambda *a2, **kw2: list(real(*a2, **kw2)), *a, **kw)

        monkeypatch.setattr(module, "iter_scan", streamed)
        return
    real = module.scan_many
    monkeypatch.setattr(module, "scan_many", lambda paths, cutoff, *a, **kw: hook(paths, cutoff, real, *a, **kw))


def _write_during_the_recheck(monkeypatch, entry: Path, rel: str = "a/b/c/late.txt", flow: str = FLOWS[0]):
    """Land a write in ``entry`` while its last check walk runs: after the walk has
    passed the directory (so the walk itself cannot see it), before the pass acts."""
    module, _run = _last_check_walk(flow)
    done = []

    def scan(paths, cutoff, real, *a, **kw):
        acts = real(paths, cutoff, *a, **kw)
        if str(entry) in map(os.fspath, paths) and not done:
            done.append(True)
            (entry / rel).write_text("written while the pass re-checked")
        return acts

    _hook_walk(monkeypatch, module, scan)
    return done


@pytest.mark.parametrize("flow", FLOWS)
@pytest.mark.parametrize("quarantine_hours", [0.0, 12.0])
def test_a_write_during_the_recheck_walk_is_rescued(home, monkeypatch, quarantine_hours, flow):
    t = target_of(home)
    e = make_entry(t.scratch_dir, "e")
    other = make_entry(t.scratch_dir, "other")
    hooked = _write_during_the_recheck(monkeypatch, e, flow=flow)
    result = _last_check_walk(flow)[1](t, options(quarantine_hours=quarantine_hours))
    assert hooked
    assert (e / "a/b/c/late.txt").read_text() == "written while the pass re-checked"
    assert (e / "a/b/c/work.txt").exists() and not other.exists()
    assert result.removed_count == 1 and any(k.path == str(e) for k in result.kept)
    assert f"rescued {str(e)!r}" in log_text(home)
    assert [q.name for q in list_quarantine(t.quarantine_dir)] == (["other"] if quarantine_hours else [])
    assert not any(n.startswith(TRASH_PREFIX) for n in os.listdir(t.scratch_dir))


def _rewrite_after_a_walk(monkeypatch, entry: Path, rel: str, *, moved: bool, flow: str = FLOWS[0]) -> list[bool]:
    """Rewrite an existing file of ``entry`` in place (its directory's mtime does not
    move) right after a walk of it: its last check walk (``moved=False``, see FLOWS), or
    the verify walk of the tree moved to the pruner's trash name (``moved=True``; with
    delete, each tree's verify walk comes from ``scan_ahead`` right before its delete)."""
    walked = os.path.join(os.path.dirname(entry), TRASH_PREFIX + entry.name) if moved else str(entry)
    done: list[bool] = []

    def rewrite() -> None:
        done.append(True)
        with open(os.path.join(walked, rel), "r+") as fh:
            fh.write("rewritten")

    if moved:
        real_ahead = execute_mod.scan_ahead

        def ahead(paths, cutoff, *a, **kw):
            for path, act in zip(paths, real_ahead(paths, cutoff, *a, **kw), strict=True):
                if os.fspath(path) == walked and not done:
                    rewrite()
                yield act

        monkeypatch.setattr(execute_mod, "scan_ahead", ahead)
        return done
    module = _last_check_walk(flow)[0]

    def scan(paths, cutoff, real, *a, **kw):
        acts = real(paths, cutoff, *a, **kw)
        if walked in map(os.fspath, paths) and not done:
            rewrite()
        return acts

    _hook_walk(monkeypatch, module, scan)
    return done


def test_verify_walks_made_ahead_while_earlier_trees_are_deleted_still_find_a_write(home, monkeypatch):
    """With delete, the trees after the first are verified by a child while this
    process deletes the earlier ones; a file rewritten after the plan in a later tree
    is found by its verify walk: that tree goes back whole, the others go."""
    from engine.scratch import activity

    t = target_of(home)
    entries = [make_entry(t.scratch_dir, f"e{i}", {"a/old.txt": "old", "a/b/work.txt": "work"}) for i in range(5)]
    late = entries[3]
    hooked = _rewrite_after_a_walk(monkeypatch, late, "a/b/work.txt", moved=False, flow=FLOWS[1])
    monkeypatch.setattr(activity, "SOLO_SECONDS", 0.0)  # the child walks ahead from the second tree on
    monkeypatch.setattr(activity.os, "sched_getaffinity", lambda _pid: {0, 1})
    result = prune_pass(t, options())
    assert hooked
    assert (late / "a/b/work.txt").read_text() == "rewritten" and (late / "a/old.txt").read_text() == "old"
    assert [e.exists() for e in entries] == [False, False, False, True, False]
    assert result.removed_count == 4 and "had already been deleted" not in log_text(home)
    assert f"rescued {str(late)!r}" in log_text(home)


@pytest.mark.parametrize("flow", FLOWS)
def test_a_rewrite_after_the_recheck_is_found_by_the_verify_walk_before_anything_goes(home, monkeypatch, flow):
    """The whole moved tree is verified before any of it is deleted: a file rewritten
    after the re-check (or after the plan's walk, in a pass that plans and acts at
    once) puts the entry back whole (nothing older is lost)."""
    t = target_of(home)
    e = make_entry(t.scratch_dir, "e", {"a/old.txt": "old", "a/b/work.txt": "work-----", "a/b/more.txt": "m"})
    hooked = _rewrite_after_a_walk(monkeypatch, e, "a/b/work.txt", moved=False, flow=flow)
    result = _last_check_walk(flow)[1](t, options())
    assert hooked
    assert (e / "a/b/work.txt").read_text() == "rewritten" and (e / "a/b/more.txt").exists()
    assert (e / "a/old.txt").read_text() == "old"
    assert result.removed_count == 0 and not any(n.startswith(TRASH_PREFIX) for n in os.listdir(t.scratch_dir))
    text = log_text(home)
    assert f"rescued {str(e)!r}" in text and "had already been deleted" not in text
    assert f"removed {str(e)!r}" not in text


def test_a_rewrite_met_by_the_delete_walk_stops_it_and_puts_the_rest_back_saying_what_went(home, monkeypatch):
    """A write after the verify walk is still met: the delete walk checks every file
    before its unlink. ``a/old.txt`` is deleted before the walk reaches ``a/b`` (a
    directory is emptied before its subdirectories are entered) and meets the rewrite
    there: the delete stops, the tree goes back under its name and the record says one
    older file went."""
    t = target_of(home)
    e = make_entry(t.scratch_dir, "e", {"a/old.txt": "old", "a/b/work.txt": "work-----", "a/b/more.txt": "m"})
    hooked = _rewrite_after_a_walk(monkeypatch, e, "a/b/work.txt", moved=True)
    result = prune_pass(t, options())
    assert hooked
    assert (e / "a/b/work.txt").read_text() == "rewritten" and (e / "a/b/more.txt").exists()
    assert not (e / "a/old.txt").exists()
    assert result.removed_count == 0 and not any(n.startswith(TRASH_PREFIX) for n in os.listdir(t.scratch_dir))
    [kept] = [k for k in result.kept if k.path == str(e)]
    assert kept.reason.startswith("touched since selection") and "1 older file(s) had already been deleted" in kept.reason
    text = log_text(home)
    assert f"rescued {str(e)!r}" in text and "1 older file(s) had already been deleted, the rest is back" in text
    assert f"removed {str(e)!r}" not in text


def test_an_unreadable_directory_met_by_the_delete_walk_puts_the_tree_back(home, monkeypatch):
    """Fail closed: a directory the delete walk cannot list stops it (nothing below
    it is judged unread) and the entry is back under its name."""
    t = target_of(home)
    e = make_entry(t.scratch_dir, "e", {"a/b/work.txt": "work"})
    real_listdir = os.listdir
    failed: list[bool] = []

    def listdir(p=".", *a, **kw):  # only the delete walk lists inside the trash name
        if isinstance(p, int) and os.readlink(f"/proc/self/fd/{p}").endswith(TRASH_PREFIX + "e/a/b"):
            failed.append(True)
            raise PermissionError(13, "Permission denied")
        return real_listdir(p, *a, **kw)

    monkeypatch.setattr(os, "listdir", listdir)
    result = prune_pass(t, options())
    monkeypatch.undo()
    assert failed and result.removed_count == 0 and (e / "a/b/work.txt").read_text() == "work"
    assert "verify walk failed" in log_text(home) and f"removed {str(e)!r}" not in log_text(home)


@pytest.mark.parametrize("flow", FLOWS)
def test_quarantine_expiry_compares_against_the_start_of_the_recheck(home, monkeypatch, flow):
    """The last check walk (the re-check, or the plan's walk in a pass that plans and
    acts at once) crosses a second boundary (waited for, not slept); a file dated
    inside the walk is restored at expiry, never deleted."""
    t = target_of(home)
    e = make_entry(t.scratch_dir, "e")
    module, run_pass = _last_check_walk(flow)
    started: list[float] = []

    def slow_scan(paths, cutoff, real, *a, **kw):
        if str(e) in map(os.fspath, paths) and not started:
            started.append(time.time())
            assert wait_until(lambda: int(time.time()) > int(started[0]), timeout=5)
        return real(paths, cutoff, *a, **kw)

    _hook_walk(monkeypatch, module, slow_scan)
    opts = options(quarantine_hours=12.0)
    run_pass(t, opts)
    monkeypatch.undo()
    [q] = list_quarantine(t.quarantine_dir)
    assert q.quarantined_at <= started[0]
    during = started[0] + 0.001  # a write that landed while the walk ran
    os.utime(Path(q.path) / "a/b/c/work.txt", (during, during))
    plan = plan_prune(t, opts, now=time.time() + 13 * HOUR)
    assert [x.path for x in plan.expiring] == [q.path]
    result = execute_plan(t, plan, opts)
    assert (e / "a/b/c/work.txt").exists() and result.expired == ()
    assert "written to while in quarantine" in log_text(home)


_KILL_MID_DELETE = """
import os, sys, threading
from pathlib import Path
from engine.home import HomeLayout
from engine.scratch.target import PruneTarget, PruneOptions
from engine.scratch.execute import prune_pass

gate = sys.argv[2]
real_unlink = os.unlink

def unlink(path, *a, dir_fd=None, **kw):
    if dir_fd is not None:  # the deleter's first unlink: say so, then hang until killed
        open(gate, "w").close()
        threading.Event().wait()
    return real_unlink(path, *a, dir_fd=dir_fd, **kw)

os.unlink = unlink
prune_pass(PruneTarget.of(HomeLayout(Path(sys.argv[1]))), PruneOptions(quarantine_hours=0, arrival_hours=0))
"""


def test_kill_9_of_the_pruner_mid_delete_leaves_a_record_and_no_deleter(home, children, tmp_path):
    t = target_of(home)
    e = make_entry(t.scratch_dir, "e", {f"d/f{i}": "x" for i in range(20)})
    gate = tmp_path / "deleting"
    pruner = children([sys.executable, "-c", _KILL_MID_DELETE, str(home.root), str(gate)], cwd=tmp_path,
                      env={**os.environ, "PYTHONPATH": str(REPO)})
    assert wait_until(gate.exists, timeout=60), "the pruner never started deleting in its own process"
    assert f"removing {str(e)!r}" in log_text(home)
    stats = [identity.read_stat(int(d)) for d in os.listdir("/proc") if d.isdigit()]
    assert [s for s in stats if s is not None and s.ppid == pruner.pid] == []  # no deleter child
    pruner.send_signal(signal.SIGKILL)
    assert exited(pruner)
    trash = t.scratch_dir / (TRASH_PREFIX + "e")
    assert trash.exists() and not e.exists()
    # the next pass puts the unverified leftover back, then judges it afresh
    result = prune_pass(t, options(idle_hours=10_000))
    assert e.exists() and not trash.exists() and (e / "d" / "f0").exists()
    assert result.restored and "left by an interrupted pass" in log_text(home)


@pytest.mark.parametrize("quarantine_hours", [0.0, 12.0])
def test_a_255_byte_name_is_pruned_under_a_shortened_name(home, quarantine_hours):
    t = target_of(home)
    name = "n" * 250 + "\u00e9\u00e9x"  # 255 bytes, two-byte characters near the cut
    assert len(os.fsencode(name)) == 255
    e = make_entry(t.scratch_dir, name)
    opts = options(quarantine_hours=quarantine_hours)
    for _ in range(2):  # the pass after does not fail on it either
        result = prune_pass(t, opts)
        assert result.ok, result.failures
    assert not e.exists() and result.removed_count == 0
    text = log_text(home)
    if quarantine_hours:
        [q] = list_quarantine(t.quarantine_dir)
        assert len(os.fsencode(q.file_name)) <= 255 and "~" in q.file_name
        assert f"quarantined {str(e)!r} -> {q.path!r}" in text  # the full name is in the log
        back = restore(t, q.file_name)
        assert Path(back.path).exists()
    else:
        assert f"removed {str(e)!r}" in text


def _deeper_than_path_max(root: Path, last: str) -> int:
    """A chain of 200-byte directory names, > 2 * PATH_MAX deep, made by fd; returns
    its depth. The file ``last`` sits at the bottom; everything is aged 30h."""
    old = time.time() - 30 * HOUR
    name = "d" * 200
    depth = 2 * 4096 // 201 + 2
    fds = [os.open(root, os.O_RDONLY | os.O_DIRECTORY)]
    try:
        for _ in range(depth):
            os.mkdir(name, dir_fd=fds[-1])
            fds.append(os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fds[-1]))
        fd = os.open(last, os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fds[-1])
        os.write(fd, b"deep")
        os.close(fd)
        os.utime(last, (old, old), dir_fd=fds[-1])
        for parent in reversed(fds[:-1]):
            os.utime(name, (old, old), dir_fd=parent)
    finally:
        for fd in fds:
            os.close(fd)
    os.utime(root, (old, old))
    return depth


def _deep_entry(home):
    t = target_of(home)
    deep = t.scratch_dir / "deep"
    deep.mkdir()
    _deeper_than_path_max(deep, "bottom.txt")
    return t, deep


def test_an_entry_deeper_than_path_max_is_walked_and_deleted(home):
    t, deep = _deep_entry(home)
    result = prune_pass(t, options())
    assert result.ok, result.failures
    assert result.removed_count == 1 and not deep.exists()


def test_an_entry_deeper_than_path_max_written_at_the_bottom_is_active(home):
    t, deep = _deep_entry(home)
    fd = os.open(deep, os.O_RDONLY | os.O_DIRECTORY)
    fds = [fd]
    try:
        while True:
            names = os.listdir(fds[-1])
            if "bottom.txt" in names:
                os.utime("bottom.txt", None, dir_fd=fds[-1])
                break
            fds.append(os.open(names[0], os.O_RDONLY | os.O_DIRECTORY, dir_fd=fds[-1]))
    finally:
        for f in fds:
            os.close(f)
    result = prune_pass(t, options())
    assert result.removed_count == 0 and deep.exists()


# --------------------------------------------------------------------------------------
# The log and what is printed
# --------------------------------------------------------------------------------------

NASTY = "x\n\r\x1b[2Jok"


def _assert_clean_log(home) -> str:
    raw = home.prune_log.read_bytes()
    assert b"\x1b" not in raw and b"\r" not in raw
    text = raw.decode("utf-8")
    for line in text.splitlines():
        assert RECORD.match(line), line
    return text


def test_a_process_name_with_control_characters_cannot_split_a_record_or_reach_a_terminal(
        home, children, tmp_path):
    """A corrupt session in the real registry makes every process keep its entry, so
    the kept reason names the process: in the table, the plan, the log."""
    t = target_of(home)
    e = make_entry(t.scratch_dir, "e")
    make_entry(t.scratch_dir, "sub\n\x1b[2Jdir")  # an outside name in a path too
    link = tmp_path / NASTY
    os.symlink("/bin/sleep", link)
    p = start_in(children, [str(link), "60"], e)
    broken = home.processes_dir / "proc_0123456789ab"
    broken.mkdir(parents=True)
    (broken / "meta.json").write_text("{not json")
    for args in (("scratch",), ("prune", "--dry-run")):
        out = run_cli("--home", str(home.root), *args)
        assert out.returncode == 0, out.stderr
        assert "\x1b" not in out.stdout and "\r" not in out.stdout
        assert "x\\n\\r\\x1b[2Jok" in out.stdout
    out = run_cli("--home", str(home.root), "prune", "--yes")
    assert out.returncode == 0, out.stderr
    assert "\x1b" not in out.stdout and "\r" not in out.stdout
    assert "x\\n\\r\\x1b[2Jok" in _assert_clean_log(home)
    assert e.exists() and p.poll() is None


def test_every_free_text_in_a_record_is_escaped(home):
    home.prune_log.parent.mkdir(parents=True, exist_ok=True)
    with AuditLog(home.prune_log) as log:
        log.kept("/s/e", f"a process {NASTY} works inside")
        log.kept_rescan_failed("/s/e", f"'/s/e/{NASTY}': Permission denied")
        log.could_not_remove("/s/e", OSError(5, f"I/O error on {NASTY}"))
        log.restored("/q/e", "/s/e", NASTY)
        log.signal_failed(1, NASTY, NASTY)
        log.process_check_failed(NASTY)
        log.pass_failed(NASTY)
        log.worktree_prune_failed("/r", NASTY)
        log.rescued("/s/e", NASTY)
    text = _assert_clean_log(home)
    assert len(text.splitlines()) == 9


# --------------------------------------------------------------------------------------
# A full filesystem
# --------------------------------------------------------------------------------------


@pytest.fixture
def full_logs(home):
    """``<home>/logs`` on a tiny tmpfs, filled up. Skipped where mount is not allowed."""
    from tests.support.disk import fill, tiny_tmpfs

    with tiny_tmpfs(home.prune_log.parent, "64k") as logs:
        fill(logs / "filler")
        yield logs


def _prune_yes_with_a_full_log(home, quarantine_hours: str):
    home.config_file.write_text(f"{NO_ARRIVAL_CONFIG}  quarantine_hours: {quarantine_hours}\n")
    out = run_cli("--home", str(home.root), "prune", "--yes")
    assert out.returncode == 1
    assert len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert "cannot write the prune log" in out.stderr and "Traceback" not in out.stderr


def test_a_full_log_filesystem_means_no_action_and_one_line(home, children, full_logs):
    t = target_of(home)
    e = make_entry(t.scratch_dir, "idle")
    p = start_in(children, ["sleep", "60"], e)
    _prune_yes_with_a_full_log(home, "0")  # the TERM record fails: no signal
    assert p.poll() is None
    p.kill()
    p.wait(timeout=10)
    for quarantine_hours in ("0", "12"):  # the "removing" / "quarantined" record fails: no move
        _prune_yes_with_a_full_log(home, quarantine_hours)
        assert (e / "a/b/c/work.txt").read_text() == "work"
        assert not t.quarantine_dir.exists() or os.listdir(t.quarantine_dir) == []
        assert not any(n.startswith(TRASH_PREFIX) for n in os.listdir(t.scratch_dir))


def test_an_unwritable_log_means_no_signal_no_move_and_no_traceback(home, children, capsys):
    """Without mounting anything: the log path is a directory, so no record can be written."""
    from engine.scratch.audit import AuditWriteError

    t = target_of(home)
    e = make_entry(t.scratch_dir, "idle")
    p = start_in(children, ["sleep", "60"], e)
    home.prune_log.mkdir(parents=True)
    for quarantine_hours in (0.0, 12.0):
        with pytest.raises(AuditWriteError, match="cannot write the prune log"):
            prune_pass(t, options(quarantine_hours=quarantine_hours))
        assert p.poll() is None and (e / "a/b/c/work.txt").read_text() == "work"
        assert not t.quarantine_dir.exists() or os.listdir(t.quarantine_dir) == []
    p.kill()
    p.wait(timeout=10)
    for quarantine_hours in (0.0, 12.0):  # no process: the move's own record is what fails
        with pytest.raises(AuditWriteError):
            prune_pass(t, options(quarantine_hours=quarantine_hours))
        assert (e / "a/b/c/work.txt").read_text() == "work"
        assert not t.quarantine_dir.exists() or os.listdir(t.quarantine_dir) == []
        assert not any(n.startswith(TRASH_PREFIX) for n in os.listdir(t.scratch_dir))
    assert "Traceback" not in capsys.readouterr().err
