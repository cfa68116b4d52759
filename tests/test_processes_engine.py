"""The process registry with real processes: spawn, env, exit records, lost, lookup by
prefix, kill (trap-TERM child, recycled pid), yield, survival across registries, retention."""

from __future__ import annotations

import os
import signal
import stat
import time
from dataclasses import replace
from pathlib import Path

import pytest

from engine import identity
from engine.config import ProcessSettings, Settings
from engine.processes import ProcessLookupFailed, ProcessRegistry, SpawnFailed
from engine.processes import registry as registry_mod
from engine.processes.follower import OutputFollower
from engine.processes.foreground import ForegroundRun
from engine.processes.retention import prune_finished
from engine.processes.session import EXIT_FILE, KILLED_FILE
from tests.support import wait_until
from tests.support.cli import run_cli
from tests.support.commands import count_to_400


def test_spawn_shell_string_records_exit_code_and_output(reg):
    s = reg.spawn("echo hello; echo oops >&2; exit 3")
    assert s.id.startswith("proc_") and len(s.id) == 17
    done = reg.wait(s.id, timeout=10)
    assert done.status == "exited"
    assert done.exit_code == 3 and done.signal is None
    assert done.ended_at is not None and done.ended_at >= done.started_at - 1
    assert s.output_path.read_text() == "hello\noops\n"
    assert stat.S_IMODE(os.stat(s.output_path).st_mode) == 0o600


def test_spawn_argv_runs_without_a_shell(reg, tmp_path):
    target = tmp_path / "with space"
    target.mkdir()
    s = reg.spawn(["sh", "-c", 'printf "%s|" "$@"; pwd', "x", "a b", "$HOME"], cwd=target)
    reg.wait(s.id, timeout=10)
    assert s.output_path.read_text() == f"a b|$HOME|{target}\n"
    assert s.argv == ("sh", "-c", 'printf "%s|" "$@"; pwd', "x", "a b", "$HOME")
    assert s.cwd == str(target)


def test_own_session_and_stdin_is_dev_null(reg):
    s = reg.spawn("cat; ps -o sid= -o pgid= -p $$")
    done = reg.wait(s.id, timeout=10)
    assert done.exit_code == 0  # cat got EOF at once from /dev/null
    sid, pgid = (int(x) for x in s.output_path.read_text().split())
    assert sid == s.pid and pgid == s.pid  # the wrapper leads its own session and group


def test_spawn_environment(reg, home, monkeypatch):
    monkeypatch.delenv("TMPDIR", raising=False)
    monkeypatch.delenv("HERMES_SCRATCH_DIR", raising=False)
    s = reg.spawn('echo "$TMPDIR|$TMP|$TEMP|$HERMES_SCRATCH_DIR|$PAGER|$GIT_PAGER|$PYTHONUNBUFFERED|'
                  '$HERMES_HOME|$HERMES_PROCESS_ID|$EXTRA"', env={"EXTRA": "yes"})
    reg.wait(s.id, timeout=10)
    scratch = str(home.scratch_dir)
    assert s.output_path.read_text().strip().split("|") == [
        scratch, scratch, scratch, scratch, "cat", "cat", "1", str(home.root), s.id, "yes"]
    assert home.scratch_dir.is_dir()


def test_user_tmpdir_is_kept_but_ours_is_replaced(reg, home, monkeypatch, tmp_path):
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.delenv("HERMES_SCRATCH_DIR", raising=False)
    s = reg.spawn('echo "$TMPDIR"')
    reg.wait(s.id, timeout=10)
    assert s.output_path.read_text().strip() == str(tmp_path)
    # A TMPDIR we set ourselves (marker equal) is re-pointed at this home's scratch.
    monkeypatch.setenv("TMPDIR", "/elsewhere/scratch")
    monkeypatch.setenv("HERMES_SCRATCH_DIR", "/elsewhere/scratch")
    s2 = reg.spawn('echo "$TMPDIR"')
    reg.wait(s2.id, timeout=10)
    assert s2.output_path.read_text().strip() == str(home.scratch_dir)


def test_bad_cwd_and_empty_command_are_refused(reg, tmp_path):
    with pytest.raises(SpawnFailed, match="does not exist"):
        reg.spawn("true", cwd=tmp_path / "missing")
    with pytest.raises(SpawnFailed, match="empty"):
        reg.spawn("   ")
    assert reg.list() == []


def test_signal_death_is_reported_as_128_plus_n(reg):
    s = reg.spawn("kill -TERM $$")
    done = reg.wait(s.id, timeout=10)
    assert done.status == "exited"
    assert done.exit_code == 143 and done.signal == "SIGTERM"


