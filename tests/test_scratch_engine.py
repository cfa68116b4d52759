"""The scratch prune on real directories: the idle rule, re-validation, removal
confirmation, the audit log, worktrees, quarantine (docs/scratch.md)."""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import threading
import time
from pathlib import Path

import pytest

from engine.scratch import activity, audit, execute
from engine.scratch.activity import TouchState, scan_activity, scan_many
from engine.scratch.delete import DeleteStop, WatchedDelete
from engine.scratch.execute import PassLock, execute_plan, prune_pass, restore
from engine.scratch.plan import plan_prune
from engine.scratch.quarantine import RestoreError, list_quarantine
from engine.scratch.result import PassFailed, PruneBusy
from engine.scratch.target import TRASH_PREFIX
from tests.support.scratch import HOUR, age_tree, log_text, make_entry, options, target_of


def run(home, opts=None):
    t = target_of(home)
    opts = opts or options()
    return execute_plan(t, plan_prune(t, opts), opts)


# -- the activity scan ------------------------------------------------------------------


def test_scan_is_tri_state_and_stops_at_first_recent_mtime(tmp_path):
    idle = make_entry(tmp_path, "idle", {"x/y/z.txt": "1", "top.txt": "2"})
    cutoff = time.time() - 24 * HOUR
    a = scan_activity(idle, cutoff)
    assert a.state is TouchState.IDLE and a.size_bytes > 0 and a.newest_mtime < cutoff
    os.utime(idle / "x" / "y" / "z.txt")  # an overwrite deep inside moves only that file
    assert scan_activity(idle, cutoff).state is TouchState.TOUCHED
    assert scan_activity(tmp_path / "missing", cutoff).state is TouchState.SCAN_FAILED


def test_directory_own_mtime_counts_and_symlink_mtime_does_not(tmp_path):
    e = make_entry(tmp_path, "e", {"d/f": "x"})
    cutoff = time.time() - 24 * HOUR
    os.utime(e / "d")
    assert scan_activity(e, cutoff).touched
    age_tree(e, 30)
    os.symlink("/etc/hostname", e / "d" / "fresh-link")  # freshens d: age d again, keep the link fresh
    old = time.time() - 30 * HOUR
    os.utime(e / "d", (old, old))
    assert scan_activity(e, cutoff).idle


def test_hardlinked_fresh_file_does_not_keep_an_entry(tmp_path):
    """git clone --local: a pack hardlinked to a repo whose copy git keeps freshening."""
    repo_pack = tmp_path / "repo.pack"
    repo_pack.write_text("pack")
    e = make_entry(tmp_path / "scratch", "clone", {"objects/info": "x"})
    os.link(repo_pack, e / "objects" / "pack")
    age_tree(e, 30)
    os.utime(repo_pack)  # the shared inode is fresh
    assert scan_activity(e, time.time() - 24 * HOUR).idle
    (e / "objects" / "own").write_text("new")  # a single-link fresh file still counts
    assert scan_activity(e, time.time() - 24 * HOUR).touched


def test_scan_many_matches_serial_and_survives_a_failing_worker(tmp_path, monkeypatch):
    scratch = tmp_path / "s"
    paths = []
    for i in range(20):
        e = make_entry(scratch, f"e{i:02d}", {"a/b.txt": "x" * i})
        if i % 3 == 0:
            os.utime(e / "a" / "b.txt")
        paths.append(str(e))
    paths.append(str(scratch / "gone"))
    cutoff = time.time() - 24 * HOUR
    serial = [scan_activity(p, cutoff) for p in paths]
    assert scan_many(paths, cutoff, workers=3) == serial
    assert scan_many(paths, cutoff) == serial

    def no_fork():
        raise OSError("fork refused")

    monkeypatch.setattr(activity.os, "fork", no_fork)
    assert scan_many(paths, cutoff, workers=2) == serial


