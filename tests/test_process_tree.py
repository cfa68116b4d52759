"""Issue 34 case 1, the processes side: a stop of a session stops its whole tree. The
family: every process a session starts that leaves the wrapper's process group, by GNU
``timeout`` (a new group), ``os.setpgid``, ``setsid`` (a new session), ``set -m`` (job
control: a group per job) or a double fork (re-parented to init); and every way to stop
a session (``proc kill``, the registry's kill that the pane's ``k`` and ``proc restart``
use). Before, a stop signalled the wrapper's group only: ``proc kill`` said ``killed``
while ``timeout`` and ``sleep`` lived on.

Real sessions and real signals; the test finds a session's processes on its own, by the
``HERMES_PROCESS_ID`` in their environment."""

from __future__ import annotations

import os
import signal
import sys

import pytest

from engine import identity
from engine.processes import tree
from tests.support import wait_until
from tests.support.cli import run_cli
from tests.support.trees import kill_all_of_home, of_session

LEAVERS = {
    "timeout": ("exec timeout 300 sleep 100", 2),
    "setpgid": ("exec python3 -c 'import os; os.setpgid(0,0); os.execvp(\"sleep\",[\"sleep\",\"100\"])'", 2),
    "setsid": ("setsid sleep 100", 2),
    # dash (/bin/sh here) turns job control off without a terminal; bash keeps it.
    "set -m": ("exec bash -c 'set -m; sleep 100 & wait'", 2),
    "double fork": ("(setsid sleep 100 &); sleep 100", 3),
}


@pytest.fixture
def clean(home):
    yield
    kill_all_of_home(home)


def _running_with_sleep(session_id: str, count: int) -> dict[int, str]:
    """The session's processes once ``count`` of them run and one is ``sleep``."""
    def ready():
        found = of_session(session_id)
        return found if len(found) >= count and "sleep" in found.values() else None

    return wait_until(ready, what=lambda: f"{session_id}'s processes: {of_session(session_id)}")


def _outside_the_group(s, found: dict[int, str]) -> list[int]:
    return [pid for pid in found if identity.read_stat(pid) and identity.read_stat(pid).pgrp != s.pid]


@pytest.mark.parametrize("how", list(LEAVERS))
def test_proc_kill_stops_a_session_whose_command_left_its_group(reg, home, clean, how):
    """``proc kill`` says ``killed`` only when nothing of the session is left, whatever
    group or session its command moved to."""
    command, count = LEAVERS[how]
    s = reg.spawn(command)
    found = _running_with_sleep(s.id, count)
    # The case: something left the wrapper's group (job control moves a job just after its fork).
    wait_until(lambda: _outside_the_group(s, of_session(s.id)), what=lambda: f"one outside: {of_session(s.id)}")
    fps = {pid: identity.fingerprint(pid) for pid in found}
    r = run_cli("--home", str(home.root), "proc", "kill", s.id, "--grace", "5")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(f"{s.id} killed"), r.stdout
    assert not [pid for pid, fp in fps.items() if identity.is_alive(pid, fp)], of_session(s.id)
    assert of_session(s.id) == {}
    assert reg.get(s.id).status == "killed"


def test_the_registry_kill_reports_what_it_reached_outside_the_group(reg, clean):
    """The kill the pane's ``k`` and ``proc restart`` use: one line says what it stopped
    outside the wrapper's group."""
    s = reg.spawn(LEAVERS["timeout"][0])
    _running_with_sleep(s.id, 2)
    report = reg.kill(s.id, grace=5)
    assert report.outcome == "killed" and report.ok
    assert "outside its group" in report.detail and "timeout" in report.detail
    assert of_session(s.id) == {}


def test_proc_kill_of_an_ended_session_stops_what_it_left_running(reg, home, clean, tmp_path):
    """A command that double-forked and exited 0: the session reads ``exit 0`` while its
    child runs on outside its group and its parent chain. ``proc kill`` stops that child
    (``leftovers_killed``) and leaves the session's own exit as it was."""
    s = reg.spawn("(setsid sleep 100 &); exit 0")
    wait_until(lambda: reg.get(s.id).finished and reg.get(s.id).exit_code == 0, what="exit 0")
    left = wait_until(lambda: of_session(s.id), what="the double-forked sleep")
    r = run_cli("--home", str(home.root), "proc", "kill", s.id, "--json")
    assert r.returncode == 0, r.stderr
    import json

    doc = json.loads(r.stdout)
    assert doc["outcome"] == "leftovers_killed", doc
    assert "sleep" in doc["detail"] and doc["status"] == "exited"
    assert [p for p, _sig in ((x["pid"], x["signal"]) for x in doc["signals"])] == sorted(left)
    assert of_session(s.id) == {}
    again = run_cli("--home", str(home.root), "proc", "kill", s.id)
    assert again.returncode == 0 and "already_finished" in again.stdout


def test_a_session_started_inside_another_is_not_part_of_its_tree(reg, home, clean):
    """The boundary: a session that the command started (``hermes-tui run --bg``) is its
    own, with its own id in its environment; stopping the outer one leaves it running,
    and so does a stranger born meanwhile in no session."""
    cli = f"{sys.executable} -m hermes_tui --home {home.root} run --bg -- sleep 100"
    outer = reg.spawn(f"{cli} > inner.id; sleep 100", cwd=str(home.root))
    inner_id = wait_until(lambda: (home.root / "inner.id").read_text().strip() if (home.root / "inner.id").exists()
                          else None, what="the inner session's id")
    inner = reg.get(inner_id)
    stranger = os.spawnvp(os.P_NOWAIT, "sleep", ["sleep", "100"])
    try:
        _running_with_sleep(outer.id, 2)
        report = reg.kill(outer.id, grace=5)
        assert report.outcome == "killed"
        assert of_session(outer.id) == {}
        assert identity.is_alive(inner.pid, inner.fingerprint) and of_session(inner_id)
        assert identity.read_stat(stranger) is not None
    finally:
        os.kill(stranger, signal.SIGKILL)
        os.waitpid(stranger, 0)
        reg.kill(inner_id, grace=1)


def test_what_outlives_sigkill_is_named_and_the_stop_is_not_done(reg, clean, monkeypatch):
    """A stop is done only when nothing is left: a member the kernel will not let us
    signal (another user's process: faked, the tests run as one user) stays, the kill
    says ``survivors`` with one line naming it, and the session stays running."""
    s = reg.spawn(LEAVERS["setsid"][0])
    found = _running_with_sleep(s.id, 2)
    sleep_pid = next(pid for pid, name in found.items() if name == "sleep")
    real = identity.send_signal

    def refuse_sleep(pid, fp, sig, **kw):
        if pid == sleep_pid:
            return identity.SignalResult(pid, identity.signal_name(sig), identity.SignalOutcome.ERROR,
                                         "Operation not permitted")
        return real(pid, fp, sig, **kw)

    monkeypatch.setattr(identity, "send_signal", refuse_sleep)
    monkeypatch.setattr(tree, "KILL_WAIT_SECONDS", 0.2)
    report = reg.kill(s.id, grace=0.5)
    assert report.outcome == "survivors" and not report.ok
    assert report.survivors == (sleep_pid,)
    assert f"1 process still alive: {sleep_pid} (sleep)" in report.detail
