"""The registry over ``<home>/processes/``: spawn, list, look up, wait, kill.

Every instance (an app, a CLI call, the kanban dispatcher) reads the same folders, so a
session started by one is seen, followed and killed by any other. The instance that
spawned a session also holds its ``Popen`` so it can wait without polling and reap it.
"""

from __future__ import annotations

import os
import select
import subprocess
import threading
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from engine import identity
from engine.config import Settings
from engine.fsutil import atomic_write_json, read_json
from engine.home import HomeLayout
from engine.processes import session as sess
from engine.processes.session import (
    ID_HEX_LEN,
    ID_PREFIX,
    ProcessLookupFailed,
    ProcessSession,
    SessionCorrupt,
)
from engine.processes.supervisor import command_argv, spawn_environment, wrapper_argv

MIN_PREFIX_HEX = 4
RETENTION_EVERY_SECONDS = 600.0
RETENTION_STAMP = ".last_retention"


class SpawnFailed(Exception):
    """The command could not be started (bad cwd, empty command, no /bin/sh)."""


@dataclass(frozen=True)
class KillReport:
    """What a kill did. ``outcome``: killed | already_finished | pid_recycled | unverified |
    gone | error | survivors. ``signals`` are (pid, signal name) in the order sent."""

    id: str
    pid: int
    command: str
    status: str  # the session's status after the attempt
    outcome: str
    detail: str = ""
    signals: tuple[tuple[int, str], ...] = ()
    survivors: tuple[int, ...] = ()

    @property
    def ok(self) -> bool:
        return self.outcome in ("killed", "already_finished", "gone")

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "pid": self.pid,
            "status": self.status,
            "outcome": self.outcome,
            "detail": self.detail,
            "signals": [{"pid": p, "signal": s} for p, s in self.signals],
            "survivors": list(self.survivors),
        }


def new_session_id() -> str:
    return ID_PREFIX + uuid.uuid4().hex[:ID_HEX_LEN]


@dataclass
class _Cached:
    meta_mtime_ns: int
    base: ProcessSession


@dataclass
class _State:
    children: dict[str, subprocess.Popen] = field(default_factory=dict)
    finished: dict[str, ProcessSession] = field(default_factory=dict)
    bases: dict[str, _Cached] = field(default_factory=dict)
    pidfds: dict[str, int] = field(default_factory=dict)  # running session -> pidfd of its leader