@pytest.mark.parametrize("solo_seconds, forks", [(1e9, 0), (0.0, 1)])
def test_scan_many_forks_only_for_what_is_left_after_its_solo_time(tmp_path, monkeypatch, solo_seconds, forks):
    """The pool is adaptive: walks that end within SOLO_SECONDS never fork; what is
    left after it is split (2 CPUs: one child). Same answers either way."""
    paths = [str(make_entry(tmp_path / "s", f"e{i:02d}")) for i in range(12)]
    cutoff = time.time() - 24 * HOUR
    serial = [scan_activity(p, cutoff) for p in paths]
    real_fork, forked = os.fork, []

    def fork():
        pid = real_fork()
        if pid:
            forked.append(pid)
        return pid

    monkeypatch.setattr(activity, "SOLO_SECONDS", solo_seconds)
    monkeypatch.setattr(activity.os, "fork", fork)
    monkeypatch.setattr(activity.os, "sched_getaffinity", lambda _pid: {0, 1})
    assert scan_many(paths, cutoff) == serial
    assert len(forked) == forks


def _counting_fork(monkeypatch, *, child_dies: bool = False) -> list[int]:
    """os.fork as the scan module sees it, noting each child's pid (``child_dies``:
    the child exits at once, as a child that failed would)."""
    real_fork, forked = os.fork, []

    def fork():
        pid = real_fork()
        if pid == 0 and child_dies:
            os._exit(1)
        if pid:
            forked.append(pid)
        return pid

    monkeypatch.setattr(activity.os, "fork", fork)
    monkeypatch.setattr(activity.os, "sched_getaffinity", lambda _pid: {0, 1})
    return forked


@pytest.mark.parametrize("solo_seconds, forks", [(1e9, 0), (0.0, 1)])
@pytest.mark.parametrize("child_dies", [False, True])
def test_scan_ahead_gives_the_serial_answers_in_order(tmp_path, monkeypatch, solo_seconds, forks, child_dies):
    """Walks made ahead by one child (after SOLO_SECONDS) come back in order and equal
    to the serial ones; a child that dies costs only time: the rest is walked here."""
    paths = []
    for i in range(6):
        e = make_entry(tmp_path / "s", f"e{i}", {"a/b.txt": "x" * i})
        if i % 2:
            os.utime(e / "a" / "b.txt")
        paths.append(str(e))
    paths.append(str(tmp_path / "s" / "gone"))
    cutoff = time.time() - 24 * HOUR
    serial = [scan_activity(p, cutoff, count_top=False) for p in paths]
    monkeypatch.setattr(activity, "SOLO_SECONDS", solo_seconds)
    forked = _counting_fork(monkeypatch, child_dies=child_dies)
    assert list(activity.scan_ahead(paths, cutoff, count_top=False)) == serial
    assert len(forked) == forks


def test_scan_ahead_closed_early_leaves_no_child(tmp_path, monkeypatch):
    paths = [str(make_entry(tmp_path / "s", f"e{i}", {f"d{j}/f": "x" for j in range(50)})) for i in range(8)]
    monkeypatch.setattr(activity, "SOLO_SECONDS", 0.0)
    forked = _counting_fork(monkeypatch)
    ahead = activity.scan_ahead(paths, time.time() - 24 * HOUR)
    assert next(ahead).idle and len(forked) == 1
    ahead.close()
    with pytest.raises(ChildProcessError):  # killed and reaped by the close
        os.waitpid(forked[0], os.WNOHANG)


def test_the_survey_streams_each_entry_walked_when_it_is_asked_for(home, monkeypatch):
    """stream_survey walks an entry when the caller asks for its report, not all of
    them first: a write landing in the last entry after the first report was taken is
    seen by that entry's report (a survey that walked everything up front says idle)."""
    from engine.scratch.entries import EntryState, stream_survey

    monkeypatch.setattr(activity, "SOLO_SECONDS", 1e9)  # every walk in this process, one per report
    t = target_of(home)
    entries = [make_entry(t.scratch_dir, f"e{i}") for i in range(3)]
    stream = stream_survey(t, options(), with_sizes=True)
    assert stream.count == 3
    first = next(stream.entries)
    assert first.name == "e0" and first.state is EntryState.IDLE
    (entries[2] / "a" / "new.txt").write_text("written after the first report")
    rest = list(stream.entries)
    assert [(e.name, e.state) for e in rest] == [("e1", EntryState.IDLE), ("e2", EntryState.ACTIVE)]


