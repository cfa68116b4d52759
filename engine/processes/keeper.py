"""The output keeper: one small process per home that keeps running sessions' output
within their bound (:mod:`engine.processes.output_bound`).

There is no daemon to keep alive: a spawn that needs a keeper starts one when none
holds the home's keeper lock (``processes/.keeper.lock``, an ``flock``), and the keeper
ends by itself once no bounded session of the home runs. Between the two there is no
gap a session can fall into: the spawner looks for the lock *after* the session's
record is written, and a keeper about to end lets the lock go, then looks at the
sessions once more and takes the lock again if one appeared (or leaves it to the
keeper another spawn started meanwhile).

The keeper looks at each running session's ``output.log`` size once a second (one
``stat`` each; a folder listing every few seconds), sooner while some output grows
fast, and cuts a file whose stored bytes passed twice its bound. A session is forgotten after
one last cut when its exit is recorded, or, at a listing, when nothing of it runs any
more (its wrapper and its process group are gone: killed with KILL, it recorded no
exit), so the keeper still ends by itself. A keeper that cannot
cut (a filesystem without holes) says so once per session in ``processes/keeper.log``
and leaves the output alone.

Run as ``python -m engine.processes.keeper PROCESSES_DIR``.
"""

from __future__ import annotations

import fcntl
import json
import os
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path

LOCK_FILE = ".keeper.lock"
LOG_FILE = "keeper.log"
LOOK_SECONDS = 1.0
FAST_LOOK_SECONDS = 0.05
LIST_EVERY_SECONDS = 3.0
IDLE_LOOKS_BEFORE_EXIT = 3


