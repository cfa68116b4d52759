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
from pathlib import Path

from engine.config import load_config
from engine.home import HomeLayout
from engine.identity import is_alive
from engine.processes import ProcessRegistry
from tests.conftest import REPO
from tests.support import wait_until


def _demo_root(tmp: Path) -> Path:
    """The demo home the app built under ``TMPDIR=tmp`` (the app no longer prints it)."""
    return wait_until(lambda: next(iter(sorted(tmp.glob("hermes-demo-*"))), None), what="the demo's home")


def _running_sessions(home: HomeLayout) -> list:
    """The demo's running sessions, once its home (filled after the first frame) has some."""
    def running() -> list:
        if not home.config_file.exists():
            return []
        return [s for s in ProcessRegistry(home, load_config(home.config_file)).list() if s.running]

    return wait_until(running, what="the demo's running processes")


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
        home = HomeLayout(_demo_root(tmp_path))
        wait_until(lambda: b"Board" in screen and b"Processes" in screen, what="the app drawn")
        # The app is drawn first; the home fills in behind it (issue 12).
        running = _running_sessions(home)
        assert running, "the demo starts real background processes"
        proc.send_signal(signal.SIGHUP)
        assert proc.wait(timeout=30) is not None
        wait_until(lambda: not home.root.exists(), what="the demo home removed")
        wait_until(lambda: not any(is_alive(s.pid, s.fingerprint) for s in running), what="its processes gone")
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


def _read_until(master: int, screen: bytearray, done) -> None:
    """Read what the app draws until ``done()`` holds, or the terminal's other end is gone."""
    def read_some() -> bool:
        if select.select([master], [], [], 0.1)[0]:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # the app and every holder of the terminal have gone
                return True
            if not chunk:
                return True
            screen.extend(chunk)
        return done()

    wait_until(read_some, what="the terminal showing what the test waits for")


def _unread_bytes(master: int) -> int:
    return struct.unpack("i", fcntl.ioctl(master, termios.FIONREAD, b"\0\0\0\0"))[0]


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
        _read_until(master, screen, lambda: b"Board" in screen)
        home = HomeLayout(_demo_root(tmp_path))
        running = _running_sessions(home)  # the home fills in after the first frame
        assert running
        # A dialog opens: the help (the kill question, tried first, depends on which row
        # is selected when the key comes, and a demo worker may just have finished:
        # no dialog, 2 full runs in 7)...
        os.write(master, b"?")
        _read_until(master, screen, lambda: b"app.quit" in screen)  # the keys, laid out in the dialog
        # ...then the terminal stops reading (a frozen or closing window) while the app
        # keeps drawing: a resize makes it draw the whole screen again, more than the
        # terminal's buffer holds, so its writes back up. Then the window closes for good.
        fcntl.ioctl(master, termios.TIOCSWINSZ, struct.pack("HHHH", 46, 150, 0, 0))
        wait_until(lambda: _unread_bytes(master) >= 4095, what="the app's drawing backed up in the terminal")
        os.close(master)  # the terminal window closes...
        master = None
        proc.send_signal(signal.SIGHUP)  # ...and the kernel hangs up on the session
        assert proc.wait(timeout=30) is not None
        wait_until(lambda: not home.root.exists(), what="the demo home removed")
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
        root = _demo_root(tmp_path)
        _read_until(master, screen, lambda: b"Board" in screen)
        os.write(master, b"q")
        _read_until(master, screen, lambda: False)  # all it writes, to the end of its terminal
        proc.wait(timeout=60)
        assert not root.exists()
        before_app = bytes(screen).split(b"\x1b[?1049h", 1)[0]
        after_app = bytes(screen).rsplit(b"\x1b[?1049l", 1)[-1]
        assert root.name.encode() not in before_app + after_app
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        os.close(master)
        _stop_demo_sessions(tmp_path)
