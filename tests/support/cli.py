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
