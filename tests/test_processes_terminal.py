"""The terminal is the user's: on a tty the CLI shows control characters from outside
text as visible escapes; to a pipe, or with ``proc log --raw``, bytes stay as stored.

Every command here runs as a real subprocess whose stdout and stderr are a real pty."""

from __future__ import annotations

import fcntl
import os
import select
import signal
import struct
import subprocess
import sys
import termios
import time
import tty
from pathlib import Path

import pytest

from engine.config import Settings
from engine.processes import ProcessRegistry
from tests.conftest import REPO, run_cli
from tests.support import wait_until

# What a hostile process prints: an OSC 52 clipboard write, a screen clear, a title,
# a C1 CSI, a bell; the tab and newline stay.
PRINTF = r"printf 'a\033]52;c;aGk=\007b\033[2Jc\tz\302\233d\n'"
STORED = "a\x1b]52;c;aGk=\x07b\x1b[2Jc\tz\x9bd\n"
SHOWN = r"a\x1b]52;c;aGk=\x07b\x1b[2Jc" + "\tz" + r"\x9bd" + "\n"


def run_on_pty(home, *args: str, timeout: float = 60) -> tuple[int, str]:
    """Run the CLI with stdout and stderr on a fresh pty in raw mode (no \\n -> \\r\\n),
    and return its exit code and everything it wrote there."""
    master, slave = os.openpty()
    tty.setraw(slave)
    env = dict(os.environ)
    env.pop("HERMES_HOME", None)
    proc = subprocess.Popen([sys.executable, "-m", "hermes_tui", "--home", str(home.root), *args],
                            stdin=subprocess.DEVNULL, stdout=slave, stderr=slave, env=env)
    os.close(slave)
    chunks: list[bytes] = []
    try:
        while True:
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: every writer closed its end
                break
            if not data:
                break
            chunks.append(data)
        code = proc.wait(timeout=timeout)
    finally:
        os.close(master)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return code, b"".join(chunks).decode("utf-8", errors="replace")


def finished_session(home) -> str:
    sid = run_cli("--home", str(home.root), "run", "--bg", "--", PRINTF).stdout.strip()
    assert run_cli("--home", str(home.root), "proc", "wait", sid, "--timeout", "30").returncode == 0
    return sid


def test_proc_log_and_poll_on_a_tty_show_escapes_visibly(home):
    sid = finished_session(home)
    code, out = run_on_pty(home, "proc", "log", sid)
    assert code == 0
    assert out == SHOWN
    code, out = run_on_pty(home, "proc", "poll", sid)
    assert code == 0 and "\x1b" not in out and "\x07" not in out
    # poll drops colour and title sequences; what is left (a C1 CSI) is shown, not sent
    assert r"\x9bd" in out


def test_raw_log_on_a_tty_and_any_log_to_a_pipe_keep_the_bytes(home):
    sid = finished_session(home)
    code, out = run_on_pty(home, "proc", "log", sid, "--raw")
    assert code == 0 and out == STORED
    piped = run_cli("--home", str(home.root), "proc", "log", sid)
    assert piped.returncode == 0 and piped.stdout == STORED


def test_ps_and_kanban_list_escape_outside_text_on_a_tty(home):
    """Not one command at a time: the CLI's output stream escapes for every command."""
    root = str(home.root)
    sid = run_cli("--home", root, "run", "--bg", "--", "sh", "-c", "sleep 30 # \x1b]0;pwned\x07").stdout.strip()
    try:
        code, out = run_on_pty(home, "ps")
        assert code == 0 and sid in out
        assert "\x1b" not in out and r"\x1b]0;pwned\x07" in out
    finally:
        ProcessRegistry(home, Settings()).kill(sid, grace=0.2)
    created = run_cli("--home", root, "kanban", "create", "title \x1b[2J\x1b]52;c;aGk=\x07")
    assert created.returncode == 0, created.stderr
    code, out = run_on_pty(home, "kanban", "list")
    assert code == 0
    assert "\x1b" not in out and r"title \x1b[2J\x1b]52;c;aGk=\x07" in out


# -- the app never outlives its terminal ---------------------------------------------------


def _demo_processes(tmp: str) -> list[int]:
    """Live processes started for a demo home under ``tmp`` (their HERMES_HOME says so)."""
    marker = f"HERMES_HOME={tmp}/hermes-demo-".encode()
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/environ", "rb") as fh:
                    if any(v.startswith(marker) for v in fh.read().split(b"\0")):
                        found.append(int(name))
            except OSError:
                continue
    return [pid for pid in found if pid != os.getpid()]