def test_a_registry_of_another_process_sees_it_running_then_its_exit(home, settings, reg, tmp_path):
    """Registries of one process share their children (any of them reaps them all); one in
    another process has no Popen and must read both the running state and the exit record
    from the session's folder. The spawner here is the CLI, a process of its own."""
    gate = tmp_path / "gate"  # it runs until the test has seen it running
    r = run_cli("--home", str(home.root), "run", "--bg", "--", "sh", "-c",
                'echo started; while [ ! -e "$1" ]; do sleep 0.01; done; echo done; exit 5',
                "sh", str(gate))
    assert r.returncode == 0, r.stderr
    session_id = r.stdout.strip()
    assert reg.popen_of(session_id) is None  # not a child of this process
    assert reg.get(session_id).status == "running"
    follower = OutputFollower(reg.get(session_id).output_path)
    wait_until(lambda: "started" in follower.read().text)
    gate.touch()
    done = reg.wait(session_id, timeout=10)
    assert done.status == "exited" and done.exit_code == 5
    assert "done" in follower.read().text


def test_registries_of_one_process_share_its_children(home, settings, reg):
    s = reg.spawn(["sleep", "30"])
    other = ProcessRegistry(home, settings)
    assert other.popen_of(s.id) is reg.popen_of(s.id) is not None


def test_vanished_without_record_is_lost_never_an_invented_code(reg):
    s = reg.spawn(["sleep", "30"])
    # Someone else KILLs the whole group: the wrapper cannot write its record.
    res = identity.send_signal(s.pid, s.fingerprint, signal.SIGKILL, group=True)
    assert res.sent
    wait_until(lambda: not identity.is_alive(s.pid, s.fingerprint))
    lost = reg.get(s.id)
    assert lost.status == "lost"
    assert lost.exit_code is None and lost.signal is None
    assert not (s.dir / EXIT_FILE).exists()


def test_half_written_exit_record_counts_as_absent(reg):
    s = reg.spawn(["sleep", "30"])
    (s.dir / EXIT_FILE).write_text("14")  # no newline: not committed yet
    assert reg.get(s.id).status == "running"


# -- lookup -------------------------------------------------------------------------------


def _spawn_with_id(reg, monkeypatch, sid):
    monkeypatch.setattr(registry_mod, "new_session_id", lambda: sid)
    s = reg.spawn("true")
    reg.wait(s.id, timeout=10)
    return s


def test_prefix_lookup(reg, monkeypatch):
    a = _spawn_with_id(reg, monkeypatch, "proc_4dae56ca81f6")
    b = _spawn_with_id(reg, monkeypatch, "proc_4dae99999999")
    short = _spawn_with_id(reg, monkeypatch, "proc_abcd")
    longer = _spawn_with_id(reg, monkeypatch, "proc_abcdef012345")
    assert reg.get("proc_4dae56ca81f6").id == a.id  # exact
    assert reg.get("proc_4dae5").id == a.id  # unique prefix
    assert reg.get("4dae56").id == a.id  # bare hex
    assert reg.get(" 4dae9 ").id == b.id
    assert reg.get("proc_abcd").id == short.id  # an exact id beats a longer match
    assert reg.get("abcde").id == longer.id
    with pytest.raises(ProcessLookupFailed) as amb:
        reg.get("proc_4dae")
    assert set(amb.value.candidates) == {a.id, b.id}
    assert a.id in amb.value.message and b.id in amb.value.message
    for too_short in ("proc_4da", "4da", "proc_", "abc"):
        with pytest.raises(ProcessLookupFailed, match="too short"):
            reg.get(too_short)
    for bad in ("", "   ", "../etc", "proc_ffff"):
        with pytest.raises(ProcessLookupFailed):
            reg.get(bad)


# -- kill ---------------------------------------------------------------------------------


def test_kill_terminates_the_group(reg):
    s = reg.spawn("sleep 30 & sleep 30; wait")
    members = wait_until(lambda: m if len(m := identity.group_members(s.pid)) >= 3 else None)
    report = reg.kill(s.id, grace=2)
    assert report.outcome == "killed" and report.status == "killed"
    assert not report.survivors
    # TERM went to every member first. (Whether a KILL followed depends on whether each
    # had ended within the 2 s grace: on a loaded machine one may not have.)
    assert {p for p, sig in report.signals if sig == "SIGTERM"} >= set(members)
    assert identity.group_members(s.pid) == {}
    after = reg.get(s.id)
    assert after.status == "killed" and after.signal == report.signals[-1][1]  # the last signal it sent


