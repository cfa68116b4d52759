"""Every odd input is one line (issue 20): a clear error and the right exit code, never
an internal error, a traceback or a hang."""

from __future__ import annotations

import pytest

from tests.conftest import run_cli


def _one_line(out, code: int) -> str:
    assert out.returncode == code, (out.returncode, out.stdout, out.stderr)
    err = out.stderr.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err and "internal error" not in err, err
    return err


@pytest.mark.parametrize(("args", "words"), [
    ([b"a\xff\xfe"], "TITLE is not UTF-8 text (byte 0xff"),
    (["ok", "--body", b"\xc3"], "--body is not UTF-8 text (byte 0xc3"),
    (["ok", "--assignee", b"w\xff"], "--assignee is not UTF-8 text (byte 0xff"),
    ([""], "the TITLE is empty"),
    (["   "], "the TITLE is empty"),
])
def test_kanban_create_with_a_bad_argument_is_a_usage_error_and_creates_nothing(home, args, words):
    err = _one_line(run_cli("--home", str(home.root), "kanban", "create", *args), 2)
    assert words in err
    assert "No cards." in run_cli("--home", str(home.root), "kanban", "list").stdout


# -- a FIFO, socket or device where a file of the home belongs --------------------------

def _special(path, kind: str) -> None:
    """A real FIFO, a bound unix socket, or a character device (/dev/null's numbers;
    we run as root) at ``path``."""
    import os
    import socket
    import stat

    path.unlink(missing_ok=True)
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "socket":
        sock = socket.socket(socket.AF_UNIX)
        sock.bind(str(path))
        sock.close()  # the socket file stays
    else:
        os.mknod(path, stat.S_IFCHR | 0o600, os.makedev(1, 3))


KINDS = ["fifo", "socket", "device"]


@pytest.mark.parametrize("kind", KINDS)
def test_a_special_processes_json_is_one_warning_and_fails_closed(tmp_path, children, kind):
    import shutil

    from tests.support.scratch import make_entry
    from tests.test_hermes_home import FIXTURE
    from tests.test_hermes_home import hermes_home as _fixture  # noqa: F401  (the fixture's helpers below)

    root = tmp_path / "hermes"
    shutil.copytree(FIXTURE, root)
    with open(root / "config.yaml", "a") as fh:
        fh.write("\nscratch:\n  arrival_hours: 0\n")
    entry = make_entry(root / "cache" / "scratch", "hermes-work")
    proc = children(["sleep", "600"], cwd=entry)
    _special(root / "processes.json", kind)
    ps = run_cli("--home", str(root), "ps", timeout=60)
    assert ps.returncode == 0
    warning = _one_line(ps, 0)
    assert "processes.json cannot be read" in warning and "not a regular file" in warning
    dry = run_cli("--home", str(root), "prune", "--dry-run", timeout=60)
    assert dry.returncode == 0 and "Traceback" not in dry.stderr
    assert "hermes-work" in dry.stdout and "pid" not in dry.stdout.split("Staying:")[0]  # nobody signalled
    assert proc.poll() is None


@pytest.mark.parametrize("kind", KINDS)
def test_a_special_config_yaml_is_exit_2_in_one_line(home, kind):
    _special(home.config_file, kind)
    for argv in (["ps"], ["prune", "--dry-run"], ["kanban", "list"]):
        err = _one_line(run_cli("--home", str(home.root), *argv, timeout=60), 2)
        assert "config.yaml: cannot read: is a" in err and "not a regular file" in err


def test_a_fifo_prune_log_stops_the_pass_in_one_line_and_the_listing_reads_on(home):
    from engine.scratch.audit import LogTail
    from tests.support.scratch import make_entry

    home.config_file.write_text("scratch:\n  arrival_hours: 0\n")
    make_entry(home.scratch_dir, "idle")
    home.ensure_dir(home.logs_dir)
    _special(home.prune_log, "fifo")
    assert LogTail(home.prune_log).start() == []
    err = _one_line(run_cli("--home", str(home.root), "prune", "--yes", timeout=60), 1)
    assert "it is a FIFO" in err
    assert (home.scratch_dir / "idle").exists()


def test_a_fifo_stamp_starts_no_pass_and_does_not_wait(home):
    from engine.config import Settings
    from engine.scratch import schedule

    home.ensure_dir(home.scratch_dir)
    _special(home.scratch_dir / ".last_prune", "fifo")
    schedule._reset_for_tests()
    try:
        assert schedule.maybe_start_auto_prune(home, Settings()) is None
    finally:
        schedule.mark_started()


# -- signals -------------------------------------------------------------------------------

