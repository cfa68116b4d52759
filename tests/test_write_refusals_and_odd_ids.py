"""Internal errors of the process commands (issue 35.5): a home the file system will not
let us write (read-only, full) and an id no session can have are one line each, with
the right exit code, never ``internal error: OSError``. Real mounts (a read-only bind
mount, a small full tmpfs: the tests run where the suite is root, as in CI, and say why
when skipped), real sessions."""

from __future__ import annotations

import json

import pytest

from engine.processes import ProcessLookupFailed
from tests.support import wait_until
from tests.support.cli import run_cli
from tests.support.disk import fill, read_only, tiny_tmpfs

ACTIONS = ("kill", "log", "poll", "wait", "restart")


def _one_line(out, code: int) -> str:
    assert out.returncode == code, (out.returncode, out.stdout, out.stderr)
    err = out.stderr.strip()
    assert len(err.splitlines()) == 1 and "internal error" not in err and "Traceback" not in err, err
    return err


def test_run_and_restart_on_a_read_only_home_are_one_line(home, reg):
    """Write refusals: ``run --bg`` and ``proc restart`` on a read-only home printed
    ``internal error: OSError: [Errno 30]``. Nothing runs, nothing changes."""
    done = reg.spawn(["true"])
    reg.wait(done.id, timeout=60)
    env = {"HERMES_HOME": str(home.root)}
    before = sorted(p.name for p in home.processes_dir.iterdir())
    with read_only(home.root):
        err = _one_line(run_cli("run", "--bg", "--", "true", env=env), 1)
        assert "Read-only file system" in err and "did not run" in err, err
        err = _one_line(run_cli("proc", "restart", done.id, env=env), 1)
        assert "Read-only file system" in err and "nothing was stopped or started" in err, err
        assert run_cli("proc", "poll", done.id, env=env).returncode == 0  # a read needs no write
    assert sorted(p.name for p in home.processes_dir.iterdir()) == before


def test_kill_and_run_on_a_full_home_are_one_line_and_nothing_is_signalled(tmp_path):
    """Write refusals: a kill whose record cannot be written is not sent (a kill without
    its record would read as a crash); ``run --bg`` says why it did not start."""
    from engine.config import Settings
    from engine.home import HomeLayout
    from engine.processes import ProcessRegistry

    with tiny_tmpfs(tmp_path / "disk", "1m") as disk:
        home = HomeLayout(disk / "h").ensure()
        reg = ProcessRegistry(home, Settings())
        s = reg.spawn(["sleep", "600"])
        try:
            env = {"HERMES_HOME": str(home.root)}
            fill(disk / "filler")
            err = _one_line(run_cli("proc", "kill", s.id, "--grace", "30", env=env), 1)
            assert "not signalled" in err and "No space left on device" in err, err
            assert reg.get(s.id).running
            err = _one_line(run_cli("run", "--bg", "--", "true", env=env), 1)
            assert "did not run" in err, err
            (disk / "filler").unlink()
        finally:
            reg.kill(s.id, grace=5)
        assert reg.get(s.id).status == "killed"


@pytest.mark.parametrize("action", ACTIONS)
def test_an_id_no_session_can_have_is_one_line_exit_2(home, action):
    """Odd ids: 300 characters reached the file system (``internal error: … File name too
    long``); a space, a slash or a control character is no id either."""
    env = {"HERMES_HOME": str(home.root)}
    err = _one_line(run_cli("proc", action, "a" * 300, env=env), 2)
    assert "300 characters" in err and "at most 128" in err, err
    for odd in ("a b", "x/y", "tab\there", "\x1b[2Jcafe", "..", "proc_12ab;rm"):
        err = _one_line(run_cli("proc", action, odd, env=env), 2)
        assert "is not an id, prefix or name" in err and "\x1b" not in err, (odd, err)


def test_the_engine_refuses_an_odd_id_as_a_failed_lookup(home, reg):
    s = reg.spawn(["true"], name="web.api-1")
    reg.wait(s.id, timeout=60)
    for odd in ("a" * 300, "proc_" + "a" * 300, "x/y"):
        with pytest.raises(ProcessLookupFailed):
            reg.get(odd)
    assert reg.get("web.api-1").id == s.id  # names, ids and prefixes still resolve
    assert reg.get(s.id[:9]).id == s.id
    row = json.loads(run_cli("proc", "poll", "web.api-1", "--json", env={"HERMES_HOME": str(home.root)}).stdout)
    assert row["id"] == s.id
    wait_until(lambda: reg.get(s.id).finished, timeout=30, what="the session to end")
