"""One process session on disk, and how its status is derived.

``<home>/processes/<id>/`` holds:

- ``meta.json``   what was started (command, cwd, pid, fingerprint, owner, notify, watch),
                  written atomically by the spawner (rewritten atomically on yield);
- ``output.log``  stdout+stderr of the command, mode 0600, raw bytes;
- ``exit``        ``"<code>\\n"`` written by the supervising wrapper when the command ends
                  (its mtime is the end time). The trailing newline is the commit mark: a
                  record without it is still being written and counts as absent;
- ``killed.json`` written by :meth:`ProcessRegistry.kill` after a verified terminate;
- ``notified``    created (O_EXCL) by whoever delivered the completion, so it shows once;
- ``not_started`` created by the wrapper when it ends at its gate (never released, or
                  signalled there): its command never ran.

Status is derived, never guessed: an exit record -> ``exited`` (or ``killed`` with a
kill record); no record and the verified process alive -> ``running``; no record and the
process gone -> ``lost`` (no exit code is invented).
"""

from __future__ import annotations

import enum
import json
import os
import stat
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

# Not `from typing import TYPE_CHECKING` (typing costs a listing's start-up time); nor
# are identity, signal and fsutil imported here: a listing of finished sessions from
# the index never needs them, and the functions that do import them.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    from engine.hermes.processes import HermesOwner


class SessionStatus(enum.StrEnum):
    """What a session is now, derived from disk (the values are those of ``--json``)."""

    RUNNING = "running"
    EXITED = "exited"
    KILLED = "killed"
    LOST = "lost"




class KillOutcome(enum.StrEnum):
    """What a kill came to (the values are those of ``kill --json``)."""

    KILLED = "killed"
    ALREADY_FINISHED = "already_finished"
    PID_RECYCLED = "pid_recycled"  # the pid names another process now: not signalled
    UNVERIFIED = "unverified"  # no fingerprint to verify it by: not signalled
    GONE = "gone"  # it ended before (or without) our signal
    ERROR = "error"  # the kernel refused the signal
    SURVIVORS = "survivors"  # signalled, but some of its processes outlived SIGKILL
    LEFTOVERS_KILLED = "leftovers_killed"  # it had ended; what it left running was stopped


# Outcomes after which nothing of the session runs any more.
KILL_SUCCEEDED = frozenset({KillOutcome.KILLED, KillOutcome.ALREADY_FINISHED, KillOutcome.GONE,
                            KillOutcome.LEFTOVERS_KILLED})


META_FILE = "meta.json"
OUTPUT_FILE = "output.log"
EXIT_FILE = "exit"
KILLED_FILE = "killed.json"
NOTIFIED_FILE = "notified"
WATCH_STATE_FILE = "watch.json"
RESTART_LOCK_FILE = ".restart.lock"  # held through `proc restart` of this session
NOT_STARTED_FILE = "not_started"  # the wrapper's own literal (engine.processes.supervisor)

SETTLE_SECONDS = 10.0  # a finished session younger than this may still get its kill record

ID_PREFIX = "proc_"
RESTART_POLICIES = ("no", "on-failure", "always")
ATTEMPTS_FILE = "attempts"  # one line per finished attempt of a restarting session
NEXT_ATTEMPT_FILE = "next_attempt"  # when a restarting session runs its command again
MAX_RESTARTS = 10000  # the most restarts a policy may allow (engine.processes.restart)
ID_HEX_LEN = 12