def test_kill_escalates_to_sigkill_for_a_child_that_traps_term(reg):
    s = reg.spawn(["sh", "-c", "trap 'echo got TERM' TERM; echo ready; while :; do sleep 0.05; done"])
    wait_until(lambda: "ready" in s.output_path.read_text())
    report = reg.kill(s.id, grace=0.3)
    assert report.outcome == "killed"
    assert (s.pid, "SIGTERM") in report.signals and (s.pid, "SIGKILL") in report.signals
    assert report.survivors == ()
    after = reg.get(s.id)
    assert after.status == "killed" and after.signal == "SIGKILL"
    assert "got TERM" in s.output_path.read_text()
    assert (s.dir / KILLED_FILE).exists()


def test_kill_never_signals_a_recycled_pid(reg, monkeypatch):
    s = reg.spawn(["sleep", "30"])
    real = identity._read_stat_bytes
    sent: list = []
    monkeypatch.setattr(os, "kill", lambda *a: sent.append(("kill", a)))
    monkeypatch.setattr(os, "killpg", lambda *a: sent.append(("killpg", a)))
    monkeypatch.setattr(signal, "pidfd_send_signal", lambda *a: sent.append(("pidfd", a)), raising=False)

    def recycled(pid: int):
        raw = real(pid)
        if pid != s.pid or raw is None:
            return raw
        head, _, tail = raw.rpartition(b")")
        fields = tail.split()
        fields[19] = str(int(fields[19]) + 12345).encode()  # another process's start time
        return head + b") " + b" ".join(fields) + b"\n"

    monkeypatch.setattr(identity, "_read_stat_bytes", recycled)
    report = reg.kill(s.id, grace=0.1)
    assert report.outcome == "pid_recycled"
    assert "another process" in report.detail
    assert report.signals == () and not report.ok
    assert sent == []
    monkeypatch.undo()
    assert identity.is_alive(s.pid, s.fingerprint)  # the real process was spared


def test_kill_of_a_finished_session_sends_nothing(reg):
    s = reg.spawn("true")
    reg.wait(s.id, timeout=10)
    report = reg.kill(s.id)
    assert report.outcome == "already_finished" and report.signals == ()
    assert report.ok


def test_unverified_fingerprint_is_never_signalled(reg, monkeypatch):
    monkeypatch.setattr(identity, "fingerprint", lambda pid: identity.UNVERIFIED)
    s = reg.spawn(["sleep", "30"])
    monkeypatch.undo()
    assert reg.get(s.id).status == "running"  # the pid is there, but not verified
    report = reg.kill(s.id)
    assert report.outcome == "unverified" and report.signals == ()
    assert not report.ok
    identity.send_signal(s.pid, identity.fingerprint(s.pid), signal.SIGKILL, group=True)  # clean up


def test_live_processes_lists_verified_running_leaders(reg):
    running = reg.spawn(["sleep", "30"])
    done = reg.spawn("true")
    reg.wait(done.id, timeout=10)
    assert reg.live_processes() == [(running.pid, running.fingerprint, running.id)]


def test_a_listing_reads_nothing_again_of_a_running_session_that_did_not_change(reg, monkeypatch, tmp_path):
    """The pane lists every second: a running session whose leader's pidfd still says
    it runs and whose meta.json is unchanged costs one stat and one shared poll, not its
    exit record, metadata and a new copy (1,000 running sessions took 40 ms a listing).
    What does change is still seen at the next listing: its metadata, its end, its loss."""
    from engine.processes import session as sess_mod

    gate = tmp_path / "gate"
    ends = reg.spawn(["sh", "-c", 'while [ ! -e "$1" ]; do sleep 0.01; done; exit 3', "sh", str(gate)])
    moved = reg.spawn(["sleep", "30"])
    killed = reg.spawn(["sleep", "30"])
    assert {s.status for s in reg.list()} == {"running"}
    reads: list[str] = []
    for name in ("read_exit_record", "read_meta", "read_kill_record"):
        real = getattr(sess_mod, name)
        monkeypatch.setattr(sess_mod, name, lambda d, _real=real, _name=name: reads.append(_name) or _real(d))
    again = {s.id: s for s in reg.list()}
    assert reads == []
    assert {s.status for s in again.values()} == {"running"}

    ProcessRegistry(reg.home, reg.settings).move_to_background(moved.id)  # another process rewrites meta.json
    identity.send_signal(killed.pid, killed.fingerprint, signal.SIGKILL, group=True)
    wait_until(lambda: not identity.is_alive(killed.pid, killed.fingerprint))
    gate.touch()
    reg.wait(ends.id, timeout=10)
    now = {s.id: s for s in reg.list()}
    assert now[moved.id].status == "running" and now[moved.id].notify is True
    assert now[killed.id].status == "lost"
    assert now[ends.id].status == "exited" and now[ends.id].exit_code == 3