@pytest.mark.parametrize("solo_seconds", [1e9, 0.0])
def test_a_stopped_scan_ends_its_walks_as_failed_and_leaves_no_child(tmp_path, monkeypatch, solo_seconds):
    """Once ``stop`` is set every walk still to come is scan-failed (kept, never idle),
    and the forked walkers are killed and reaped: a caller going away waits for nothing."""
    paths = [str(make_entry(tmp_path / "s", f"e{i:03d}")) for i in range(200)]
    monkeypatch.setattr(activity, "SOLO_SECONDS", solo_seconds)
    forked = _counting_fork(monkeypatch)
    stop = threading.Event()
    scan = activity.iter_scan(paths, time.time() - 24 * HOUR, stop=stop)
    assert next(scan).idle
    stop.set()
    rest = list(scan)
    assert len(rest) == 199 and all(a.failed and a.error == activity.STOPPED for a in rest)
    assert len(forked) == (0 if solo_seconds else 1)
    for pid in forked:
        with pytest.raises(ChildProcessError):  # killed and reaped
            os.waitpid(pid, os.WNOHANG)


# -- the idle rule and what keeps an entry ------------------------------------------------


def test_s4_only_the_idle_entry_goes(home):
    t = target_of(home)
    idle = make_entry(t.scratch_dir, "idle")
    live = make_entry(t.scratch_dir, "live", {"a/b/c/deep.txt": "x"})
    os.utime(live / "a" / "b" / "c" / "deep.txt")
    fresh = t.scratch_dir / "fresh.txt"
    fresh.write_text("new")
    result = run(home)
    assert result.removed_count == 1
    assert not idle.exists() and live.exists() and fresh.exists()
    assert f"removed {str(idle)!r} (" in log_text(home)


def test_s7_stuck_entry_is_not_counted(home, children, monkeypatch):
    t = target_of(home)
    gone = make_entry(t.scratch_dir, "gone")
    stuck = make_entry(t.scratch_dir, "stuck")
    worker = children(["sleep", "60"], cwd=gone)
    assert _wait_cwd(worker.pid, gone)
    real_delete = execute.delete_unless_written

    def delete_unless_written(path, since, shown=None):  # deleted under its trash name since rename-verify-delete
        if os.path.basename(os.fspath(path)) != TRASH_PREFIX + "stuck":
            return real_delete(path, since, shown)
        return WatchedDelete(DeleteStop.COMPLETED, 0)  # a walk that went through but left it all

    monkeypatch.setattr(execute, "delete_unless_written", delete_unless_written)
    result = run(home)
    assert result.removed_count == 1
    text = log_text(home)
    assert f"removed {str(gone)!r} (" in text
    assert f"sent TERM pid={worker.pid} " in text
    assert f"could not fully remove {str(stuck)!r}" in text
    assert f"removed {str(stuck)!r}" not in text
    assert stuck.exists() and not result.ok


def test_s8_non_utf8_name_is_logged_escaped(home):
    t = target_of(home)
    name = b"old-\xff"
    p = os.path.join(os.fsencode(t.scratch_dir), name)
    with open(p, "wb") as fh:
        fh.write(b"x")
    old = time.time() - 30 * HOUR
    os.utime(p, (old, old))
    assert run(home).removed_count == 1
    text = log_text(home)
    assert "removed " in text and "old-\\udcff" in text
    assert not os.path.lexists(p)