def test_sigterm_to_a_foreground_run_moves_the_command_to_the_background(home, tmp_path):
    """As the app does on SIGTERM: the command keeps running, recorded as a background
    session (never a running process nobody knows of), and it gets no signal itself."""
    import json
    import os
    import re
    import signal
    import subprocess
    import sys

    from engine.config import Settings
    from engine.processes import ProcessRegistry
    from tests.support.commands import until

    marker, gate = tmp_path / "signals", tmp_path / "gate"
    traps = " ".join(f"trap 'echo {s} >> {marker}' {s};" for s in ("HUP", "INT", "TERM"))
    env = {**os.environ, "HERMES_AUTO_PRUNE": "0"}
    env.pop("HERMES_HOME", None)
    proc = subprocess.Popen([sys.executable, "-m", "hermes_tui", "--home", str(home.root), "run", "--", "sh", "-c",
                             f"{traps} echo up; {until(gate)} echo done"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, start_new_session=True)
    try:
        assert proc.stdout.readline().strip() == "up"
        proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
        if proc.returncode != 128 + signal.SIGTERM:
            gate.touch()  # whatever went wrong, the command ends (it was left running, unrecorded)
    assert proc.returncode == 128 + signal.SIGTERM
    m = re.search(r"moved to background as (proc_[0-9a-f]{12}) \(pid \d+\) \(hermes-tui got SIGTERM\)", err)
    assert m, err
    s = ProcessRegistry(home, Settings()).get(m.group(1))
    assert s.background and s.status == "running"
    gate.touch()
    w = run_cli("--home", str(home.root), "proc", "wait", s.id, "--timeout", "30", "--json")
    assert json.loads(w.stdout)["exit_code"] == 0
    assert not marker.exists()  # the command itself was never signalled


def test_ctrl_c_during_prune_yes_stops_at_the_next_safe_point_and_says_what_was_done(home, tmp_path, children):
    """SIGINT arrives while the pass waits for a process it sent TERM to (paced by gate
    files): the pass finishes that step, takes no further one, records it, and the
    command prints what it did and exits 130; every entry is still there."""
    import os
    import signal
    import subprocess
    import sys

    from tests.support import wait_until
    from tests.support.scratch import make_entry

    home.config_file.write_text("scratch:\n  arrival_hours: 0\n  quarantine_hours: 0\n  kill_grace_seconds: 60\n")
    termed, gate = tmp_path / "termed", tmp_path / "gate"
    busy = make_entry(home.scratch_dir, "busy")
    others = [make_entry(home.scratch_dir, n) for n in ("idle-a", "idle-b")]
    # One long-lived process (no child started every few ms: a process that starts working
    # inside after the plan rightly keeps the entry, which made this test depend on speed).
    script = ("import os, signal, time\n"
              "def on_term(*_):\n"
              f"    open({str(termed)!r}, 'w').close()\n"
              f"    while not os.path.exists({str(gate)!r}):\n"
              "        time.sleep(0.01)\n"
              "    os._exit(0)\n"
              "signal.signal(signal.SIGTERM, on_term)\n"
              "while True:\n"
              "    signal.pause()\n")
    worker = children([sys.executable, "-c", script], cwd=busy)
    wait_until(lambda: os.readlink(f"/proc/{worker.pid}/cwd") == str(busy))
    env = {**os.environ, "HERMES_AUTO_PRUNE": "0"}
    env.pop("HERMES_HOME", None)
    pruner = subprocess.Popen([sys.executable, "-m", "hermes_tui", "--home", str(home.root), "prune", "--yes"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        wait_until(termed.exists, timeout=60, what="the pass signalling the worker")
        pruner.send_signal(signal.SIGINT)
        wait_until(lambda: "stopping the prune" in (pruner.stderr.readline() or ""), timeout=30)
        gate.touch()  # the worker exits: the pass's wait for it ends
        out, err = pruner.communicate(timeout=60)
    finally:
        gate.touch()
        if pruner.poll() is None:
            pruner.kill()
    assert pruner.returncode == 130, (out, err)
    assert "stopped on request" in out and f"SIGTERM pid {worker.pid}" in out and "Traceback" not in err
    assert busy.exists() and all(e.exists() for e in others)
    assert "pass stopped on request, before moving" in home.prune_log.read_text()


# -- another user's home, session and board (a real unprivileged user: nobody) ---------------

def _as_nobody(home_root, *argv: str):
    """``hermes-tui --home HOME ARGV`` run by the real user ``nobody`` (runuser), with the
    system's Python 3.11 on this worktree's code (the venv's interpreter lives under
    /root, which nobody may not enter)."""
    import os
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    if os.geteuid() != 0 or shutil.which("runuser") is None or not Path("/usr/bin/python3.11").exists():
        pytest.skip("needs root, runuser and /usr/bin/python3.11 to run as another user")
    import engine

    repo = Path(engine.__file__).resolve().parents[1]
    site = next(p for p in sys.path if p.endswith("site-packages") and ".venv" in p)
    return subprocess.run(["runuser", "-u", "nobody", "--", "env", f"PYTHONPATH={repo}:{site}", "HERMES_AUTO_PRUNE=0",
                           "/usr/bin/python3.11", "-m", "hermes_tui", "--home", str(home_root), *argv],
                          capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)


@pytest.fixture
def open_tmp():
    """A folder that the user nobody may enter (0755), right under /tmp: not under pytest's
    own temporary root, whose mode any other pytest run on the machine sets back to 0700
    when it starts (a second suite beside this one made nobody's reads fail mid-test)."""
    import shutil
    import tempfile
    from pathlib import Path

    path = Path(tempfile.mkdtemp(prefix="hermes-tui-test-", dir="/tmp"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_another_users_home_session_and_board_are_one_line_each_and_exit_1(open_tmp):
    import os

    from engine.config import Settings
    from engine.home import HomeLayout
    from engine.processes import ProcessRegistry

    home = HomeLayout(open_tmp / "home").ensure()
    home.config_file.write_text("scratch:\n  auto_prune: false\n")
    assert run_cli("--home", str(home.root), "kanban", "create", "root's card").returncode == 0
    s = ProcessRegistry(home, Settings()).spawn("sleep 300", cwd=home.root, owner="test")
    try:
        os.chmod(home.root, 0o700)
        err = _one_line(_as_nobody(home.root, "doctor"), 1)  # a home nobody cannot read
        assert "permission denied: " in err and "another user" in err
        for p in [home.root, *home.root.rglob("*")]:  # now readable, not writable, by others
            os.chmod(p, (os.stat(p).st_mode | 0o444 | (0o111 if p.is_dir() else 0)) & ~0o022)
        err = _one_line(_as_nobody(home.root, "proc", "kill", s.id), 1)
        assert "permission denied" in err
        assert ProcessRegistry(home, Settings()).get(s.id).status == "running"  # nothing was signalled
        err = _one_line(_as_nobody(home.root, "kanban", "list"), 1)  # a board in a folder nobody cannot write
        assert "board" in err
    finally:
        ProcessRegistry(home, Settings()).kill(s.id, grace=1.0)


def test_attention_watch_and_dismiss_on_another_users_home_exit_1_in_one_line_as_doctor_does(open_tmp):
    """The family: every command that reads config.yaml of a home this user may not read
    says so as doctor does (permission denied, exit 1), never "bad config" (exit 2)."""
    import os

    from engine.home import HomeLayout

    home = HomeLayout(open_tmp / "home").ensure()
    home.config_file.write_text("notify:\n  poll_seconds: 1\n")
    os.chmod(home.root, 0o700)  # another user's home, as ~/.hermes is
    doctor = _one_line(_as_nobody(home.root, "doctor"), 1)
    for argv in (["attention"], ["attention", "--json"], ["watch"], ["attention", "dismiss", "blocked:t_1:1"],
                 ["kanban", "list"]):
        err = _one_line(_as_nobody(home.root, *argv), 1)
        assert err == doctor, argv
    assert "permission denied: " in doctor and "config.yaml" in doctor


def test_a_read_only_board_of_ones_own_reads_and_refuses_a_write_in_one_line(open_tmp):
    import os

    mine = open_tmp / "mine"
    mine.mkdir(mode=0o777)
    os.chmod(mine, 0o777)
    assert _as_nobody(mine / "h", "kanban", "create", "my card").returncode == 0
    board = next((mine / "h").rglob("board.db"))
    os.chmod(board, 0o444)
    listed = _as_nobody(mine / "h", "kanban", "list")
    assert listed.returncode == 0 and "my card" in listed.stdout, listed.stderr
    err = _one_line(_as_nobody(mine / "h", "kanban", "create", "another"), 1)
    assert "cannot be used" in err or "read" in err


def test_kanban_list_on_a_full_disk_reads_and_a_write_is_one_line(tmp_path):
    """The home on a tiny tmpfs, filled up: ``list`` and ``show`` read the board (a read
    needs no write), ``create`` fails in one line that says the disk is full (it said
    "attempt to write a readonly database", issue 35.5); with space again all is as before."""
    import json

    from tests.support.disk import fill, tiny_tmpfs

    with tiny_tmpfs(tmp_path / "disk", "1m") as disk:
        h = str(disk / "h")
        made = [json.loads(run_cli("--home", h, "kanban", "create", f"card {i}", "--json").stdout)["id"]
                for i in range(3)]
        fill(disk / "filler")
        listed = run_cli("--home", h, "kanban", "list", "--json")
        assert listed.returncode == 0, listed.stderr
        assert sorted(t["id"] for t in json.loads(listed.stdout)["tasks"]) == sorted(made)
        assert run_cli("--home", h, "kanban", "show", made[0]).returncode == 0
        err = _one_line(run_cli("--home", h, "kanban", "create", "no room"), 1)
        assert "is full" in err and "nothing was changed" in err and "readonly" not in err, err
        (disk / "filler").unlink()
        assert run_cli("--home", h, "kanban", "create", "room again").returncode == 0
        assert len(json.loads(run_cli("--home", h, "kanban", "list", "--json").stdout)["tasks"]) == 4
