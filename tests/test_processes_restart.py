"""Sessions like a process manager: restart policies run by the session's own wrapper
(attempts recorded, the limit, a backoff that grows, a manual kill that ends the policy),
`proc restart` (same command, cwd and environment; the old one kept, a running one
stopped first) and session names. Real processes; pacing by gate files and recorded
times, never by sleeping a margin."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from engine.processes import ProcessLookupFailed, SpawnFailed
from engine.processes.restart import RestartPolicy, next_attempt_at, read_attempts
from tests.support import wait_until
from tests.support.cli import run_cli


def _cli(home, *args):
    return run_cli(*args, env={"HERMES_HOME": str(home.root)})


def test_on_failure_with_two_restarts_makes_three_attempts_and_ends_with_the_last_code(home):
    out = _cli(home, "run", "--bg", "--restart", "on-failure", "--max-restarts", "2", "--backoff", "0..0",
               "--", "sh", "-c", "exit 3")
    assert out.returncode == 0, out.stderr
    sid = out.stdout.strip()
    assert _cli(home, "proc", "wait", sid, "--timeout", "60").returncode == 0
    row = json.loads(_cli(home, "proc", "poll", sid, "--json").stdout)
    assert row["exit_code"] == 3 and row["status"] == "exited"
    assert row["restarts"] == 2 and row["max_restarts"] == 2
    assert [a["exit_code"] for a in row["attempts"]] == [3, 3, 3]
    assert row["next_attempt_at"] is None
    ps = json.loads(_cli(home, "ps", "--all", "--json").stdout)
    assert next(r for r in ps if r["id"] == sid)["restarts"] == 2


def test_on_failure_stops_after_a_success_and_always_does_not(home, reg, tmp_path):
    counter = tmp_path / "n"
    # Fails twice, then succeeds: on-failure stops there.
    script = f'n=$(cat {counter} 2>/dev/null || echo 0); n=$((n+1)); echo $n > {counter}; [ $n -ge 3 ]'
    s = reg.spawn(["sh", "-c", script], restart=RestartPolicy("on-failure", 5, 0, 0))
    done = reg.wait(s.id, timeout=60)
    assert done.exit_code == 0
    assert [a.exit_code for a in read_attempts(s.dir)] == [1, 1, 0]
    counter.unlink()
    s = reg.spawn(["sh", "-c", "true"], restart=RestartPolicy("always", 2, 0, 0))
    assert reg.wait(s.id, timeout=60).exit_code == 0
    assert [a.exit_code for a in read_attempts(s.dir)] == [0, 0, 0]


def test_the_backoff_doubles_between_attempts(reg):
    s = reg.spawn(["sh", "-c", "exit 1"], restart=RestartPolicy("on-failure", 4, 0.2, 0.8))
    reg.wait(s.id, timeout=120)
    attempts = read_attempts(s.dir)
    assert len(attempts) == 5
    gaps = [b.started_at - a.ended_at for a, b in zip(attempts, attempts[1:], strict=False)]
    # Each wait is at least its delay (0.2, 0.4, 0.8, then capped at 0.8); lower bounds only.
    for gap, delay in zip(gaps, (0.2, 0.4, 0.8, 0.8), strict=True):
        assert gap >= delay - 0.01, (gaps, delay)


def test_a_manual_kill_ends_the_always_policy(reg, tmp_path):
    gate = tmp_path / "running"
    s = reg.spawn(["sh", "-c", f"touch {gate}; exec sleep 600"], restart=RestartPolicy("always", 5, 0, 0))
    wait_until(gate.exists, timeout=30, what="the first attempt to run")
    report = reg.kill(s.id, grace=5)
    assert report.ok
    after = reg.get(s.id)
    assert after.status == "killed"
    assert len(read_attempts(s.dir)) == 1  # the wrapper recorded the exit and ended: no second start
    assert (s.dir / "exit").exists()


def test_a_kill_during_the_backoff_ends_the_policy_and_reads_killed(home, reg):
    """Restart policy edges (issue 35.7): a stop that ends the backoff's wait is the
    user's, not the command's: it read "gone: it ended on its own (exit 1)", the last
    attempt's code recorded as the session's end."""
    s = reg.spawn(["sh", "-c", "exit 1"], restart=RestartPolicy("on-failure", 5, 600, 600))
    wait_until(lambda: next_attempt_at(s.dir) is not None, timeout=30, what="the backoff to start")
    assert reg.get(s.id).running
    out = _cli(home, "proc", "kill", s.id, "--grace", "30")
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith(f"{s.id} killed: SIGTERM") and "on its own" not in out.stdout, out.stdout
    after = reg.get(s.id)
    assert after.status == "killed" and after.signal == "SIGTERM"
    assert after.exit_text() == "killed (SIGTERM)"
    assert len(read_attempts(s.dir)) == 1


def test_restart_values_beyond_their_range_are_refused_naming_the_range(home):
    """Restart policy edges (issue 35.7): a count the wrapper's shell arithmetic cannot
    hold was accepted and then broke the wrapper ("[: Illegal number"); every value out
    of range is one line, exit 2, naming the allowed range, and nothing is started."""
    for args, words in ((("--max-restarts", "99999999999999999999"), "0..10000"),
                        (("--max-restarts", "10001"), "0..10000"),
                        (("--backoff", "0..1e400"), "86400"),
                        (("--backoff", "nan..1"), "86400"),
                        (("--backoff", "0..86401"), "86400")):
        out = _cli(home, "run", "--bg", "--restart", "always", *args, "--", "true")
        assert out.returncode == 2, (args, out.stdout, out.stderr)
        assert words in out.stderr and len(out.stderr.strip().splitlines()) == 1, (args, out.stderr)
    assert not home.processes_dir.exists() or not any(home.processes_dir.iterdir())
    with pytest.raises(ValueError, match="0..10000"):
        RestartPolicy("always", 10**20, 0, 0)


def test_the_attempts_record_stays_bounded_and_still_counts_every_attempt(home, reg):
    """Restart policy edges (issue 35.7): a command that fails at once with a zero
    backoff added an ``attempts`` line every few milliseconds, outside the output
    bound. The wrapper keeps the last ATTEMPTS_KEPT..2*ATTEMPTS_KEPT; each line carries
    its number, so ``restarts`` still counts them all."""
    kept = 100  # engine.processes.restart.ATTEMPTS_KEPT
    s = reg.spawn(["true"], restart=RestartPolicy("always", 250, 0, 0))
    reg.wait(s.id, timeout=300)
    lines = (s.dir / "attempts").read_bytes().splitlines()
    assert kept <= len(lines) <= 2 * kept, len(lines)
    attempts = read_attempts(s.dir)
    assert [a.number for a in attempts] == list(range(252 - len(lines), 252))
    row = json.loads(_cli(home, "proc", "poll", s.id, "--json").stdout)
    assert row["restarts"] == 250 and row["max_restarts"] == 250 and row["exit_code"] == 0
    assert row["attempts"][-1]["attempt"] == 251
    from engine.processes import restart

    assert kept == restart.ATTEMPTS_KEPT


def test_proc_restart_runs_the_same_command_cwd_and_environment_and_keeps_the_old(home, reg, tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    gate = tmp_path / "gate"
    s = reg.spawn(["sh", "-c", f'echo "$SECRET_TOKEN $(pwd)"; while [ ! -e {gate} ]; do sleep 0.05; done'],
                  cwd=work, env={"SECRET_TOKEN": "tok-123"}, name="api-server")
    wait_until(lambda: s.output_path.read_text().strip() != "", timeout=30, what="the first output")
    out = _cli(home, "proc", "restart", "api-server", "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["restarted_from"] == s.id and data["stopped"]["outcome"] == "killed"
    new = reg.get(data["id"])
    assert new.restarted_from == s.id and new.name == "api-server" and new.cwd == str(work)
    wait_until(lambda: new.output_path.read_text().strip() != "", timeout=30, what="the restart's output")
    assert new.output_path.read_text() == f"tok-123 {work}\n"
    assert reg.get(s.id).status == "killed"  # the old one stays in the list
    assert reg.resolve_id("api-server") == new.id  # the name follows the newest
    gate.touch()
    reg.wait(new.id, timeout=30)


def test_a_kanban_worker_and_a_hermes_session_are_not_restarted(reg):
    s = reg.spawn(["true"], owner="kanban:t_1234abcd")
    reg.wait(s.id, timeout=30)
    with pytest.raises(SpawnFailed, match="retry rules"):
        reg.restart(s.id)


def test_names_are_unique_among_running_sessions(home, reg, tmp_path):
    gate = tmp_path / "gate"
    s = reg.spawn(["sh", "-c", f"while [ ! -e {gate} ]; do sleep 0.05; done"], name="watcher")
    taken = _cli(home, "run", "--bg", "--name", "watcher", "--", "true")
    assert taken.returncode == 1 and "taken by running session" in taken.stderr
    assert "Traceback" not in taken.stderr
    for bad in ("proc_x", "cafe", "a b", "-x", "x" * 65, ""):
        out = _cli(home, "run", "--bg", f"--name={bad}", "--", "true")
        assert out.returncode == 2, (bad, out.stderr)
        assert len(out.stderr.strip().splitlines()) == 1
    assert json.loads(_cli(home, "proc", "poll", "watcher", "--json").stdout)["id"] == s.id
    gate.touch()
    reg.wait(s.id, timeout=30)
    again = _cli(home, "run", "--bg", "--name", "watcher", "--", "true")
    assert again.returncode == 0
    assert reg.resolve_id("watcher") == again.stdout.strip()
    assert reg.get(s.id).name == "watcher"  # the ended one keeps showing its name
    with pytest.raises(ProcessLookupFailed):
        reg.resolve_id("nobody-has-this")


def test_restart_flags_are_checked(home):
    for args, words in ((("--restart", "always", "--", "true"), "--bg"),
                        (("--bg", "--backoff", "1..2", "--", "true"), "--restart"),
                        (("--bg", "--restart", "always", "--backoff", "5..1", "--", "true"), "--backoff"),
                        (("--bg", "--restart", "sometimes", "--", "true"), "sometimes")):
        out = _cli(home, "run", *args)
        assert out.returncode == 2 and words in out.stderr and "Traceback" not in out.stderr, (args, out.stderr)


def test_the_plain_wrapper_is_kept_without_a_policy(reg):
    s = reg.spawn(["true"])
    reg.wait(s.id, timeout=30)
    assert not (Path(s.dir) / "attempts").exists()
    assert os.path.exists(s.dir / "env.json")


# -- `proc restart` stopped between its steps: the next restart finishes it, never repeats it --

_RECORD = '"$HERMES_HOME/processes/$HERMES_PROCESS_ID/{name}"'


def _pid_in(record: str, field: str) -> str:
    """Shell: the number after ``"field": `` in one of the session's own JSON records."""
    return f"$(sed -n 's/.*\"{field}\": \\([0-9]*\\).*/\\1/p' {_RECORD.format(name=record)})"