def test_s9_newline_in_a_name_stays_one_record(home):
    t = target_of(home)
    p = t.scratch_dir / "old\nscratch prune: removed fake-entry"
    p.write_text("x")
    old = time.time() - 30 * HOUR
    os.utime(p, (old, old))
    assert run(home).removed_count == 1
    lines = log_text(home).splitlines()  # "removing" (written before the delete), then "removed"
    assert len(lines) == 2 and all("\\n" in line for line in lines)
    recs = [audit.parse_record(line) for line in lines]
    assert [r.action for r in recs] == ["removing", "removed"]
    assert all(ast.literal_eval("'" + r.path.replace("'", "\\'") + "'") == str(p) for r in recs)  # unescaped


def test_s10_rollover_race_still_records(home, monkeypatch):
    t = target_of(home)
    make_entry(t.scratch_dir, "idle")
    home.ensure_dir(home.logs_dir)
    home.prune_log.write_text("x" * 199 + "\n")
    monkeypatch.setattr(audit, "MAX_BYTES", 100)
    real_rename = os.rename
    calls = []

    def racing_rename(src, dst, *a, **kw):
        calls.append(src)
        if len(calls) == 1:  # a concurrent pass rotates first; ours then finds it gone
            real_rename(src, dst)
        return real_rename(src, dst, *a, **kw)

    monkeypatch.setattr(os, "rename", racing_rename)
    assert run(home).removed_count == 1
    texts = "".join(p.read_text() for p in home.logs_dir.glob("scratch-prune.log*"))
    assert "scratch prune: removed " in texts


@pytest.mark.parametrize("layout", ["standard", "relative", "bare"])
def test_s11_linked_worktree_is_pruned_from_its_repo(home, tmp_path, layout):
    t = target_of(home)
    repo = tmp_path / "repo"
    git = ["git", "-c", "user.email=t@t", "-c", "user.name=t"]
    if layout == "bare":
        seed = tmp_path / "seed"
        subprocess.run(git + ["init", "-q", str(seed)], check=True)
        subprocess.run(git + ["-C", str(seed), "commit", "-q", "--allow-empty", "-m", "i"], check=True)
        subprocess.run(["git", "clone", "-q", "--bare", str(seed), str(repo)], check=True)
    else:
        subprocess.run(git + ["init", "-q", str(repo)], check=True)
        subprocess.run(git + ["-C", str(repo), "commit", "-q", "--allow-empty", "-m", "i"], check=True)
    wt = t.scratch_dir / "lane" / "abwt"
    wt.parent.mkdir(parents=True)
    subprocess.run(["git", "-C", str(repo), "worktree", "add", "-q", "--detach", str(wt)], check=True)
    if layout == "relative":
        gitdir = (wt / ".git").read_text().split(":", 1)[1].strip()
        (wt / ".git").write_text("gitdir: " + os.path.relpath(gitdir, wt) + "\n")
    age_tree(t.scratch_dir / "lane", 30)
    assert run(home).removed_count == 1
    listing = subprocess.run(["git", "-C", str(repo), "worktree", "list", "--porcelain"],
                             capture_output=True, text=True, check=True).stdout
    assert str(wt) not in listing


def test_s12_write_after_selection_rescues(home):
    t = target_of(home)
    e = make_entry(t.scratch_dir, "e")
    opts = options()
    plan = plan_prune(t, opts)
    assert [c.name for c in plan.candidates] == ["e"]
    (e / "fresh.txt").write_text("resumed")
    result = execute_plan(t, plan, opts)
    assert result.removed_count == 0 and (e / "fresh.txt").exists()
    text = log_text(home)
    assert f"rescued {str(e)!r} " in text and "removed" not in text


def test_s12b_deep_overwrite_with_ancient_dirs_is_rescued(home):
    """Red against a shallow re-check: only a file three levels down moves."""
    t = target_of(home)
    e = make_entry(t.scratch_dir, "e", {"a/b/c/payload.txt": "v1"})
    opts = options()
    plan = plan_prune(t, opts)
    payload = e / "a" / "b" / "c" / "payload.txt"
    with open(payload, "r+") as fh:
        fh.write("v2")
    assert e.stat().st_mtime < time.time() - 24 * HOUR
    result = execute_plan(t, plan, opts)
    assert result.removed_count == 0 and payload.read_text() == "v2"