# -- yield ------------------------------------------------------------------------------


@pytest.mark.slow  # heavy: real concurrent processes
def test_yield_halfway_keeps_every_line_exactly_once_and_never_signals(reg, monkeypatch, tmp_path):
    signalled: list = []
    real_send = identity.send_signal
    monkeypatch.setattr(identity, "send_signal", lambda *a, **k: signalled.append(a) or real_send(*a, **k))
    half, rest = tmp_path / "half", tmp_path / "rest"
    s = reg.spawn(["sh", "-c", count_to_400(half, rest)], owner="test", background=False)
    shown: list[str] = []
    fg = ForegroundRun(reg, s)

    def yield_now() -> bool:
        if "".join(shown).count("\n") < 200:
            return False
        half.touch()  # lines come while it yields; it stops again at 300
        return True

    outcome = fg.stream(shown.append, yield_now)
    rest.touch()
    assert outcome.yielded
    moved = outcome.session
    assert moved.id == s.id and moved.background and moved.notify and moved.status == "running"
    # The background follower continues from the yield point.
    rest = OutputFollower(s.output_path, outcome.offset)
    done = reg.wait(s.id, timeout=30)
    assert done.status == "exited" and done.exit_code == 0
    combined = "".join(shown) + rest.read().text
    assert combined.split() == [str(i) for i in range(1, 401)]
    assert s.output_path.read_text().split() == [str(i) for i in range(1, 401)]
    assert signalled == []


def test_foreground_stream_runs_to_the_end(reg):
    s = reg.spawn("printf 'a\\nb'; exit 4", background=False)
    shown: list[str] = []
    outcome = ForegroundRun(reg, s).stream(shown.append)
    assert not outcome.yielded
    assert "".join(shown) == "a\nb"
    assert outcome.session.exit_code == 4


# -- retention --------------------------------------------------------------------------


def _age(s, hours):
    t = time.time() - hours * 3600
    os.utime(s.dir / EXIT_FILE, (t, t))


def test_retention_by_age_and_by_count_never_touches_running(home):
    settings = replace(Settings(), processes=ProcessSettings(keep_finished_hours=24, max_finished=2))
    reg = ProcessRegistry(home, settings)
    running = reg.spawn(["sleep", "30"])
    finished = []
    for _ in range(5):
        s = reg.spawn("true")
        reg.wait(s.id, timeout=10)
        finished.append(s)
    _age(finished[0], 48)  # too old
    _age(finished[1], 5)
    _age(finished[2], 4)
    _age(finished[3], 3)
    _age(finished[4], 2)
    try:
        removed = prune_finished(ProcessRegistry(home, settings))
        assert set(removed) == {finished[0].id, finished[1].id, finished[2].id}
        left = {s.id for s in ProcessRegistry(home, settings).list()}
        assert left == {running.id, finished[3].id, finished[4].id}
        assert not finished[0].dir.exists()
        # max_finished 0 still keeps the running one
        zero = replace(settings, processes=ProcessSettings(max_finished=0))
        prune_finished(ProcessRegistry(home, zero))
        assert [s.id for s in ProcessRegistry(home, zero).list()] == [running.id]
    finally:
        reg.kill(running.id, grace=0.2)


def test_corrupt_session_folder_is_skipped(reg, home):
    s = reg.spawn("true")
    reg.wait(s.id, timeout=10)
    bad = home.processes_dir / "proc_deadbeef0000"
    bad.mkdir()
    (bad / "meta.json").write_text("{not json")
    assert [x.id for x in ProcessRegistry(home, Settings()).list()] == [s.id]
    with pytest.raises(ProcessLookupFailed, match="unreadable"):
        ProcessRegistry(home, Settings()).get("proc_deadbeef0000")


def test_status_dir_is_under_home(reg, home):
    s = reg.spawn("true")
    assert Path(s.dir).parent == home.processes_dir