def _restarts_of(reg, session_id: str) -> list:
    return [s for s in reg.list() if s.restarted_from == session_id]


def _restart_cut_short(home, reg, script: str, ready: Path, armed: Path):
    """Start ``script`` as a session, arm it once it is ``ready``, and run a `proc restart`
    of it that the script KILLs: (the old session, the restart's completed process)."""
    old = reg.spawn(["sh", "-c", script])
    wait_until(ready.exists, timeout=30, what="the old session to run")
    armed.touch()
    cut = _cli(home, "proc", "restart", old.id, "--grace", "30")
    assert cut.returncode == -9 and not armed.exists(), cut.stderr
    return old, cut


def test_a_restart_killed_after_it_stopped_the_old_session_is_finished_by_the_next(home, reg, tmp_path):
    # The old command, on the TERM of `proc restart`, KILLs that very restart (the killer's
    # pid is in the kill record, written before the TERM): the restart dies between its
    # stop and its start. One-shot: only while `armed` exists.
    armed, running = tmp_path / "armed", tmp_path / "running"
    script = (f"on_term() {{ if rm {armed} 2>/dev/null; then kill -KILL {_pid_in('killed.json', 'by_pid')}; fi; "
              f"exit 0; }}; trap on_term TERM; touch {running}; while :; do sleep 0.05; done")
    old, _cut = _restart_cut_short(home, reg, script, running, armed)
    assert not reg.get(old.id).running and _restarts_of(reg, old.id) == []  # stopped, nothing started
    running.unlink()

    again = _cli(home, "proc", "restart", old.id)
    assert again.returncode == 0, again.stderr
    [new] = _restarts_of(reg, old.id)
    assert again.stdout.strip() == new.id
    wait_until(running.exists, timeout=30, what="the restart's command to run")
    third = _cli(home, "proc", "restart", old.id)
    assert third.returncode == 1 and _restarts_of(reg, old.id) == [new]
    assert f"already restarted as {new.id} (running)" in third.stderr and "Traceback" not in third.stderr
    assert reg.kill(new.id, grace=30).ok