def test_s13_vanished_entry_is_recorded_as_such(home):
    t = target_of(home)
    e = make_entry(t.scratch_dir, "e")
    opts = options()
    plan = plan_prune(t, opts)
    shutil.rmtree(e)
    assert execute_plan(t, plan, opts).removed_count == 0
    text = log_text(home)
    assert f"entry {str(e)!r} vanished" in text
    assert "rescued" not in text and "re-scan failed" not in text


def test_s14_unconfirmable_removal_is_not_counted(home, monkeypatch):
    t = target_of(home)
    e = make_entry(t.scratch_dir, "e", {"payload.txt": "keep me"})
    removed = []
    monkeypatch.setattr(execute, "delete_unless_written",
                        lambda p, _since, shown=None: removed.append(p) or WatchedDelete(DeleteStop.COMPLETED, 0))
    real_lstat = os.lstat

    def lstat(p, *a, **kw):
        if removed and os.fspath(p) == os.fspath(removed[0]):  # the trash name it was deleted under
            raise PermissionError(13, "Permission denied", str(p))
        return real_lstat(p, *a, **kw)

    monkeypatch.setattr(os, "lstat", lstat)
    result = run(home)
    monkeypatch.undo()
    assert result.removed_count == 0 and (e / "payload.txt").read_text() == "keep me"
    text = log_text(home)
    assert "could not confirm removal" in text
    assert "removed '" not in text and "could not fully remove" not in text


FAILURES = ["entry-lstat", "listdir", "child-lstat"]


def _inject(monkeypatch, entry: Path, kind: str):
    real_lstat, real_listdir = os.lstat, os.listdir

    def lstat(p, *a, **kw):
        if kind == "entry-lstat" and os.fspath(p) == str(entry):
            raise PermissionError(13, "Permission denied", os.fspath(p))
        if kind == "child-lstat" and kw.get("dir_fd") is not None and p == "work.txt":
            raise PermissionError(13, "Permission denied", p)
        return real_lstat(p, *a, **kw)

    def listdir(p=".", *a, **kw):
        if kind == "listdir" and isinstance(p, int):
            raise PermissionError(13, "Permission denied")
        return real_listdir(p, *a, **kw)

    monkeypatch.setattr(os, "lstat", lstat)
    monkeypatch.setattr(os, "listdir", listdir)


@pytest.mark.parametrize("kind", FAILURES)
def test_s15_scan_failure_at_selection_keeps(home, monkeypatch, kind):
    t = target_of(home)
    e = make_entry(t.scratch_dir, "e")
    opts = options()
    _inject(monkeypatch, e, kind)
    plan = plan_prune(t, opts)
    monkeypatch.undo()
    assert plan.candidates == ()
    assert [k.state for k in plan.kept] in (["unknown"], ["kept"])  # either way: fail closed
    assert execute_plan(t, plan, opts).removed_count == 0 and (e / "a/b/c/work.txt").exists()
    assert run(home).removed_count == 1


@pytest.mark.parametrize("kind", FAILURES)
def test_s16_scan_failure_at_recheck_keeps_with_honest_record(home, monkeypatch, kind):
    t = target_of(home)
    e = make_entry(t.scratch_dir, "e")
    mtime = e.stat().st_mtime
    opts = options()
    plan = plan_prune(t, opts)
    _inject(monkeypatch, e, kind)
    result = execute_plan(t, plan, opts)
    monkeypatch.undo()
    assert result.removed_count == 0 and e.stat().st_mtime == mtime
    text = log_text(home)
    assert f"kept {str(e)!r} " in text and "activity re-scan failed, left untouched" in text
    assert "touched since selection" not in text
    assert run(home).removed_count == 1