def test_concurrent_listing_never_reports_a_running_session_lost(reg):
    """The pane's refresh thread and a kill worker list at the same time: a pidfd must
    never be polled after another thread closed it (that read as 'exited' -> lost)."""
    import threading

    sessions = [reg.spawn(["sh", "-c", f"sleep 0.{i % 5 + 1}"]) for i in range(12)]
    seen: set[str] = set()
    stop = threading.Event()

    def hammer():
        while not stop.is_set():
            for s in reg.list():
                seen.add(s.status)

    threads = [threading.Thread(target=hammer) for _ in range(4)]
    for t in threads:
        t.start()
    try:
        for s in sessions:
            reg.wait(s.id, timeout=10)
    finally:
        stop.set()
        for t in threads:
            t.join()
    assert "lost" not in seen
    assert {s.status for s in reg.list()} == {"exited"}


def test_a_listing_between_the_exit_and_the_kill_record_does_not_freeze_exited(reg, monkeypatch):
    """The pane refreshes while a kill is finishing: the wrapper has recorded 143 but the
    kill's own record is not written yet. The session must still end up 'killed'."""
    s = reg.spawn(["sh", "-c", "echo ready; exec sleep 30"])
    # A TERM before the wrapper has started the command would only reach the wrapper,
    # and the command would end by the KILL after the grace period.
    wait_until(lambda: "ready" in s.output_path.read_text())
    from engine.processes import tree

    real = tree.stop
    seen: list[str] = []

    def stop_then_refresh(root, grace, **kw):
        report = real(root, grace, **kw)
        seen.append(reg.get(s.id).status)  # a concurrent refresh at the worst moment
        return report

    monkeypatch.setattr(tree, "stop", stop_then_refresh)
    report = reg.kill(s.id, grace=1)
    assert seen == ["killed"]
    assert report.outcome == "killed" and report.status == "killed"
    assert reg.get(s.id).status == "killed"
    # A registry of its own reads the kill's record: the last signal sent (TERM, or KILL
    # when the 1 s grace ran out first on a loaded machine: seen 1 in 3 full runs at -n 4).
    assert ProcessRegistry(reg.home, reg.settings).get(s.id).signal == report.signals[-1][1]


def test_kill_refused_leaves_no_kill_record(reg, monkeypatch):
    from engine.processes import tree

    s = reg.spawn(["sleep", "30"])
    monkeypatch.setattr(identity, "send_signal", lambda pid, fp, sig, **kw: identity.SignalResult(
        pid, identity.signal_name(sig), identity.SignalOutcome.ERROR, "Operation not permitted"))
    monkeypatch.setattr(tree, "KILL_WAIT_SECONDS", 0.1)
    report = reg.kill(s.id, grace=0.1)
    assert report.outcome == "error" and not report.ok
    assert "Operation not permitted" in report.detail and "still alive" in report.detail
    assert not (s.dir / KILLED_FILE).exists()
    assert reg.get(s.id).status == "running"


def test_an_unreadable_session_makes_live_processes_fail_closed(home, settings):
    """A session whose metadata cannot be read may be a live registered process: callers
    that spare registered processes (the pruner) must not mistake it for a stranger."""
    from engine.processes import ProcessRegistry
    from engine.processes.session import SessionCorrupt

    reg = ProcessRegistry(home, settings)
    s = reg.spawn(["sleep", "30"])
    try:
        assert [sid for _pid, _fp, sid in reg.live_processes()] == [s.id]
        broken = home.processes_dir / "proc_0123456789ab"
        broken.mkdir()
        (broken / "meta.json").write_text("{not json")
        assert reg.unreadable() == ["proc_0123456789ab"]
        assert [x.id for x in reg.list()] == [s.id]  # listing still works, without it
        with pytest.raises(SessionCorrupt, match="proc_0123456789ab"):
            reg.live_processes()
    finally:
        assert reg.kill(s.id, grace=0.5).ok


def test_liveness_names_each_state_of_a_recorded_pid(children):
    """One real child, asked about under its own fingerprint, another one, none at
    all, and after it was reaped."""
    child = children(["sleep", "30"])
    fp = wait_until(lambda: identity.is_verifiable(identity.fingerprint(child.pid)) and identity.fingerprint(child.pid),
                    what="the child's fingerprint")
    boot, _sep, ticks = fp.partition("|")
    assert identity.liveness(child.pid, fp) is identity.Liveness.ALIVE
    assert identity.liveness(child.pid, f"{boot}|{int(ticks) + 1}") is identity.Liveness.RECYCLED
    assert identity.liveness(child.pid, identity.UNVERIFIED) is identity.Liveness.UNVERIFIED_ALIVE
    assert identity.liveness(None, fp) is identity.Liveness.GONE
    child.kill()
    child.wait()
    assert identity.liveness(child.pid, fp) is identity.Liveness.GONE
    assert identity.Liveness.UNVERIFIED_ALIVE == "unverified_alive"  # the stored value is unchanged
