"""The demo through the real CLI on a real pseudo-terminal: it builds its home, shows the
app, and a closed terminal (SIGHUP) still stops the demo's processes and removes the home."""

from __future__ import annotations

import os
import pty
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from engine.config import load_config
from engine.home import HomeLayout
from engine.identity import is_alive
from engine.processes import ProcessRegistry
from tests.conftest import REPO


def test_a_hangup_still_stops_the_demo_and_removes_its_home(tmp_path):
    master, slave = pty.openpty()
    env = {**os.environ, "TERM": "xterm-256color", "COLUMNS": "160", "LINES": "48"}
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
        while b"demo home at " not in screen and time.monotonic() < deadline:
            time.sleep(0.05)
        line = bytes(screen).split(b"demo home at ", 1)[1].split(b"\n", 1)[0].decode().strip()
        home = HomeLayout(Path(line))
        while b"Board" not in screen and time.monotonic() < deadline:
            time.sleep(0.1)
        assert b"Board" in screen and b"Processes" in screen
        running = [s for s in ProcessRegistry(home, load_config(home.config_file)).list() if s.running]
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