def _read_until(master: int, screen: bytearray, needle: bytes, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while needle not in screen:
        assert time.monotonic() < deadline, f"{needle!r} never shown"
        if select.select([master], [], [], 0.1)[0]:
            screen.extend(os.read(master, 65536))


def _read_until_demo_home_is_being_built(master: int, screen: bytearray, tmp: Path, timeout: float = 60) -> None:
    """Drain the terminal until the demo has started building its home (the app no longer
    prints the home's path: it names it in its header)."""
    deadline = time.monotonic() + timeout
    while not any((root / "processes").is_dir() for root in tmp.glob("hermes-demo-*")):
        assert time.monotonic() < deadline, "the demo never started building its home"
        if select.select([master], [], [], 0.1)[0]:
            screen.extend(os.read(master, 65536))


@pytest.mark.parametrize("moment", ["at once", "start-up", "idle", "right after q"])
def test_the_app_exits_and_cleans_up_when_its_terminal_closes(tmp_path, moment):
    """The pty's master end closes (a tmux session killed, an ssh link dropped) and no
    SIGHUP reaches the app (it is not the terminal's session): the app notices the
    hang-up, exits, and its demo home and demo processes are gone. Before: it stayed,
    its input thread spinning on the dead terminal, its demo processes looping."""
    tmp = tmp_path / "t"
    tmp.mkdir()
    master, slave = os.openpty()
    fcntl.ioctl(master, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 140, 0, 0))
    env = {**os.environ, "TERM": "xterm-256color", "TMPDIR": str(tmp)}
    env.pop("HERMES_HOME", None)
    proc = subprocess.Popen([sys.executable, "-m", "hermes_tui", "--demo"], stdin=slave, stdout=slave,
                            stderr=slave, cwd=REPO, env=env, start_new_session=True)
    os.close(slave)
    screen = bytearray()
    try:
        if moment != "at once":  # "at once": while the demo home may still be being built
            _read_until_demo_home_is_being_built(master, screen, tmp)
        if moment not in ("at once", "start-up"):
            _read_until(master, screen, b"Processes")
        if moment == "right after q":
            os.write(master, b"q")
        os.close(master)
        master = None
        proc.wait(timeout=60)
        wait_until(lambda: not any(n.startswith("hermes-demo-") for n in os.listdir(tmp)), what="demo home removed")
        wait_until(lambda: not _demo_processes(str(tmp)), what="demo processes gone")
    finally:
        if master is not None:
            os.close(master)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for pid in _demo_processes(str(tmp)):  # only if the app failed to: ours to stop
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


# Bytes that are not UTF-8 (a lone continuation, an overlong lead, 0xff 0xfe), a secret,
# a screen clear: what a binary-ish command prints.
BINARY = r"printf '\377\376 caf\303\251 \200\201 password=hunter2hunter2 \033[2J end\n\300 last\n'"


def test_proc_log_to_a_pipe_or_a_file_is_byte_exact_for_binary_output(home, tmp_path):
    """Issue 35.9: the bytes of the output went through UTF-8 with replacement, so a pipe
    or a file got U+FFFD where the docs promise the stored bytes (masked, nothing else);
    a terminal still gets visible escapes."""
    root = str(home.root)
    sid = run_cli("--home", root, "run", "--bg", "--", BINARY).stdout.strip()
    assert run_cli("--home", root, "proc", "wait", sid, "--timeout", "30").returncode == 0
    stored = (home.processes_dir / sid / "output.log").read_bytes()
    assert b"\xff\xfe" in stored and b"\xc0 last" in stored
    expected = stored.replace(b"hunter2hunter2", b"***")
    env = {k: v for k, v in os.environ.items() if k != "HERMES_HOME"}
    argv = [sys.executable, "-m", "hermes_tui", "--home", root, "proc", "log", sid]
    piped = subprocess.run(argv, capture_output=True, env=env, timeout=60)
    assert piped.returncode == 0 and piped.stdout == expected, piped.stdout
    into = tmp_path / "log.bin"
    with open(into, "wb") as fh:
        assert subprocess.run(argv, stdout=fh, env=env, timeout=60).returncode == 0
    assert into.read_bytes() == expected
    code, out = run_on_pty(home, "proc", "log", sid)
    assert code == 0 and "\x1b" not in out and r"\x1b[2J" in out and "***" in out and "hunter2" not in out, out
    # each byte that is not UTF-8 is an escape of its own, never the raw byte nor U+FFFD
    assert "\ufffd" not in out and r"\xff\xfe café \x80\x81" in out and r"\xc0 last" in out, out