def test_a_restart_killed_after_it_started_the_new_session_is_not_repeated(home, reg, tmp_path):
    # The new command, as it starts, KILLs the `proc restart` that spawned it (its session's
    # spawner_pid): the restart dies after its start, before it said anything.
    armed, started = tmp_path / "armed", tmp_path / "started"
    script = (f"if rm {armed} 2>/dev/null; then kill -KILL {_pid_in('meta.json', 'spawner_pid')}; fi; "
              f"echo $HERMES_PROCESS_ID >>{started}; while :; do sleep 0.05; done")
    old = reg.spawn(["sh", "-c", script])
    wait_until(started.exists, timeout=30, what="the old session to run")
    armed.touch()
    # The restart waits after it opened the new session's gate, until the new command
    # KILLs it: a restart quicker than its command's first line finished before it (CI).
    cut = subprocess.run([sys.executable, "-c", _HELD_AFTER_THE_GATE, str(home.root), old.id],
                         capture_output=True, text=True, timeout=120)
    assert cut.returncode == -9 and not armed.exists(), cut.stderr
    [new] = _restarts_of(reg, old.id)
    assert new.running and not reg.get(old.id).running

    again = _cli(home, "proc", "restart", old.id)
    assert again.returncode == 1, again.stdout
    assert f"{old.id} was already restarted as {new.id} (running)" in again.stderr
    assert _restarts_of(reg, old.id) == [new] and [s.id for s in reg.list(include_finished=False)] == [new.id]
    assert reg.kill(new.id, grace=30).ok