class ProcessLookupFailed(LookupError):
    """An id or prefix that names no session, or more than one (``candidates``)."""

    def __init__(self, message: str, candidates: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.message = message
        self.candidates = candidates


class SessionCorrupt(Exception):
    """A session folder whose metadata cannot be read or is malformed; listing skips it.
    ``cwd`` is where its process may work, when that much can still be read (the
    pruner keeps sparing that directory); None means anywhere."""

    def __init__(self, message: str, cwd: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.cwd = cwd


class ExitRecord:
    """The wrapper's record: the exit code, and the file's mtime as the end time. (A
    plain class: each dataclass definition costs every command start-up time.)"""

    __slots__ = ("code", "ended_at")

    def __init__(self, code: int, ended_at: float) -> None:
        self.code = code
        self.ended_at = ended_at

    @property
    def signal(self) -> str | None:
        """The signal a shell reports as 128+N. Ambiguous with a plain ``exit 128+N``."""
        return signal_from_code(self.code)


def signal_from_code(code: int | None) -> str | None:
    if code is None or code <= 128 or code > 128 + 64:
        return None
    import signal as signal_mod

    try:
        return signal_mod.Signals(code - 128).name
    except ValueError:
        return None


class SessionSource(enum.Enum):
    """Who started a session: hermes-tui (a folder under ``processes/``, with output and
    an exit record) or hermes-agent (an entry of its ``processes.json``: no output kept,
    no exit record; hermes-tui only reads it)."""

    OWN = "hermes-tui"
    HERMES = "hermes-agent"


@dataclass(frozen=True)
class ProcessSession:
    """A snapshot of one session. ``pid``/``fingerprint`` are the process-group leader
    (the supervising wrapper); its group holds the command and its children."""

    id: str
    pid: int
    fingerprint: str
    command: str
    cwd: str
    owner: str
    started_at: float
    status: SessionStatus
    exit_code: int | None
    signal: str | None
    ended_at: float | None
    output_path: Path
    notify: bool
    watch: tuple[str, ...]
    background: bool = True
    argv: tuple[str, ...] | None = None
    dir: Path = field(default=Path("."), compare=False)
    source: SessionSource = SessionSource.OWN
    name: str | None = None  # `run --name`: unique among running sessions
    max_output_bytes: int = 0  # the output bound (0: none), see engine.processes.output_bound
    restarted_from: str | None = None  # the session this one restarts (`proc restart`)
    restart: str = "no"  # the restart policy: no | on-failure | always
    max_restarts: int = 0
    hermes_owner: HermesOwner | None = None  # hermes-agent's: who it is for (task, chat, session, watch)
    never_started: bool = False  # lost with the wrapper's proof that its command never ran (a spawn cut short)

    @property
    def output_available(self) -> bool:
        """hermes-agent keeps no output file for its sessions we could show."""
        return self.source is SessionSource.OWN

    @property
    def running(self) -> bool:
        return self.status is SessionStatus.RUNNING

    @property
    def finished(self) -> bool:
        return self.status is not SessionStatus.RUNNING

    @property
    def short_id(self) -> str:
        return self.id[len(ID_PREFIX) : len(ID_PREFIX) + 8] if self.id.startswith(ID_PREFIX) else self.id

    def runtime(self, now: float | None = None) -> float | None:
        """Seconds from start to end (to ``now`` while running); None when it ended with
        no end recorded (``lost``: a runtime that kept counting would claim it still runs)."""
        if self.ended_at is None and self.status == SessionStatus.LOST:
            return None
        end = self.ended_at if self.ended_at is not None else (now if now is not None else time.time())
        return max(0.0, end - self.started_at)

    def status_text(self) -> str:
        """The status as a list shows it (the pane's STATUS column, ``ps``): 'running',
        'exit 2', 'exit 143 (SIGTERM)', 'killed (SIGKILL)', 'lost'."""
        if self.status in (SessionStatus.EXITED, SessionStatus.KILLED):
            return self.exit_text()
        if self.never_started:
            return "never started"
        return str(self.status)

    def exit_text(self) -> str:
        """'exit 0', 'SIGKILL', 'exit 143 (SIGTERM)', 'lost', 'running'."""
        if self.status is SessionStatus.RUNNING:
            return "running"
        if self.status is SessionStatus.LOST and self.source is SessionSource.HERMES:
            return "not running (hermes keeps no exit record)"
        if self.status is SessionStatus.LOST and self.never_started:
            return "never started (its spawn was cut short)"
        if self.status is SessionStatus.LOST:
            return "lost (no exit record)"
        if self.status is SessionStatus.KILLED:
            return f"killed ({self.signal})" if self.signal else "killed"
        if self.signal:
            return f"exit {self.exit_code} ({self.signal})"
        return f"exit {self.exit_code}"

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "pid": self.pid,
            "command": self.command,
            "cwd": self.cwd,
            "status": self.status,
            "exit_code": self.exit_code,
            "signal": self.signal,
            "started_at": self.started_at,
            "ended_at": self.ended_at,
            "owner": self.owner,
            "notify": self.notify,
            "watch": list(self.watch),
            "background": self.background,
            "fingerprint": self.fingerprint,
            "output_path": str(self.output_path) if self.output_available else None,
            "source": self.source.value,
            "alive": self.running,
            "output_available": self.output_available,
            "name": self.name,
            "max_output_bytes": self.max_output_bytes,
            "restarted_from": self.restarted_from,
            "restart": self.restart,
            "max_restarts": self.max_restarts,
            "hermes_owner": self.hermes_owner.to_json() if self.hermes_owner is not None else None,
            "never_started": self.never_started,
        }


# --------------------------------------------------------------------------------------
# Reading a session folder
# --------------------------------------------------------------------------------------


def read_exit_record(session_dir: Path) -> ExitRecord | None:
    """The wrapper's record, or None while absent or half-written (no newline yet)."""
    path = session_dir / EXIT_FILE
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None  # a FIFO or device there is no record
        raw = os.read(fd, 64)
        mtime = os.fstat(fd).st_mtime
    except OSError:
        return None
    finally:
        os.close(fd)
    if not raw.endswith(b"\n"):
        return None
    try:
        code = int(raw.strip())
    except ValueError:
        return None
    return ExitRecord(code, mtime)


def read_kill_record(session_dir: Path) -> dict[str, Any] | None:
    if not os.path.exists(os.path.join(session_dir, KILLED_FILE)):
        return None  # the common case, without raising and catching an exception
    from engine.fsutil import read_json

    try:
        data = read_json(session_dir / KILLED_FILE)
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


# The largest pid Linux hands out (PID_MAX_LIMIT); a bigger one cannot be a process.
PID_MAX = 1 << 22

# ``meta.json`` of a spawn still recording itself: its command has not been started.
STATE_STARTING = "starting"


class SessionNotStarted(Exception):
    """A session folder whose command was never started: its spawn is still recording
    the session, or died (or hit a full disk) before it could. No process of it runs,
    so listings and the pruner skip it; retention removes it once abandoned."""


def read_meta(session_dir: Path) -> dict[str, Any]:
    """The validated metadata of a started session.

    Raises :class:`SessionNotStarted` for a folder whose command never ran (no metadata
    yet, or the spawn's ``starting`` record), :class:`SessionCorrupt` (one line, with
    the cwd when it can still be read) for anything unreadable or malformed."""
    path = session_dir / META_FILE
    from engine.regular_file import read_regular

    try:
        raw = read_regular(path)
    except FileNotFoundError:
        raise SessionNotStarted(f"{session_dir.name}: no metadata: its command was never started") from None
    except OSError as exc:
        raise SessionCorrupt(f"{session_dir.name}: unreadable metadata ({exc.strerror or exc})") from None
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise SessionCorrupt(f"{session_dir.name}: unreadable metadata ({exc})", salvage_cwd(raw)) from None
    if not isinstance(data, dict):
        raise SessionCorrupt(f"{session_dir.name}: metadata is not an object")
    if data.get("state") == STATE_STARTING:
        raise SessionNotStarted(f"{session_dir.name}: being started (its command has not run)")
    problem = meta_problem(session_dir.name, data)
    if problem:
        cwd = data.get("cwd")
        raise SessionCorrupt(f"{session_dir.name}: {problem}", cwd if isinstance(cwd, str) else None)
    return data


# Field -> the types it may have (None allowed where a field is optional).
_META_TYPES: dict[str, tuple[type, ...]] = {
    "command": (str,),
    "cwd": (str,),
    "fingerprint": (str, type(None)),
    "owner": (str, type(None)),
    "started_at": (int, float),
    "notify": (bool, type(None)),
    "background": (bool, type(None)),
    "watch": (list, type(None)),
    "argv": (list, type(None)),
}


def meta_problem(folder: str, meta: dict[str, Any]) -> str | None:
    """Why ``meta`` cannot describe the session in ``folder`` (None: it can)."""
    pid = meta.get("pid")
    if isinstance(pid, bool) or not isinstance(pid, int):
        return f"metadata without a valid pid ({pid!r:.40})"
    if not 1 < pid <= PID_MAX:
        return f"metadata with an impossible pid {str(pid)[:40]}"
    if meta.get("id", folder) != folder:
        return f"metadata names another session ({meta.get('id')!r:.40}), not its folder"
    for name, types in _META_TYPES.items():
        if name in meta and not isinstance(meta[name], types):
            return f"metadata field {name!r} has the wrong type ({type(meta[name]).__name__})"
    return None


def salvage_cwd(raw: bytes) -> str | None:
    """The ``cwd`` of metadata that is no longer valid JSON (truncated, overwritten), if
    its field is still whole: the pruner keeps sparing that directory."""
    import re

    m = re.search(rb'"cwd":\s*("(?:[^"\\]|\\.)*")', raw[:65536])
    if m is None:
        return None
    try:
        cwd = json.loads(m.group(1))
    except ValueError:
        return None
    return cwd if isinstance(cwd, str) and cwd.startswith("/") else None


def session_from_meta(session_dir: Path, meta: dict[str, Any]) -> ProcessSession:
    """A session whose status is not derived yet (``running``); see :func:`derive`.
    ``meta`` has passed :func:`read_meta`."""
    from engine import identity

    argv = meta.get("argv")
    return ProcessSession(
        id=session_dir.name,
        pid=meta["pid"],
        fingerprint=str(meta.get("fingerprint") or identity.UNVERIFIED),
        command=meta.get("command", ""),
        cwd=meta.get("cwd", ""),
        owner=str(meta.get("owner") or ""),
        started_at=float(meta.get("started_at") or 0.0),
        status=SessionStatus.RUNNING,
        exit_code=None,
        signal=None,
        ended_at=None,
        output_path=session_dir / OUTPUT_FILE,
        notify=bool(meta.get("notify", False)),
        watch=tuple(str(w) for w in meta.get("watch") or ()),
        background=bool(meta.get("background", True)),
        argv=tuple(str(a) for a in argv) if isinstance(argv, list) else None,
        dir=session_dir,
        **extra_fields(meta),
    )


def extra_fields(rec: dict[str, Any]) -> dict[str, Any]:
    """The optional fields of a meta record or an index record (absent in old ones)."""
    name = rec.get("name")
    bound = rec.get("max_output_bytes")
    origin = rec.get("restarted_from")
    policy = rec.get("restart")
    limit = rec.get("max_restarts")
    return {
        "name": name if isinstance(name, str) and name else None,
        "max_output_bytes": bound if isinstance(bound, int) and not isinstance(bound, bool) and bound > 0 else 0,
        "restarted_from": origin if isinstance(origin, str) and origin.startswith(ID_PREFIX) else None,
        "restart": policy if policy in RESTART_POLICIES else "no",
        # (A record older than the bound may hold more: the most a policy may allow now.)
        "max_restarts": min(limit, MAX_RESTARTS) if isinstance(limit, int) and not isinstance(limit, bool)
        and limit > 0 else 0,
    }


def leader_alive(session: ProcessSession) -> bool:
    """The session's leader still runs. Without a fingerprint taken at spawn we can only
    say the pid exists: such a session is reported running while it does, and never
    signalled."""
    from engine import identity

    return identity.liveness(session.pid, session.fingerprint) in identity.RUNS


def derive(base: ProcessSession, alive: Callable[[ProcessSession], bool] = leader_alive) -> ProcessSession:
    """Fill in status, exit code, signal and end time from what is on disk now.

    ``alive`` says whether the verified leader still runs (the registry passes a cached
    pidfd check; the default reads /proc). A kill record is written *before* the first
    signal (``pending``) and completed after, so an exit caused by our TERM is never
    seen as a plain exit, not even for a moment.
    """
    d = base.dir
    record = read_exit_record(d)
    if record is None:
        if alive(base):
            return replace(base, status=SessionStatus.RUNNING)  # also while a kill is in progress
        # The wrapper may have written its record just before it exited: look again.
        record = read_exit_record(d)
    kill = read_kill_record(d)
    if record is None and kill is None:
        return replace(base, status=SessionStatus.LOST, never_started=os.path.exists(f"{d}/{NOT_STARTED_FILE}"))
    if kill is not None and (record is None or record.signal is not None):
        sig = kill.get("signal") if isinstance(kill.get("signal"), str) else None
        if sig is None and record is not None:
            sig = record.signal  # the kill is still being completed: the shell's word for now
        ended = record.ended_at if record is not None else float(kill.get("at") or time.time())
        return replace(
            base,
            status=SessionStatus.KILLED,
            exit_code=record.code if record is not None else None,
            signal=sig,
            ended_at=ended,
        )
    assert record is not None
    return replace(base, status=SessionStatus.EXITED, exit_code=record.code, signal=record.signal, ended_at=record.ended_at)


def is_settled(s: ProcessSession, now: float | None = None) -> bool:
    """A finished session that can no longer change (safe to cache): its kill record is
    complete, or it ended long enough ago that no kill of it can still be finishing."""
    if s.running:
        return False
    kill = read_kill_record(s.dir)
    if kill is not None:
        return not kill.get("pending", False)
    end = s.ended_at if s.ended_at is not None else s.started_at
    return (time.time() if now is None else now) - end > SETTLE_SECONDS


def claim_notification(session_dir: Path) -> bool:
    """Atomically claim the right to show this session's completion (True once, ever)."""
    try:
        fd = os.open(session_dir / NOTIFIED_FILE, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    except FileExistsError:
        return False
    except OSError:
        return False
    os.write(fd, f"{time.time():.3f}\n".encode())
    os.close(fd)
    return True
