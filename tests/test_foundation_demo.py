"""The demo through the real CLI on a real pseudo-terminal: it builds its home, shows the
app, and a closed terminal (SIGHUP) still stops the demo's processes and removes the home."""

from __future__ import annotations

import fcntl
import os
import pty
import select
import shutil
import signal
import struct
import subprocess
import sys
import termios
import threading
import time
from pathlib import Path

from engine.config import load_config
from engine.home import HomeLayout
from engine.identity import is_alive
from engine.processes import ProcessRegistry
from tests.conftest import REPO


def _demo_root(tmp: Path, deadline: float) -> Path:
    """The demo home the app built under ``TMPDIR=tmp`` (the app no longer prints it)."""
    while time.monotonic() < deadline:
        found = sorted(tmp.glob("hermes-demo-*"))
        if found:
            return found[0]
        time.sleep(0.05)
    raise AssertionError("the demo built no home")


def _running_sessions(home: HomeLayout, deadline: float) -> list:
    """The demo's running sessions, once its home (filled after the first frame) has some."""
    while time.monotonic() < deadline:
        if home.config_file.exists():
            running = [s for s in ProcessRegistry(home, load_config(home.config_file)).list() if s.running]
            if running:
                return running
        time.sleep(0.1)
    return []


def test_a_hangup_still_stops_the_demo_and_removes_its_home(tmp_path):
    master, slave = pty.openpty()
    env = {**os.environ, "TERM": "xterm-256color", "COLUMNS": "160", "LINES": "48", "TMPDIR": str(tmp_path)}
    proc = subprocess.Popen([sys.executable, "-m", "hermes_tui", "--demo"], stdin=slave, stdout=slave,
                            stderr=slave, cwd=REPO, env=env, start_new_session=True)
    os.close(slave)
    screen = bytearray()

    def drain():
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:
                return
            if not chunk:
                return
            screen.extend(chunk)

    threading.Thread(target=drain, daemon=True).start()
    try:
        deadline = time.monotonic() + 60
        home = HomeLayout(_demo_root(tmp_path, deadline))
        while b"Board" not in screen and time.monotonic() < deadline:
            time.sleep(0.1)
        assert b"Board" in screen and b"Processes" in screen
        # The app is drawn first; the home fills in behind it (issue 12).
        running = _running_sessions(home, deadline)
        assert running, "the demo starts real background processes"
        proc.send_signal(signal.SIGHUP)
        assert proc.wait(timeout=30) is not None
        deadline = time.monotonic() + 10
        while home.root.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not home.root.exists()
        deadline = time.monotonic() + 10
        while any(is_alive(s.pid, s.fingerprint) for s in running) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not any(is_alive(s.pid, s.fingerprint) for s in running)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        os.close(master)


def _stop_demo_sessions(tmp: Path) -> None:
    """If the app under test failed to clean up, do it here: no test leaves processes."""
    for root in tmp.glob("hermes-demo-*"):
        home = HomeLayout(root)
        registry = ProcessRegistry(home, load_config(home.config_file))
        for session in registry.list(include_finished=False):
            registry.kill(session.id, grace=0.5)
        shutil.rmtree(root, ignore_errors=True)


def _read_for(master: int, screen: bytearray, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if select.select([master], [], [], 0.1)[0]:
            try:
                screen.extend(os.read(master, 65536))
            except OSError:
                return


def _start_demo(tmp: Path) -> tuple[subprocess.Popen, int]:
    """``hermes-tui --demo`` on a 160x48 pseudo-terminal, building its home under ``tmp``:
    (the app's process, the terminal's master end)."""
    master, slave = pty.openpty()
    fcntl.ioctl(master, termios.TIOCSWINSZ, struct.pack("HHHH", 48, 160, 0, 0))
    env = {**os.environ, "TERM": "xterm-256color", "TMPDIR": str(tmp)}
    proc = subprocess.Popen([sys.executable, "-m", "hermes_tui", "--demo"], stdin=slave, stdout=slave,
                            stderr=slave, cwd=REPO, env=env, start_new_session=True)
    os.close(slave)
    return proc, master


def test_a_hangup_after_the_terminal_is_gone_still_cleans_up(tmp_path):
    """The terminal really closes (the pty's master end is gone) while a dialog is open,
    then SIGHUP arrives: the UI can no longer finish shutting down (seen: hung for good),
    but the demo's processes still stop, its home goes and the app exits."""
    proc, master = _start_demo(tmp_path)
    screen = bytearray()
    try:
        deadline = time.monotonic() + 60
        while b"Board" not in screen and time.monotonic() < deadline:
            _read_for(master, screen, 0.2)
        home = HomeLayout(_demo_root(tmp_path, deadline))
        running = _running_sessions(home, deadline)  # the home fills in after the first frame
        assert running
        _read_for(master, screen, 3.0)
        # The terminal stops reading (a frozen or closing window) while the app keeps
        # drawing and a dialog opens; then it closes for good.
        for key in (b"2", b"k"):
            os.write(master, key)
            time.sleep(1.5)
        os.close(master)  # the terminal window closes...
        master = None
        proc.send_signal(signal.SIGHUP)  # ...and the kernel hangs up on the session
        assert proc.wait(timeout=30) is not None
        deadline = time.monotonic() + 10
        while home.root.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not home.root.exists()
        assert not any(is_alive(s.pid, s.fingerprint) for s in running)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        if master is not None:
            os.close(master)
        _stop_demo_sessions(tmp_path)


def test_quitting_the_demo_prints_no_path_of_the_removed_home(tmp_path):
    """Issue 12: after quitting, nothing on the terminal names the demo home just removed."""
    proc, master = _start_demo(tmp_path)
    screen = bytearray()
    try:
        deadline = time.monotonic() + 60
        root = _demo_root(tmp_path, deadline)
        while b"Board" not in screen and time.monotonic() < deadline:
            _read_for(master, screen, 0.2)
        os.write(master, b"q")
        while proc.poll() is None and time.monotonic() < deadline:
            _read_for(master, screen, 0.2)
        _read_for(master, screen, 0.3)
        assert proc.poll() is not None and not root.exists()
        before_app = bytes(screen).split(b"\x1b[?1049h", 1)[0]
        after_app = bytes(screen).rsplit(b"\x1b[?1049l", 1)[-1]
        assert root.name.encode() not in before_app + after_app
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        os.close(master)
        _stop_demo_sessions(tmp_path)