def _try_lock(root: Path) -> int | None:
    """The keeper lock's fd when this process got it, else None."""
    try:
        fd = os.open(root / LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return fd


def _say_pid(fd: int) -> None:
    """The lock file names the keeper holding it (for `ps`-like looks and the bench)."""
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    except OSError:
        pass


def keeper_pid(root: Path) -> int | None:
    """The pid the lock file names while a keeper holds it, else None."""
    if not keeper_running(root):
        return None
    try:
        return int((root / LOCK_FILE).read_text().strip() or "0") or None
    except (OSError, ValueError):
        return None


def keeper_running(root: Path) -> bool:
    fd = _try_lock(root)
    if fd is None:
        return (root / LOCK_FILE).exists()
    os.close(fd)  # closing drops the flock
    return False


def ensure_keeper(root: Path) -> bool:
    """Start a keeper for ``root`` (a home's processes folder) unless one runs. True
    when one was started. Never raises: a session without a keeper still runs; its
    output is only unbounded until the next spawn or listing starts one."""
    try:
        if keeper_running(root):
            return False
        import subprocess

        subprocess.Popen(
            [sys.executable, "-I", "-m", "engine.processes.keeper", str(root)],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True, close_fds=True, cwd="/",
            # A marker of its own: the keeper serves the whole home and is no session's, even
            # when a session's command started it (engine.processes.tree stops at it).
            env={**{k: v for k, v in os.environ.items() if k in ("PATH", "LANG", "LC_ALL", "HOME")},
                 "HERMES_PROCESS_ID": "keeper"},
        )
        return True
    except Exception:
        return False


class _Watched:
    __slots__ = ("bound", "output", "exit", "size", "told", "pid", "fingerprint")

    def __init__(self, bound: int, d: Path, pid: object = None, fingerprint: object = None) -> None:
        self.bound = bound
        self.output = str(d / "output.log")
        self.exit = d / "exit"
        self.size = 0
        self.told = False
        self.pid = pid if isinstance(pid, int) and not isinstance(pid, bool) and pid > 0 else None
        self.fingerprint = fingerprint if isinstance(fingerprint, str) else None


def _may_still_write(w: _Watched, live_groups: Callable[[], set[int]]) -> bool:
    """Whether anything of a session without an exit record may still write its output:
    its wrapper runs, or a process of its group does (a wrapper killed with KILL writes
    no exit record, and what it started may live on). When in doubt (no pid recorded,
    another user's group), it may: the session stays watched. ``live_groups``: the
    groups with a live member, read from /proc once per listing, when first asked."""
    from engine import identity

    if w.pid is None or identity.liveness(w.pid, w.fingerprint) in identity.RUNS:
        return True
    try:
        os.killpg(w.pid, 0)  # the wrapper led its group: any member left answers
    except ProcessLookupError:
        return False
    except OSError:
        return True
    # Something answered; a zombie (which never writes) answers too, and a pid 1 that
    # does not reap keeps it: only a live member counts, when /proc can tell.
    return w.pid in live_groups() or not identity.proc_readable()


class Keeper:
    """The loop, separated from the process so a test can drive it step by step."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.watched: dict[str, _Watched] = {}
        self.seen: set[str] = set()  # folders looked at once (a finished one is cut at most then)
        self._listed_at = 0.0
        self._root_mtime = 0
        self.cuts = 0

    def _log(self, line: str) -> None:
        from engine.text import escape_text

        try:
            with open(self.root / LOG_FILE, "a", encoding="utf-8") as fh:
                fh.write(time.strftime("%Y-%m-%dT%H:%M:%S ") + escape_text(line) + "\n")
        except OSError:
            pass

    def list_sessions(self) -> None:
        """Pick up new running sessions with a bound; forget finished ones."""
        self._listed_at = time.monotonic()
        try:
            names = [n for n in os.listdir(self.root) if n.startswith("proc_")]
        except OSError:
            names = []
        for name in names:
            if name in self.watched or name in self.seen:
                continue
            d = self.root / name
            try:
                meta = json.loads((d / "meta.json").read_bytes())
            except (OSError, ValueError):
                continue  # not recorded yet: looked at again at the next listing
            self.seen.add(name)
            bound = meta.get("max_output_bytes") if isinstance(meta, dict) else None
            if not (isinstance(bound, int) and not isinstance(bound, bool) and bound > 0):
                continue
            if (d / "exit").exists():
                self._cut(name, _Watched(bound, d))  # it ended before we saw it: one last cut
                continue
            self.watched[name] = _Watched(bound, d, meta.get("pid"), meta.get("fingerprint"))
        present = set(names)
        for name in [n for n in self.watched if n not in present]:
            del self.watched[name]
        self.seen &= present
        from functools import cache

        from engine.identity import live_groups

        groups = cache(live_groups)  # read when first asked, once for this listing
        for name, w in list(self.watched.items()):  # ended without an exit record (killed with KILL)
            if not w.exit.exists() and not _may_still_write(w, groups):
                self._cut(name, w)  # the last bytes, then forget it: nothing of it writes any more
                del self.watched[name]

    def _root_changed(self) -> bool:
        """A session folder was made or removed since the last look (the folder's mtime)."""
        try:
            mtime = os.stat(self.root).st_mtime_ns
        except OSError:
            return False
        changed, self._root_mtime = mtime != self._root_mtime, mtime
        return changed

    def _cut(self, name: str, w: _Watched) -> None:
        from engine.processes.output_bound import CannotCut, cut_middle

        try:
            if cut_middle(w.output, w.bound) is not None:
                self.cuts += 1
        except (CannotCut, OSError) as exc:
            if not w.told:
                w.told = True
                self._log(f"{name}: cannot keep its output within {w.bound} bytes "
                          f"({exc.strerror or exc}); it grows unbounded")

    def look(self) -> bool:
        """One look at every watched file. True when some output grows fast."""
        if self._root_changed() or time.monotonic() - self._listed_at >= LIST_EVERY_SECONDS:
            self.list_sessions()
        fast = False
        for name, w in list(self.watched.items()):
            try:
                size = os.stat(w.output).st_size
            except OSError:
                size = w.size
            grew, w.size = size - w.size, size
            if grew > w.bound // 4:
                fast = True
            if size > 2 * w.bound:
                self._cut(name, w)
            if w.exit.exists():
                self._cut(name, w)  # the last bytes: one more cut after the exit, then forget it
                del self.watched[name]
        return fast


def run(root: Path) -> int:
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    fd = _try_lock(root)
    if fd is None:
        return 0  # another keeper has this home
    _say_pid(fd)
    keeper = Keeper(root)
    keeper.list_sessions()
    idle = 0
    while True:
        fast = keeper.look()
        idle = 0 if keeper.watched else idle + 1
        if idle >= IDLE_LOOKS_BEFORE_EXIT:
            os.close(fd)  # let go first, then look once more (see the module's docstring)
            keeper.list_sessions()
            if not keeper.watched:
                return 0
            fd = _try_lock(root)
            if fd is None:
                return 0  # a new keeper took over
            _say_pid(fd)
            idle = 0
        time.sleep(FAST_LOOK_SECONDS if fast else LOOK_SECONDS)


if __name__ == "__main__":
    sys.exit(run(Path(sys.argv[1])))
