"""The real ``hermes-tui`` command line, run the way a user runs it."""

from __future__ import annotations

import os
import subprocess
import sys


def run_cli(*args: str, env: dict[str, str] | None = None, timeout: float = 60, cwd=None,
            input: str | None = None) -> subprocess.CompletedProcess:
    """Run ``python -m hermes_tui ARGS`` in a subprocess, without the caller's
    ``HERMES_HOME`` (each test names its own home)."""
    full_env = dict(os.environ)
    full_env.pop("HERMES_HOME", None)
    if env:
        full_env.update(env)
    return subprocess.run(
        [sys.executable, "-m", "hermes_tui", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=full_env,
        cwd=cwd,
        input=input,
        stdin=None if input is not None else subprocess.DEVNULL,
    )


def run_on_pty(*args: str, env: dict[str, str] | None = None, prompt: bytes | None = None, answer: bytes = b"",
               at_prompt=None, timeout: float = 60) -> tuple[int, str]:
    """Run ``python -m hermes_tui ARGS`` with stdin, stdout and stderr on a real
    pseudo-terminal; when ``prompt`` shows, ``at_prompt()`` runs (what a person could do
    while reading it) and ``answer`` is typed. Returns (exit code, everything shown)."""
    import pty
    import select
    import time
    from pathlib import Path

    repo = Path(__file__).resolve().parents[2]
    master, slave = pty.openpty()
    full_env = {**os.environ, "PYTHONPATH": str(repo)}
    full_env.pop("HERMES_HOME", None)
    full_env.update(env or {})
    proc = subprocess.Popen([sys.executable, "-m", "hermes_tui", *args],
                            stdin=slave, stdout=slave, stderr=slave, env=full_env, close_fds=True)
    os.close(slave)
    out = b""
    deadline = time.monotonic() + timeout
    answered = prompt is None
    while time.monotonic() < deadline:
        r, _, _ = select.select([master], [], [], 0.2)
        if r:
            try:
                chunk = os.read(master, 65536)
            except OSError:
                break
            if not chunk:
                break
            out += chunk
            if not answered and prompt in out:
                if at_prompt is not None:
                    at_prompt()
                os.write(master, answer)
                answered = True
        elif proc.poll() is not None:
            break
    proc.wait(timeout=30)
    os.close(master)
    return proc.returncode, out.decode("utf-8", "replace")
