"""The automatic pass: at most once per process and once per hour per home, in a
detached child, so no app start or CLI command ever waits on a prune.

The launcher:
1. sets the once-per-process flag first (even when it then skips);
2. skips when ``scratch.auto_prune`` is off, when the home is a guest home (hermes-agent's,
   or anyone else's: see engine/hermes/guest.py) and its config does not set
   ``scratch.auto_prune: true`` explicitly, or when ``<scratch>/.last_prune`` is younger
   than an hour; otherwise touches the stamp *before* the pass (concurrent launchers
   see it and skip);
3. computes its own lineage as (pid, fingerprint) pairs and hands them over, with
   the scratch path it resolved and the home it belongs to, to a child started in a
   new session (``python -I`` on the launcher's own ``sys.path``). A launcher that
   cannot compute its lineage hands over "unknown": that pass signals nothing and
   keeps every entry a live process works in.

The child outlives the launcher (a short CLI command exits at once; the pass still
finishes), and after it is reparented its launcher's shell stays protected by the
handed-over lineage. A failing child leaves one line in the prune log.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import time

from engine import identity
from engine.config import Settings
from engine.home import HomeLayout
from engine.scratch.target import PruneTarget

INTERVAL_SECONDS = 3600.0

_started_in_this_process = False


def _reset_for_tests() -> None:
    global _started_in_this_process
    _started_in_this_process = False


def mark_started() -> None:
    """Spend this process's one automatic pass without starting it (a test suite's
    conftest calls this so no test starts a real detached pass by accident)."""
    global _started_in_this_process
    _started_in_this_process = True


def stamp_is_fresh(stamp: os.PathLike[str] | str, now: float | None = None) -> bool:
    """True when the last pass started less than an hour ago (a missing stamp: no)."""
    now = time.time() if now is None else now
    try:
        mtime = os.stat(stamp).st_mtime
    except OSError:
        return False
    return 0 <= now - mtime < INTERVAL_SECONDS


def _touch(path: os.PathLike[str] | str) -> None:
    # O_NONBLOCK: a FIFO in the stamp's place fails the open (ENXIO) instead of waiting
    # for a reader; anything but a regular file is refused (no pass is started).
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0), 0o600)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(f"{path} is not a regular file")
        os.utime(fd)
    finally:
        os.close(fd)


def child_argv(target: PruneTarget, settings: Settings, lineage_text: str | None, lineage_error: str | None
               ) -> list[str]:
    """The detached child's command line: isolated Python, our sys.path, and every
    input the pass needs (nothing is re-resolved in the child)."""
    bootstrap = (
        "import sys, json; sys.path[:0] = json.loads(sys.argv[1]); del sys.argv[1]; "
        "from engine.scratch.auto_pass import main; sys.exit(main(sys.argv[1:]))"
    )
    s = settings.scratch
    argv = [
        sys.executable, "-I", "-c", bootstrap, json.dumps([p for p in sys.path if p]),
        "--home", os.fspath(target.home.root),
        "--scratch", os.fspath(target.scratch_dir),
        "--idle-hours", repr(s.idle_hours),
        "--quarantine-hours", repr(s.quarantine_hours),
        "--grace", repr(s.kill_grace_seconds),
        *(("--arrival-hours", repr(s.arrival_hours)) if s.arrival_hours is not None else ()),
    ]
    if lineage_text is not None:
        argv += ["--lineage", lineage_text]
    else:
        argv += ["--lineage-unknown", lineage_error or "unknown"]
    return argv


def allowed_in(home: HomeLayout, settings: Settings) -> bool:
    """The automatic pass may run in this home: it is on, and in a guest home it was
    asked for explicitly (a default of true is not consent in someone else's home)."""
    if not settings.scratch.auto_prune:
        return False
    if settings.is_set("scratch.auto_prune"):
        return True
    from engine.hermes.guest import home_owner

    return not home_owner(home.root, settings).is_guest


def maybe_start_auto_prune(home: HomeLayout, settings: Settings, *, now: float | None = None
                           ) -> subprocess.Popen | None:
    """Start the hourly pass in a detached child if one is due. Never raises, never
    waits. Returns the child (for tests) or None when nothing was started."""
    global _started_in_this_process
    if _started_in_this_process:
        return None
    _started_in_this_process = True
    try:
        if not allowed_in(home, settings):
            return None
        target = PruneTarget.of(home)
        home.ensure_dir(target.scratch_dir)
        if stamp_is_fresh(target.stamp_file, now):
            return None
        _touch(target.stamp_file)
        try:
            lineage_text, lineage_error = identity.format_lineage(identity.lineage()), None
        except identity.LineageError as exc:
            lineage_text, lineage_error = None, str(exc)
        return subprocess.Popen(
            child_argv(target, settings, lineage_text, lineage_error),
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True, close_fds=True, cwd="/",
        )
    except Exception:
        return None  # the next process past the hourly mark retries