class ProcessRegistry:
    """Sessions of one home. Thread-safe; cheap to create (no I/O until used)."""

    def __init__(self, home: HomeLayout, settings: Settings) -> None:
        self.home = home
        self.settings = settings
        self._state = _State()
        self._lock = threading.RLock()
        self._scratch_ready = False

    @property
    def root(self) -> Path:
        return self.home.processes_dir

    def session_dir(self, session_id: str) -> Path:
        return self.root / session_id

    # -- spawning ---------------------------------------------------------------------

    def spawn(
        self,
        command: str | Sequence[str],
        *,
        cwd: str | Path | None = None,
        env: Mapping[str, str] | None = None,
        owner: str = "cli",
        notify: bool = False,
        watch: Sequence[str] = (),
        background: bool = True,
    ) -> ProcessSession:
        """Start ``command`` (a shell string, or an argv list run without a shell).

        The command runs in its own session with stdin from /dev/null and its output in
        ``output.log``; it never depends on this process staying alive.
        """
        try:
            argv, display, recorded_argv = command_argv(command, self.settings.processes.shell)
        except ValueError as exc:
            raise SpawnFailed(str(exc)) from None
        workdir = Path(cwd).expanduser() if cwd is not None else Path.cwd()
        if not workdir.is_dir():
            raise SpawnFailed(f"working directory {workdir} does not exist or is not a directory")
        workdir = workdir.resolve()
        watch = tuple(w for w in watch if w)
        self.home.ensure_dir(self.root)
        scratch = self._scratch_dir()
        while True:
            sid = new_session_id()
            d = self.session_dir(sid)
            try:
                d.mkdir(mode=0o700)
                break
            except FileExistsError:
                continue
        out_fd = os.open(d / sess.OUTPUT_FILE, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)
        environ = spawn_environment(home_root=self.home.root, scratch_dir=scratch, process_id=sid, extra=env)
        started = time.time()
        try:
            popen = subprocess.Popen(
                wrapper_argv(d / sess.EXIT_FILE, argv),
                cwd=workdir,
                env=environ,
                stdin=subprocess.DEVNULL,
                stdout=out_fd,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                close_fds=True,
            )
        except OSError as exc:
            os.close(out_fd)
            _remove_tree(d)
            raise SpawnFailed(f"cannot start {display!r}: {exc.strerror or exc}") from None
        os.close(out_fd)
        fp = identity.fingerprint(popen.pid)
        meta = {
            "id": sid,
            "command": display,
            "argv": recorded_argv,
            "cwd": str(workdir),
            "pid": popen.pid,
            "fingerprint": fp,
            "started_at": started,
            "owner": owner,
            "notify": bool(notify),
            "watch": list(watch),
            "background": bool(background),
            "spawner_pid": os.getpid(),
        }
        atomic_write_json(d / sess.META_FILE, meta)
        with self._lock:
            self._state.children[sid] = popen
        self._maybe_retention()
        return sess.session_from_meta(d, meta)

    def _scratch_dir(self) -> Path | None:
        if not self._scratch_ready:
            try:
                self.home.ensure_dir(self.home.scratch_dir)
            except Exception:
                return None  # the command still runs; its TMPDIR is just not redirected
            self._scratch_ready = True
        return self.home.scratch_dir

    def _maybe_retention(self) -> None:
        stamp = self.root / RETENTION_STAMP
        try:
            if time.time() - stamp.stat().st_mtime < RETENTION_EVERY_SECONDS:
                return
        except FileNotFoundError:
            pass
        except OSError:
            return
        try:
            stamp.touch()
            from engine.processes.retention import prune_finished

            prune_finished(self)
        except OSError:
            pass

    # -- looking up -------------------------------------------------------------------

    def _names(self) -> list[str]:
        try:
            return [n for n in os.listdir(self.root) if n.startswith(ID_PREFIX)]
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise ProcessLookupFailed(f"cannot read {self.root}: {exc.strerror or exc}") from None

    def resolve_id(self, id_or_prefix: str) -> str:
        """The full id for an exact id or a unique prefix (>= 4 hex after ``proc_``)."""
        text = (id_or_prefix or "").strip()
        if not text:
            raise ProcessLookupFailed("no process id given")
        if "/" in text or "\0" in text or text.startswith("."):
            raise ProcessLookupFailed(f"no process session {text!r}")
        if (self.session_dir(text) / sess.META_FILE).exists():
            return text  # an exact id always wins over a prefix
        hexpart = text[len(ID_PREFIX) :] if text.startswith(ID_PREFIX) else text
        names = self._names()
        matches = sorted(n for n in names if n.startswith(ID_PREFIX + hexpart))
        if len(hexpart) < MIN_PREFIX_HEX:
            listed = f" (matches: {', '.join(matches[:10])})" if matches else ""
            raise ProcessLookupFailed(
                f"process id {text!r} is too short: give at least {MIN_PREFIX_HEX} hex characters "
                f"after '{ID_PREFIX}'{listed}",
                tuple(matches),
            )
        if not matches:
            raise ProcessLookupFailed(f"no process session matches {text!r}")
        if len(matches) > 1:
            raise ProcessLookupFailed(
                f"process id {text!r} is ambiguous: {', '.join(matches[:10])}"
                + (f" and {len(matches) - 10} more" if len(matches) > 10 else ""),
                tuple(matches),
            )
        return matches[0]

    def get(self, id_or_prefix: str) -> ProcessSession:
        sid = self.resolve_id(id_or_prefix)
        self.reap()
        try:
            return self._load(sid)
        except SessionCorrupt as exc:
            raise ProcessLookupFailed(str(exc)) from None

    def _load(self, sid: str) -> ProcessSession:
        with self._lock:
            done = self._state.finished.get(sid)
        if done is not None:
            return done
        d = self.session_dir(sid)
        try:
            mtime = (d / sess.META_FILE).stat().st_mtime_ns
        except FileNotFoundError:
            raise SessionCorrupt(f"{sid}: no metadata (still being created, or removed)") from None
        with self._lock:
            cached = self._state.bases.get(sid)
        if cached is None or cached.meta_mtime_ns != mtime:
            cached = _Cached(mtime, sess.session_from_meta(d, sess.read_meta(d)))
            with self._lock:
                self._state.bases[sid] = cached
        current = sess.derive(cached.base, self._leader_alive)
        if current.finished and sess.is_settled(current):
            with self._lock:
                self._state.finished[sid] = current
                self._state.bases.pop(sid, None)
                fd = self._state.pidfds.pop(sid, None)
                if fd is not None:
                    os.close(fd)
        return current

    def _leader_alive(self, s: ProcessSession) -> bool:
        """Is the session's verified leader still running?

        The first check reads /proc (fingerprint); it also opens a pidfd on the verified
        process, so later checks are one poll() on that fd: no /proc read per refresh,
        and a recycled pid can never be mistaken for ours.
        """
        with self._lock:  # the fd is only used and closed under the lock (no fd-number reuse)
            fd = self._state.pidfds.get(s.id)
            if fd is not None:
                exited = _pidfd_exited(fd)
                if exited is False:
                    return True
                del self._state.pidfds[s.id]
                os.close(fd)
                if exited:
                    return False
        if not (_HAVE_PIDFD and identity.is_verifiable(s.fingerprint)):
            return sess.leader_alive(s)
        try:
            fd = os.pidfd_open(s.pid)
        except ProcessLookupError:
            return False
        except OSError:
            return sess.leader_alive(s)
        if not identity.is_alive(s.pid, s.fingerprint):  # checked after opening: same process
            os.close(fd)
            return False
        with self._lock:
            if s.id in self._state.pidfds:
                os.close(fd)
            else:
                self._state.pidfds[s.id] = fd
        return True

    def list(self, include_finished: bool = True) -> list[ProcessSession]:
        """Sessions sorted by start time (oldest first). Unreadable folders are skipped
        here and named by :meth:`unreadable` (``ps`` warns about them)."""
        return self._scan(include_finished)[0]

    def unreadable(self) -> list[str]:
        """Ids of session folders that exist but whose metadata cannot be read."""
        return self._scan(include_finished=False)[1]

    def _scan(self, include_finished: bool) -> tuple[list[ProcessSession], list[str]]:
        self.reap()
        found: list[ProcessSession] = []
        bad: list[str] = []
        names = self._names()
        with self._lock:
            gone = set(self._state.finished) - set(names)
            for sid in gone:
                self._state.finished.pop(sid, None)
        for sid in names:
            try:
                s = self._load(sid)
            except (SessionCorrupt, OSError):
                if self.session_dir(sid).is_dir():  # not just removed by retention meanwhile
                    bad.append(sid)
                continue
            if include_finished or s.running:
                found.append(s)
        found.sort(key=lambda s: (s.started_at, s.id))
        return found, bad

    def live_processes(self) -> list[tuple[int, str, str]]:
        """(pid, fingerprint, session id) of running sessions whose leader is verified.

        Raises :class:`SessionCorrupt` when a session folder cannot be read: its process
        may be live and registered, so a caller that spares registered processes (the
        scratch pruner) must fail closed rather than treat it as a stranger."""
        sessions, bad = self._scan(include_finished=False)
        if bad:
            raise SessionCorrupt(f"unreadable process session(s): {', '.join(sorted(bad)[:5])}")
        return [(s.pid, s.fingerprint, s.id) for s in sessions if identity.is_alive(s.pid, s.fingerprint)]

    # -- waiting ------------------------------------------------------------------------

    def reap(self) -> None:
        """Collect exited children we spawned, so none lingers as a zombie."""
        with self._lock:
            children = list(self._state.children.items())
        for sid, popen in children:
            if popen.poll() is not None:
                with self._lock:
                    self._state.children.pop(sid, None)

    def popen_of(self, session_id: str) -> subprocess.Popen | None:
        with self._lock:
            return self._state.children.get(session_id)

    def wait(self, id_or_prefix: str, timeout: float | None = None) -> ProcessSession:
        """The session once it has ended, or as it is when ``timeout`` runs out."""
        sid = self.resolve_id(id_or_prefix)
        deadline = None if timeout is None else time.monotonic() + max(0.0, timeout)
        popen = self.popen_of(sid)
        if popen is not None:
            try:
                popen.wait(None if deadline is None else max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                return self.get(sid)
            self.reap()
        delay = 0.01
        while True:
            current = self.get(sid)
            if current.finished:
                return current
            if deadline is not None and time.monotonic() >= deadline:
                return current
            pause = delay if deadline is None else min(delay, max(0.0, deadline - time.monotonic()))
            time.sleep(pause)
            delay = min(delay * 1.5, 0.25)

    # -- changing ---------------------------------------------------------------------

    def move_to_background(self, id_or_prefix: str) -> ProcessSession:
        """Yield: the session becomes a background session with notify-on-complete.

        Only metadata changes; the process is never signalled and its output file is
        untouched, so a follower continues from the very same byte offset.
        """
        sid = self.resolve_id(id_or_prefix)
        d = self.session_dir(sid)
        with self._lock:
            meta = read_json(d / sess.META_FILE)
            meta["background"] = True
            meta["notify"] = True
            meta["yielded_at"] = time.time()
            atomic_write_json(d / sess.META_FILE, meta)
            self._state.bases.pop(sid, None)
            done = self._state.finished.pop(sid, None)
        if done is not None:
            return replace(done, background=True, notify=True)
        return self.get(sid)

    def kill(self, id_or_prefix: str, grace: float | None = None) -> KillReport:
        """Verified terminate of the session's process group (TERM, grace, KILL).

        A leader whose fingerprint no longer matches is never signalled
        (``pid_recycled``); survivors are reported and the session stays running.
        """
        s = self.get(id_or_prefix)
        base = dict(id=s.id, pid=s.pid, command=s.command)
        if s.status == sess.LOST and _pid_reused(s):
            return KillReport(**base, status=s.status, outcome="pid_recycled",
                              detail=f"pid {s.pid} now belongs to another process: not signalled")
        if s.finished:
            return KillReport(**base, status=s.status, outcome="already_finished",
                              detail=f"already {s.exit_text()}")
        if not identity.is_verifiable(s.fingerprint):
            return KillReport(**base, status=s.status, outcome="unverified",
                              detail="no fingerprint was taken at spawn, so its pid is never signalled")
        grace = self.settings.processes.kill_grace_seconds if grace is None else max(0.0, float(grace))
        kill_file = s.dir / sess.KILLED_FILE
        # Intent first: whoever looks while the command dies of our TERM sees "killed".
        atomic_write_json(kill_file, {"pending": True, "signal": None, "at": time.time(), "by_pid": os.getpid()})
        try:
            report = identity.terminate(s.pid, s.fingerprint, grace)
        except BaseException:
            _unlink(kill_file)
            raise
        self.reap()
        signals = tuple(report.signals)
        survivors = tuple(report.survivors)
        record = sess.read_exit_record(s.dir)
        if report.outcome is identity.SignalOutcome.SENT and (record is None or record.signal is not None):
            last = "SIGKILL" if any(sig == "SIGKILL" for _p, sig in signals) else "SIGTERM"
            atomic_write_json(kill_file, {
                "pending": bool(survivors), "signal": last, "at": time.time(), "by_pid": os.getpid(),
                "signals": [{"pid": p, "signal": n} for p, n in signals],
            })
        else:
            _unlink(kill_file)  # nothing was sent, or it had exited normally on its own
        with self._lock:
            self._state.finished.pop(s.id, None)
        after = self.get(s.id)
        if report.outcome is identity.SignalOutcome.SENT:
            if survivors:
                outcome, detail = "survivors", f"{len(survivors)} process(es) still alive after SIGKILL"
            elif after.status == sess.KILLED:
                outcome, detail = "killed", ""
            else:
                outcome, detail = "gone", f"it ended on its own ({after.exit_text()})"
        elif report.outcome is identity.SignalOutcome.PID_RECYCLED:
            outcome, detail = "pid_recycled", f"pid {s.pid} now belongs to another process: not signalled"
        elif report.outcome is identity.SignalOutcome.GONE:
            outcome, detail = "gone", "the process had already exited"
        elif report.outcome is identity.SignalOutcome.UNVERIFIED:
            outcome, detail = "unverified", report.detail or "identity not verified: not signalled"
        else:
            outcome, detail = "error", report.detail or "the kernel refused the signal"
        return KillReport(**base, status=after.status, outcome=outcome, detail=detail,
                          signals=signals, survivors=survivors)

    def remove(self, session_id: str) -> bool:
        """Delete a finished session's folder (retention). Running sessions are refused."""
        s = self.get(session_id)
        if s.running or s.id != session_id:
            return False
        _remove_tree(s.dir)
        with self._lock:
            self._state.finished.pop(session_id, None)
            self._state.bases.pop(session_id, None)
        return True


_HAVE_PIDFD = identity.pidfd_available()


def _pidfd_exited(fd: int) -> bool | None:
    """A pidfd polls readable once its process has exited (zombie or reaped).
    None when the fd itself is unusable (then /proc decides)."""
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    events = poller.poll(0)
    if not events:
        return False
    revents = events[0][1]
    if revents & (select.POLLNVAL | select.POLLERR):
        return None
    return bool(revents & select.POLLIN)


def _pid_reused(s: ProcessSession) -> bool:
    """The session's pid exists now but is another process (fingerprint differs)."""
    now = identity.fingerprint(s.pid)
    return now != identity.UNVERIFIED and identity.is_verifiable(s.fingerprint) and now != s.fingerprint


def _unlink(path: Path) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def _remove_tree(path: Path) -> None:
    import shutil

    shutil.rmtree(path, ignore_errors=True)