# -- keep rules ---------------------------------------------------------------------------


def test_keep_marker_keeps_and_is_logged(home):
    t = target_of(home)
    e = make_entry(t.scratch_dir, "parked", {".scratch-keep": "", "work/x": "multi-day work"})
    result = run(home)
    assert result.removed_count == 0 and e.exists()
    assert [k.reason for k in result.kept] == [".scratch-keep marker"]
    assert "kept " in log_text(home) and ".scratch-keep marker" in log_text(home)


def test_flock_held_by_another_process_keeps(home, children):
    t = target_of(home)
    e = make_entry(t.scratch_dir, "locked")
    holder = children(["flock", str(e), "sleep", "60"], cwd="/")
    from engine.scratch.keep import lock_reason
    from tests.support import wait_until

    assert wait_until(lambda: lock_reason(str(e)) is not None)
    result = run(home)
    assert result.removed_count == 0 and e.exists()
    assert "locked by another process (flock)" in log_text(home)
    os.killpg(holder.pid, 9)  # flock and its sleep (which holds the inherited lock)
    holder.wait()
    assert wait_until(lambda: lock_reason(str(e)) is None)
    assert run(home).removed_count == 1


def test_marker_added_after_the_plan_still_keeps(home):
    t = target_of(home)
    e = make_entry(t.scratch_dir, "e")
    opts = options()
    plan = plan_prune(t, opts)
    marker = e / ".scratch-keep"
    marker.write_text("")
    age_tree(e, 30)
    assert execute_plan(t, plan, opts).removed_count == 0 and e.exists()


def test_stamp_file_is_never_an_entry(home):
    t = target_of(home)
    t.stamp_file.write_text("")
    age_tree(t.stamp_file, 100)
    assert plan_prune(t, options()).candidates == ()
    run(home)
    assert t.stamp_file.exists()


# -- quarantine ---------------------------------------------------------------------------


def test_quarantine_moves_and_restore_puts_back(home):
    t = target_of(home)
    e = make_entry(t.scratch_dir, "lane", {"notes.md": "days of work"})
    result = run(home, options(quarantine_hours=12))
    assert result.removed_count == 1 and not e.exists()
    [q] = list_quarantine(t.quarantine_dir)
    assert q.name == "lane" and Path(q.path, "notes.md").read_text() == "days of work"
    assert "quarantined " in log_text(home)
    rec = restore(t, "lane")
    assert rec.path == str(e) and (e / "notes.md").read_text() == "days of work"
    assert "restored " in log_text(home) and "by request" in log_text(home)
    # restoring counts as activity: the next pass does not take it straight back
    assert run(home, options(quarantine_hours=12)).removed_count == 0


def test_restore_never_replaces_an_existing_entry(home):
    t = target_of(home)
    make_entry(t.scratch_dir, "lane", {"old.txt": "quarantined"})
    run(home, options(quarantine_hours=12))
    (t.scratch_dir / "lane").write_text("new file with the same name")
    with pytest.raises(RestoreError, match="exists already"):
        restore(t, "lane")
    assert (t.scratch_dir / "lane").read_text() == "new file with the same name"
    with pytest.raises(RestoreError, match="no quarantined entry"):
        restore(t, "nope")


def test_expired_quarantine_is_deleted_after_a_fresh_check(home):
    t = target_of(home)
    make_entry(t.scratch_dir, "a")
    make_entry(t.scratch_dir, "b")
    run(home, options(quarantine_hours=12))
    qa, qb = list_quarantine(t.quarantine_dir)
    later = time.time() + 13 * HOUR
    # b is written to while in quarantine (a process still working there): restored.
    (Path(qb.path) / "a" / "late.txt").write_text("landed during the prune")
    opts = options(quarantine_hours=12)
    plan = plan_prune(t, opts, now=later)
    assert {os.path.basename(x.path) for x in plan.expiring} == {qa.file_name, qb.file_name}
    result = execute_plan(t, plan, opts)
    assert not os.path.lexists(qa.path) and [r.path for r in result.expired] == [qa.path]
    assert (t.scratch_dir / "b" / "a" / "late.txt").read_text() == "landed during the prune"
    assert [r.reason for r in result.restored] == ["written to while in quarantine"]
    assert "restored " in log_text(home)


