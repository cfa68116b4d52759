"""Homes built by the benchmarks themselves (issue 22): empty, the demo's, N running
process sessions, N scratch entries. Each builder returns (home root, clean-up).

- sessions: N real background sessions of ``sleep`` started through the registry, as
  ``hermes-tui run --bg`` starts them, handed over once the newest is past its first
  minute (a session's runtime shows seconds only then, so until then every row changes
  every second: not an idle table); the clean-up kills every one (verified by the
  registry) and removes the home.
- scratch: N entries of one small file each, 9 in 10 idle for three days (``os.utime``),
  1 in 10 written now.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

Built = tuple[Path, Callable[[], None]]
FIRST_MINUTE_SECONDS = 61.0


def _tmp(prefix: str) -> Path:
    return Path(tempfile.mkdtemp(prefix=f"hermes-bench-{prefix}-"))


def empty_home() -> Built:
    root = _tmp("empty")
    return root / "home", lambda: shutil.rmtree(root, ignore_errors=True)


def demo_home() -> Built:
    from hermes_tui.demo.home import build_demo_home, cleanup_demo_home

    home = build_demo_home()
    return home.root, lambda: cleanup_demo_home(home)


def sessions_home(n: int) -> Built:
    from engine.config import Settings
    from engine.home import HomeLayout
    from engine.processes import ProcessRegistry

    root = _tmp(f"sessions{n}")
    home = HomeLayout(root / "home").ensure()
    reg = ProcessRegistry(home, Settings())
    ids = [reg.spawn(["sleep", "3600"], owner="bench", cwd=home.root).id for _ in range(n)]
    time.sleep(FIRST_MINUTE_SECONDS)  # see the module doc: past the minute, a runtime shows minutes

    def clean_up() -> None:
        for session_id in ids:
            try:
                reg.kill(session_id, grace=1.0)
            except Exception:  # gone already
                pass
        shutil.rmtree(root, ignore_errors=True)

    return home.root, clean_up


def scratch_home(n: int) -> Built:
    root = _tmp(f"scratch{n}")
    scratch = root / "home" / "cache" / "scratch"
    scratch.mkdir(parents=True)
    old = time.time() - 72 * 3600
    for i in range(n):
        d = scratch / f"entry-{i:06d}"
        d.mkdir()
        f = d / "out.txt"
        f.write_text("x" * 100)
        if i % 10:
            os.utime(f, (old, old))
            os.utime(d, (old, old))
    return root / "home", lambda: shutil.rmtree(root, ignore_errors=True)
