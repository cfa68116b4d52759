"""The processes CLI through the real ``hermes-tui`` command: run (foreground, --bg, Ctrl+Z,
Ctrl+C), ps, proc poll|log|wait|kill, and sessions that outlive the CLI."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys

import pytest

from engine.config import Settings
from engine.home import HomeLayout
from engine.processes import ProcessRegistry
from tests.conftest import run_cli
from tests.support import wait_until
from tests.support.commands import count_to_400


@pytest.fixture
def cli(home):
    """Run the CLI on the test home; kill every session left running afterwards."""

    def call(*args, **kw):
        return run_cli("--home", str(home.root), *args, **kw)

    yield call
    reg = ProcessRegistry(home, Settings())
    for s in reg.list(include_finished=False):
        reg.kill(s.id, grace=0.2)


def spawn_cli(home: HomeLayout, *args: str) -> subprocess.Popen:
    env = dict(os.environ)
    env.pop("HERMES_HOME", None)
    return subprocess.Popen(
        [sys.executable, "-m", "hermes_tui", "--home", str(home.root), *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True, env=env,
    )


def test_foreground_run_streams_and_exits_with_the_code(cli):
    r = cli("run", "--", "sh", "-c", "echo one; echo two >&2; exit 7")
    assert r.returncode == 7
    assert r.stdout == "one\ntwo\n"


def test_foreground_run_of_a_shell_string_and_a_signal_death(cli):
    r = cli("run", "--", "echo $((6*7)) | cat")
    assert r.returncode == 0 and r.stdout == "42\n"
    r = cli("run", "--", "kill -TERM $$")
    assert r.returncode == 143


def test_bg_prints_the_id_and_json(cli):
    r = cli("run", "--bg", "--", "true")
    assert r.returncode == 0 and re.fullmatch(r"proc_[0-9a-f]{12}\n", r.stdout)
    r = cli("run", "--bg", "--json", "--", "sleep", "30")
    data = json.loads(r.stdout)
    assert set(data) == {"id", "pid"} and data["pid"] > 0


def test_background_survives_the_cli_and_a_second_cli_follows_it(cli, home, tmp_path):
    # Paced by a gate file, not a sleep: the command runs until the test lets it finish,
    # however slowly the CLIs below start on a loaded machine.
    gate = tmp_path / "gate"
    r = cli("run", "--bg", "--json", "--", "sh", "-c",
            'echo started; while [ ! -e "$1" ]; do sleep 0.02; done; echo finished; exit 3', "sh", str(gate))
    sid = json.loads(r.stdout)["id"]  # the CLI that started it has exited
    ps = json.loads(cli("ps", "--json").stdout)
    row = next(p for p in ps if p["id"] == sid)
    assert row["status"] == "running"
    for field in ("id", "pid", "command", "cwd", "status", "exit_code", "signal", "started_at", "ended_at", "owner"):
        assert field in row
    wait_until(lambda: "started" in cli("proc", "log", sid).stdout, what="its first line logged")
    gate.touch()
    w = cli("proc", "wait", sid[:9], "--timeout", "20", "--json")
    assert w.returncode == 0
    assert json.loads(w.stdout)["exit_code"] == 3
    poll = json.loads(cli("proc", "poll", sid, "--json").stdout)
    assert poll["status"] == "exited" and poll["exit_code"] == 3 and "finished" in poll["output_preview"]
    assert sid not in [p["id"] for p in json.loads(cli("ps", "--json").stdout)]
    assert sid in [p["id"] for p in json.loads(cli("ps", "--all", "--json").stdout)]


def test_wait_timeout_exits_1_saying_still_running(cli):
    sid = cli("run", "--bg", "--", "sleep", "30").stdout.strip()
    r = cli("proc", "wait", sid, "--timeout", "0.2")
    assert r.returncode == 1
    assert "still running" in r.stderr


def test_kill_json_and_text(cli):
    sid = cli("run", "--bg", "--", "sleep", "30").stdout.strip()
    r = cli("proc", "kill", sid, "--json")
    data = json.loads(r.stdout)
    assert r.returncode == 0
    assert data["id"] == sid and data["status"] == "killed"
    assert data["signals"] and data["signals"][0]["signal"] == "SIGTERM"
    assert data["survivors"] == []
    again = cli("proc", "kill", sid)
    assert again.returncode == 0 and "already_finished" in again.stdout


def test_log_tail_json_and_redaction(cli, home):
    sid = cli("run", "--bg", "--", "sh", "-c",
              "for i in 1 2 3 4 5; do echo line$i; done; echo 'password=hunter22'").stdout.strip()
    cli("proc", "wait", sid, "--timeout", "10")
    data = json.loads(cli("proc", "log", sid, "--tail", "2", "--json").stdout)
    assert data["id"] == sid
    assert data["output"].splitlines()[0] == "line5"
    assert "hunter22" not in data["output"]
    assert data["total_bytes"] == len("line1\nline2\nline3\nline4\nline5\npassword=hunter22\n")
    assert "hunter22" in cli("proc", "log", sid, "--raw").stdout
    assert "hunter22" not in cli("proc", "poll", sid).stdout
    # the file on disk keeps the raw bytes
    assert b"hunter22" in (home.processes_dir / sid / "output.log").read_bytes()


def test_bad_ids_and_usage_are_one_line_without_traceback(cli):
    for args, code in (
        (("proc", "poll", "nope"), 1),
        (("proc", "poll", "proc_ffffffff"), 1),
        (("proc", "log", "4da"), 1),
        (("run", "--notify", "--", "true"), 2),
        (("run",), 2),
        (("run", "--cwd", "/does/not/exist", "--", "true"), 1),
        (("proc", "wait", "x", "--timeout", "-1"), 2),
    ):
        r = cli(*args)
        assert r.returncode == code, (args, r.stderr)
        assert "Traceback" not in r.stderr
        assert r.stderr.strip(), args


def _read_until(proc: subprocess.Popen, wanted: str) -> list[str]:
    lines = []
    while True:
        line = proc.stdout.readline()
        assert line, f"output ended before {wanted!r}: {lines[-3:]}"
        lines.append(line)
        if line.strip() == wanted:
            return lines


@pytest.mark.slow  # heavy: real concurrent processes
def test_ctrl_z_yields_without_signalling_and_no_line_is_lost_or_repeated(cli, home, tmp_path):
    marker, half, rest = tmp_path / "signals", tmp_path / "half", tmp_path / "rest"
    traps = " ".join(f"trap 'echo {s} >> {marker}' {s};" for s in ("HUP", "INT", "TERM", "TSTP", "CONT", "USR1"))
    proc = spawn_cli(home, "run", "--", "sh", "-c", traps + " " + count_to_400(half, rest))
    try:
        shown = _read_until(proc, "200")
        half.touch()  # lines come while it moves to the background; it stops again at 300
        proc.send_signal(signal.SIGTSTP)
        out, err = proc.communicate(timeout=20)
        rest.touch()
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0
    m = re.search(r"moved to background as (proc_[0-9a-f]{12})", err)
    assert m, err
    sid = m.group(1)
    shown += out.splitlines(keepends=True)
    numbers = [int(x) for x in "".join(shown).split()]
    assert numbers == list(range(1, len(numbers) + 1))  # a prefix, nothing doubled
    w = cli("proc", "wait", sid, "--timeout", "30", "--json")
    assert json.loads(w.stdout)["exit_code"] == 0
    log = json.loads(cli("proc", "log", sid, "--json").stdout)["output"]
    assert log.split() == [str(i) for i in range(1, 401)]
    assert not marker.exists()  # the command never received a signal
    s = ProcessRegistry(home, Settings()).get(sid)
    assert s.background and s.notify


def test_ctrl_c_terminates_the_command_and_exits_130(cli, home):
    proc = spawn_cli(home, "run", "--", "sh", "-c", "echo up; sleep 30")
    try:
        _read_until(proc, "up")
        proc.send_signal(signal.SIGINT)
        _out, err = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130
    assert "Traceback" not in err
    sessions = ProcessRegistry(home, Settings()).list()
    assert [s.status for s in sessions] == ["killed"]


def test_a_reader_that_goes_away_stops_the_command_like_sigpipe(cli, home, tmp_path):
    # The command writes until it is stopped (its gate never opens): it cannot end on its
    # own before the reader goes away. (It was `yes | head -n 50000000`: on a loaded
    # machine the 100 MB were all written before the CLI's next write, the command had
    # exited by itself and the stop rightly said `exited`; see the test below.)
    gate = tmp_path / "never"
    proc = spawn_cli(home, "run", "--", "sh", "-c", f"while [ ! -e '{gate}' ]; do echo y; sleep 0.01; done")
    try:
        assert proc.stdout.readline() == "y\n"
        proc.stdout.close()  # like `| head -1`
        proc.wait(timeout=60)
        err = proc.stderr.read()
    finally:
        gate.touch()
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 141
    assert "reader went away" in err and "Traceback" not in err
    assert [s.status for s in ProcessRegistry(home, Settings()).list()] == ["killed"]


def test_a_reader_that_goes_away_after_the_command_ended_says_it_exited(cli, home):
    """A loaded machine, made certain: the CLI is stopped (SIGSTOP) until its command has
    ended on its own, then its reader goes away. Nothing is killed, and it says so."""
    proc = spawn_cli(home, "run", "--", "sh", "-c", "for i in $(seq 1 200000); do echo y; done")
    reg = ProcessRegistry(home, Settings())
    try:
        assert proc.stdout.readline() == "y\n"
        proc.send_signal(signal.SIGSTOP)
        wait_until(lambda: reg.list() and reg.list()[0].finished, what="the command ended")
        proc.stdout.close()
        proc.send_signal(signal.SIGCONT)
        proc.wait(timeout=60)
        err = proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGCONT)
            proc.kill()
    assert proc.returncode == 141
    (s,) = reg.list()
    assert s.status == "exited" and s.exit_code == 0
    assert f"reader went away; {s.id} exited" in err and "Traceback" not in err


def test_hangup_of_the_terminal_moves_the_command_to_the_background(cli, home):
    proc = spawn_cli(home, "run", "--", "sh", "-c", "echo up; sleep 30")
    try:
        _read_until(proc, "up")
        proc.send_signal(signal.SIGHUP)
        proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0
    (s,) = ProcessRegistry(home, Settings()).list()
    assert s.status == "running" and s.background and s.notify


def test_ps_all_with_nothing(cli):
    assert cli("ps", "--all").stdout.strip() == "no process sessions"
    assert json.loads(cli("ps", "--json").stdout) == []


def test_log_tail_of_one_huge_line_reads_only_a_bounded_end(cli):
    """8 MB without a newline: --tail returns the last MiB and says the line was cut
    (before: the whole file was read and masked, minutes and hundreds of MB at 100 MB)."""
    sid = cli("run", "--bg", "--", "sh", "-c", "head -c 8000000 /dev/zero | tr '\\0' a").stdout.strip()
    assert cli("proc", "wait", sid, "--timeout", "60").returncode == 0
    data = json.loads(cli("proc", "log", sid, "--tail", "3", "--json").stdout)
    assert data["total_bytes"] == 8_000_000
    assert data["output"] == "a" * (1 << 20)
    assert data["cut_bytes"] == 8_000_000 - (1 << 20)
    text = cli("proc", "log", sid, "--tail", "3")
    assert text.stdout == "a" * (1 << 20)
    assert "longer one" in text.stderr


def test_ps_says_how_a_session_ended_in_the_pane_s_words(cli, home):
    """`ps` said `exited` and, in an EXIT column, `2`, where the pane says `exit 2`."""
    from widgets.processes.processes_pane import row_cells

    sid = cli("run", "--bg", "--", "sh", "-c", "exit 2").stdout.strip()
    assert cli("proc", "wait", sid, "--timeout", "60").returncode == 0  # it ended
    table = cli("ps", "--all").stdout.splitlines()
    assert table[0].split() == ["ID", "NAME", "STATUS", "PID", "RUNTIME", "OUTPUT", "OWNER", "COMMAND"]
    row = next(line for line in table if line.startswith(sid))
    s = ProcessRegistry(home, Settings()).get(sid)
    assert row.split()[1:4] == ["-", "exit", "2"]
    assert row_cells(s, None, 0.0, "")[1] == "exit 2"


def test_ps_cuts_a_long_command_with_a_sign_and_wide_shows_it_whole(cli, tmp_path):
    """Issue 37.2, the family "nothing is cut without a sign": ps cut COMMAND at 80
    characters with nothing to say so, losing a redirect's target."""
    target = tmp_path / ("a-long-folder-name-" * 4) / "the-redirect-target.log"
    target.parent.mkdir()
    command = f"sleep 30 > {target}"
    assert len(command) > 80
    sid = cli("run", "--bg", "--", "sh", "-c", command).stdout.strip()
    line = next(x for x in cli("ps").stdout.splitlines() if x.startswith(sid))
    assert line.endswith("…") and "the-redirect-target.log" not in line
    assert len(line.split("  ")[-1]) == 80
    wide = next(x for x in cli("ps", "--wide").stdout.splitlines() if x.startswith(sid))
    assert wide.endswith(f"{target}'") and "…" not in wide  # shown as a shell would quote it