# A `proc restart` that dies with KILL right after it recorded the new session, before it
# opened that session's gate (the one step faked: the gate's opening is where it dies).
_HELD_AFTER_THE_GATE = """
import sys, time
from pathlib import Path
from engine.config import Settings
from engine.home import HomeLayout
from engine.processes import ProcessRegistry, start
real = start.open_gate
def held(popen):
    real(popen)
    while True:
        time.sleep(0.05)
start.open_gate = held
ProcessRegistry(HomeLayout(Path(sys.argv[1])), Settings()).restart(sys.argv[2], grace=30)
"""


_DIES_AT_THE_GATE = """
import os, sys
from pathlib import Path
from engine.config import Settings
from engine.home import HomeLayout
from engine.processes import ProcessRegistry, start
start.open_gate = lambda _popen: os.kill(os.getpid(), 9)
ProcessRegistry(HomeLayout(Path(sys.argv[1])), Settings()).restart(sys.argv[2], grace=30)
"""


def test_a_restart_killed_between_the_new_record_and_its_gate_is_finished_by_the_next(home, reg, tmp_path):
    import sys

    runs = tmp_path / "runs"
    old = reg.spawn(["sh", "-c", f"echo $HERMES_PROCESS_ID >>{runs}; while :; do sleep 0.05; done"])
    wait_until(runs.exists, timeout=30, what="the old session to run")
    cut = subprocess.run([sys.executable, "-c", _DIES_AT_THE_GATE, str(home.root), old.id],
                         capture_output=True, text=True, timeout=120)
    assert cut.returncode == -9, cut.stderr
    [gated] = _restarts_of(reg, old.id)  # recorded, its gate never opened
    # The wrapper leaves its proof, then exits: until it has, the session still runs (a
    # wait on the file alone read it running once, under a loaded -n 2).
    wait_until(lambda: reg.get(gated.id).never_started, timeout=30, what="the cut session ended, never started")
    assert (gated.dir / "not_started").exists()
    assert not reg.get(old.id).running
    cut_short = reg.get(gated.id)
    assert cut_short.status_text() == "never started"  # not "lost"
    listed = json.loads(_cli(home, "ps", "--all", "--json").stdout)
    assert [row["never_started"] for row in listed if row["id"] == gated.id] == [True]

    again = _cli(home, "proc", "restart", old.id)
    assert again.returncode == 0, again.stderr
    new = reg.get(again.stdout.strip())
    assert new.id != gated.id and new.restarted_from == old.id
    wait_until(lambda: runs.read_text().split() == [old.id, new.id], timeout=30, what="the restart's command to run")
    assert reg.kill(new.id, grace=30).ok


def test_a_restart_session_cut_short_at_its_gate_says_it_never_ran(reg, tmp_path):
    # The restarting wrapper, like the plain one, leaves proof that its command never ran
    # when its gate is never opened; `proc restart` then does not count it as a successor.
    from engine.processes.restart import RESTART_SCRIPT

    folder = tmp_path / "s"
    folder.mkdir()
    ran = tmp_path / "ran"
    wrapper = subprocess.run(["/bin/sh", "-c", RESTART_SCRIPT, str(folder / "exit"), "always", "1", "0", "0",
                              str(folder), "100", "touch", str(ran)], input="", text=True, timeout=60)
    assert wrapper.returncode == 125 and (folder / "not_started").exists() and not ran.exists()