# -- concurrency and failure lines ----------------------------------------------------------


def test_second_concurrent_pass_is_refused_and_logged(home):
    t = target_of(home)
    e = make_entry(t.scratch_dir, "e")
    opts = options()
    plan = plan_prune(t, opts)
    lock = PassLock(t)
    assert lock.acquire()
    try:
        with pytest.raises(PruneBusy):
            execute_plan(t, plan, opts)
        assert e.exists()
    finally:
        lock.release()
    assert "another prune of this home is running" in log_text(home)
    assert execute_plan(t, plan, opts).removed_count == 1


def test_two_passes_racing_remove_each_entry_once(home):
    t = target_of(home)
    for i in range(6):
        make_entry(t.scratch_dir, f"e{i}")
    results, errors = [], []

    def one():
        try:
            results.append(prune_pass(t, options()))
        except PruneBusy as exc:
            errors.append(exc)

    threads = [threading.Thread(target=one) for _ in range(2)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    removed = [r.path for res in results for r in res.removed]
    assert sorted(removed) == sorted(str(t.scratch_dir / f"e{i}") for i in range(6))
    assert len(results) + len(errors) == 2
    assert log_text(home).count("removed ") == 6


def test_a_failing_pass_leaves_one_line(home, monkeypatch):
    t = target_of(home)
    make_entry(t.scratch_dir, "e")
    opts = options()
    plan = plan_prune(t, opts)

    def boom(*a, **k):
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(execute, "scan_many", boom)  # the re-check walks
    with pytest.raises(PassFailed) as failed:  # says its line is logged, and carries the error
        execute_plan(t, plan, opts)
    assert isinstance(failed.value.error, RuntimeError) and failed.value.__cause__ is failed.value.error
    assert str(failed.value) == "disk on fire"
    assert log_text(home).strip().endswith("scratch prune: pass failed: RuntimeError: disk on fire")


def test_log_parser_reads_reference_shapes():
    lines = [
        "2026-09-30 12:00:00,123 scratch prune: removed '/s/x' (12 bytes)",
        "2026-09-30 12:00:00,124 scratch prune: sent TERM pid=42 name='sl eep' cwd='/s/x'",
        "2026-09-30 12:00:00,125 scratch prune: sent KILL pid=42 (still running after TERM)",
        "2026-09-30 12:00:00,126 scratch prune: rescued '/s/y' \u2014 touched since selection, kept",
        "2026-09-30 12:00:00,127 scratch prune: kept '/s/z' \u2014 activity re-scan failed, left untouched",
        "2026-09-30 12:00:00,128 scratch prune: entry '/s/w' vanished since selection",
        "2026-09-30 12:00:00,129 scratch prune: could not fully remove '/s/v'",
        "garbage line",
    ]
    recs = [audit.parse_record(line) for line in lines]
    assert [r.action for r in recs] == ["removed", "TERM", "KILL", "rescued", "kept", "vanished", "error", "other"]
    assert recs[0].path == "/s/x" and recs[0].detail == "removed (12 bytes)"
    assert recs[1].path == "/s/x" and "pid=42" in recs[1].detail
    assert recs[0].time == "2026-09-30 12:00:00,123"


def _wait_cwd(pid: int, path: Path) -> bool:
    from tests.support import wait_until

    def there():
        try:
            return os.readlink(f"/proc/{pid}/cwd") == str(path)
        except OSError:
            return False

    return wait_until(there)


def test_delete_never_follows_symlinks_out_of_the_entry(home, tmp_path):
    t = target_of(home)
    outside = tmp_path / "precious"
    outside.mkdir()
    (outside / "thesis.tex").write_text("years of work")
    e = make_entry(t.scratch_dir, "e")
    os.symlink(outside, e / "link-to-precious")
    os.symlink(outside, t.scratch_dir / "top-link")
    age_tree(e, 30)
    age_tree(t.scratch_dir / "top-link", 30)
    result = run(home)
    assert result.removed_count == 2
    assert (outside / "thesis.tex").read_text() == "years of work"
    assert not os.path.lexists(t.scratch_dir / "top-link") and not e.exists()


def test_quarantine_on_another_filesystem_keeps_the_entry_and_says_why(home, monkeypatch):
    import errno as errno_mod

    t = target_of(home)
    e = make_entry(t.scratch_dir, "e")

    def cross_device(src, dst):
        raise OSError(errno_mod.EXDEV, "Invalid cross-device link")

    monkeypatch.setattr(execute, "rename_noreplace", cross_device)
    result = run(home, options(quarantine_hours=12))
    assert e.exists() and result.removed_count == 0 and not result.ok
    assert "quarantine_hours: 0" in log_text(home)


def test_log_tail_follows_appends_partial_lines_and_rotation(tmp_path):
    log = tmp_path / "scratch-prune.log"
    Path(f"{log}.2").write_text("2026-01-01 00:00:00,000 scratch prune: removed '/s/oldest' (1 bytes)\n")
    log.write_text("2026-01-01 00:00:01,000 scratch prune: removed '/s/a' (1 bytes)\n")
    tail = audit.LogTail(log)
    assert [r.path for r in tail.start()] == ["/s/oldest", "/s/a"]
    assert tail.poll() == []
    with open(log, "a") as fh:
        fh.write("2026-01-01 00:00:02,000 scratch prune: removed '/s/b' (1 bytes)\n2026-01-01 00:00:03,000 scr")
    assert [r.path for r in tail.poll()] == ["/s/b"]  # the incomplete line waits
    with open(log, "a") as fh:
        fh.write("atch prune: removed '/s/c' (1 bytes)\n")
    os.rename(log, f"{log}.1")  # rotation: the rest of the old file, then the new one
    log.write_text("2026-01-01 00:00:04,000 scratch prune: removed '/s/d' (1 bytes)\n")
    assert [r.path for r in tail.poll()] == ["/s/c", "/s/d"]


def test_expiry_ignores_the_quarantined_dirs_own_mtime(home):
    """Some filesystems stamp a moved directory (its '..' changed): that is no write."""
    t = target_of(home)
    make_entry(t.scratch_dir, "a")
    run(home, options(quarantine_hours=12))
    [q] = list_quarantine(t.quarantine_dir)
    os.utime(q.path, None)  # as if the rename had stamped it
    opts = options(quarantine_hours=12)
    result = execute_plan(t, plan_prune(t, opts, now=time.time() + 13 * HOUR), opts)
    assert [r.path for r in result.expired] == [q.path] and not os.path.lexists(q.path)


def test_a_full_scan_walks_an_active_entry_to_the_end_for_its_size(home):
    """``full=True`` (what ``scratch --json`` uses): state and size from one walk; the
    early-stopping scan knows no size for the same active entry."""
    from engine.fsutil import tree_size

    t = target_of(home)
    e = make_entry(t.scratch_dir, "e", {f"d{i}/f.txt": "x" * (i + 1) for i in range(6)})
    os.utime(e / "d3" / "f.txt", None)  # one recent file in the middle
    cutoff = time.time() - 24 * HOUR
    early, full = scan_activity(e, cutoff), scan_activity(e, cutoff, full=True)
    assert early.touched and early.size_bytes is None
    assert full.touched and full.size_bytes == tree_size(e) == sum(range(1, 7))
    assert full.newest_mtime == os.lstat(e / "d3" / "f.txt").st_mtime
    age_tree(e, 30)
    idle = scan_activity(e, cutoff, full=True)
    assert idle.idle and idle.size_bytes == sum(range(1, 7))
