"""Workers: how a card's worker is launched, stopped, and judged when it exits.

The dispatcher talks to a :class:`Spawner` (the default one starts a process session
through the process registry; the benchmark uses one that starts nothing). Everything
else here is pure policy shared by the dispatcher and the operator commands:

- claim locks are ``host:pid``; only a lock whose host part is exactly this host's id is
  "host-local", and only host-local workers are ever checked or signalled;
- stopping a worker stops its whole tree (:mod:`engine.processes.tree`: whatever group or
  session its processes moved to), each process fingerprint-verified through a pidfd; an
  unverified fingerprint is never signalled; a survivor is reported, never hidden;
- an exit is classified from the recorded exit (never invented);
- the worker's last words are the tail of its card log.
"""

from __future__ import annotations

import enum
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from engine import identity
from engine.identity import Liveness

# Claims and host locality live in engine.kanban.hosts (a board command that signals no
# worker loads only that module); their names are this module's too.
from engine.kanban.hosts import (  # noqa: F401
    HOST_ID_PATTERN,
    HOST_ID_RULE,
    HOST_ID_VARIABLE,
    BadHostId,
    boot_id,
    claim_lock_here,
    host_lock_sql,
    hostname,
    is_host_local,
    lock_host,
)
from engine.kanban.models import RunOutcome

RATE_LIMIT_EXIT_CODE = 75  # EX_TEMPFAIL: "try again later", not the worker's fault
LAST_WORDS_BYTES = 4000
LAST_WORDS_CHARS = 400
LOG_ROTATE_BYTES = 2 * 1024 * 1024
ENV_TEXT_MAX_CHARS = 32 * 1024
RUN_HEADER_PREFIX = "=== run "  # our line before each run's output in a card log
COPY_CHUNK_BYTES = 1024 * 1024


# --------------------------------------------------------------------------------------
# Stopping a worker
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class StopReport:
    """What stopping a worker did. ``stopped`` means: no process of ours is left there."""

    pid: int | None
    host_local: bool
    attempted: bool = False  # a signal was sent
    stopped: bool = False
    refused: str = ""  # why nothing was signalled although something may be alive
    pid_recycled: bool = False
    signals: tuple[tuple[int, str], ...] = ()
    survivors: tuple[int, ...] = ()
    alive: str = ""  # what still lives, in one line ("1 process still alive: 812 (sleep)")

    @property
    def survived(self) -> bool:
        """A host-local worker may still be running: hold the card, never spawn beside it."""
        return self.host_local and not self.stopped

    def to_json(self) -> dict:
        return {
            "pid": self.pid,
            "host_local": self.host_local,
            "termination_attempted": self.attempted,
            "terminated": self.stopped,
            "refused": self.refused,
            "pid_recycled": self.pid_recycled,
            "signals": [{"pid": p, "signal": s} for p, s in self.signals],
            "survivors": list(self.survivors),
            "still_alive": self.alive,
        }


def stop_worker(pid: int | None, fp: str | None, lock: str | None, grace: float,
                session_id: str | None = None) -> StopReport:
    """Stop a host-local worker's whole tree: its wrapper (``pid``, verified by ``fp``)
    and every process of its session ``session_id``, in whatever group or session, also
    once the wrapper itself is gone (engine.processes.tree): TERM, grace, KILL. Stopped
    means nothing of it is left. Blocking (up to ``grace`` + 2 s): call it from a thread."""
    from engine.processes import tree

    local = is_host_local(lock)
    if not pid:
        return StopReport(pid, local, stopped=True)
    if not local:
        return StopReport(pid, False, refused=f"it runs on another host ({lock_host(lock) or lock})")
    state = identity.liveness(pid, fp)
    if state is Liveness.UNVERIFIED_ALIVE:
        return StopReport(pid, True, refused="its identity was never verified, so it is never signalled")
    recycled = state is Liveness.RECYCLED
    done = tree.stop(tree.Root(session_id, pid, fp), grace)
    if not done.attempted and done.stopped:
        return StopReport(pid, True, stopped=True, pid_recycled=recycled)  # nothing of it was left
    refused = "" if done.attempted or not done.refused else done.refused[0]
    return StopReport(pid, True, attempted=done.attempted, stopped=done.stopped, refused=refused,
                      pid_recycled=recycled, signals=tuple(done.signals), survivors=done.survivors,
                      alive=done.left_line())


# --------------------------------------------------------------------------------------
# Launching
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class WorkerLaunch:
    """Everything a spawner needs to start one card's worker."""

    task_id: str
    run_id: int
    profile: str
    command: str
    env: Mapping[str, str]
    cwd: Path
    log_path: Path
    # The run's launch token, recorded on the run before the spawn: the spawner gives
    # it to what it starts so that the launch can be found by it after a crash.
    token: str = ""


@dataclass(frozen=True)
class LaunchedWorker:
    pid: int | None
    fingerprint: str
    session_id: str | None = None
    output_path: str | None = None


@dataclass(frozen=True)
class WorkerExit:
    """A recorded exit: a code, or the signal that killed it."""

    code: int | None = None
    signal: str | None = None  # a name such as "SIGKILL"
    by_hand: bool = False  # killed through hermes-tui (``proc kill``, the processes pane): a person's doing
    started: bool = True  # False: it ended before its command ever ran (proven, not guessed)


class LaunchState(enum.StrEnum):
    """What became of a launch whose dispatcher stopped before recording it."""

    STARTED = "started"  # its worker exists (or ran): adopt it
    NOT_STARTED = "not_started"  # proven never to have run, and it never will: release the card
    UNCERTAIN = "uncertain"  # cannot be told: hold the card, spawn nothing beside it


@dataclass(frozen=True)
class LaunchLookup:
    state: LaunchState
    reason: str = ""  # said on the card (why it was released, or held)
    worker: LaunchedWorker | None = None  # STARTED: what to record on the run


class Spawner(Protocol):
    def launch(self, launch: WorkerLaunch) -> LaunchedWorker:
        """Start the worker (raise on failure). Called from a thread."""

    def exit_of(self, session_id: str | None, pid: int | None) -> WorkerExit | None:
        """The recorded exit of a finished worker, or None when nothing was recorded."""

    def find_launch(self, token: str, task_id: str, run_id: int) -> LaunchLookup:
        """What became of the launch of that token (a dispatcher stopped before it was
        recorded). NOT_STARTED must be proof, and must also make sure it never starts
        later; when in doubt, UNCERTAIN. Called from a thread."""

    def wait_exit(self, session_id: str) -> bool:
        """Block until the worker of that session, a child of this process, has exited:
        True then; False at once when this spawner started no such child here (nothing
        to wait for). Called from a thread."""


@dataclass
class NullSpawner:
    """Starts nothing (benchmarks, dry runs): records what it was asked to launch."""

    launched: list[WorkerLaunch] = field(default_factory=list)

    def launch(self, launch: WorkerLaunch) -> LaunchedWorker:
        self.launched.append(launch)
        return LaunchedWorker(pid=None, fingerprint=identity.UNVERIFIED)

    def exit_of(self, session_id: str | None, pid: int | None) -> WorkerExit | None:
        return None

    def find_launch(self, token: str, task_id: str, run_id: int) -> LaunchLookup:
        return LaunchLookup(LaunchState.NOT_STARTED, "this spawner starts nothing")

    def wait_exit(self, session_id: str) -> bool:
        return False


def find_launch(spawner: Spawner, token: str | None, task_id: str, run_id: int) -> LaunchLookup:
    """``spawner.find_launch``, failing closed: a spawner that cannot look launches up,
    a run without a token, or a lookup that fails, is UNCERTAIN."""
    finder = getattr(spawner, "find_launch", None)
    if finder is None:
        return LaunchLookup(LaunchState.UNCERTAIN, "its spawner cannot look up an unrecorded launch")
    if not token:
        return LaunchLookup(LaunchState.UNCERTAIN, "the run has no launch token")
    try:
        return finder(token, task_id, run_id)
    except Exception as exc:
        return LaunchLookup(LaunchState.UNCERTAIN, f"its session {token} could not be looked up ({exc})")


def worker_env(*, home: Path, db: Path | str, task_id: str, run_id: int, profile: str, title: str, body: str,
               extra: Mapping[str, str]) -> dict[str, str]:
    """The variables a worker gets on top of the spawner's environment: the profile's
    own ``env`` first, then the card's (which a profile cannot override)."""
    env = dict(extra)
    env.update({
        "HERMES_HOME": str(home),
        "HERMES_KANBAN_TASK": task_id,
        "HERMES_KANBAN_DB": str(db),
        "HERMES_KANBAN_RUN_ID": str(run_id),
        "HERMES_KANBAN_TITLE": title[:ENV_TEXT_MAX_CHARS],
        # An environment string over the kernel's limit would fail the spawn: a long
        # body is cut here, and the whole of it stays on the board (`kanban show`).
        "HERMES_KANBAN_BODY": body[:ENV_TEXT_MAX_CHARS],
        "HERMES_PROFILE": profile,
    })
    return env


# --------------------------------------------------------------------------------------
# Judging an exit
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ExitVerdict:
    """How a worker that ended its run without a board call is judged."""

    outcome: RunOutcome  # CRASHED, PROTOCOL_VIOLATION, RATE_LIMITED or COMPLETED
    error: str
    counts_as_failure: bool


def classify_exit(pid: int | None, exit_: WorkerExit | None, complete_on_exit: bool) -> ExitVerdict:
    shown = pid if pid else "?"
    if exit_ is not None and not exit_.started:
        return ExitVerdict(RunOutcome.NOT_STARTED, f"pid {shown} never ran its command: its launch was cut "
                           "short before the worker started", False)
    if exit_ is None or (exit_.code is None and exit_.signal is None):
        if not pid:
            return ExitVerdict(RunOutcome.CRASHED, "no worker process was recorded for this run", True)
        return ExitVerdict(RunOutcome.CRASHED, f"pid {shown} not alive (no exit recorded)", True)
    if exit_.by_hand:
        return ExitVerdict(RunOutcome.KILLED, f"killed: pid {shown} was killed through hermes-tui (proc kill); "
                           "the card is held until it is unblocked", False)
    if exit_.signal is not None:
        return ExitVerdict(RunOutcome.CRASHED, f"pid {shown} killed by signal {exit_.signal}", True)
    if exit_.code == 0:
        if complete_on_exit:
            return ExitVerdict(RunOutcome.COMPLETED, f"pid {shown} exited with code 0", False)
        return ExitVerdict(RunOutcome.PROTOCOL_VIOLATION,
                           f"protocol_violation: pid {shown} exited with code 0 without "
                           "calling complete, block or review", False)
    if exit_.code == RATE_LIMIT_EXIT_CODE:
        return ExitVerdict(RunOutcome.RATE_LIMITED, f"rate-limited: pid {shown} exited with code 75", False)
    return ExitVerdict(RunOutcome.CRASHED, f"pid {shown} exited with code {exit_.code}", True)


# --------------------------------------------------------------------------------------
# The card log: copied from the process output by byte offset, rotated, read for last words
# --------------------------------------------------------------------------------------


def card_log_path(logs_dir: Path, task_id: str) -> Path:
    return logs_dir / f"{task_id}.log"


def _append(dest: Path, data: bytes, limit: int) -> None:
    """Append to ``dest``, first rotating it to ``dest.1`` if it would pass ``limit``."""
    try:
        size = dest.stat().st_size
    except FileNotFoundError:
        size = 0
    if size > 0 and size + len(data) > limit:
        os.replace(dest, dest.with_name(dest.name + ".1"))
    fd = os.open(dest, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    finally:
        os.close(fd)


def copy_new_output(src: str | Path | None, dest: Path, offset: int, limit: int = LOG_ROTATE_BYTES) -> int:
    """Append the bytes of ``src`` after ``offset`` to ``dest``; return the new offset.

    A source that shrank (truncated, replaced) is read again from 0. ``dest`` is rotated
    to ``dest.1`` (one backup) before it would grow past ``limit``. Errors leave the
    offset where it was: the next call tries again.
    """
    if not src:
        return offset
    from engine.processes.follower import OutputFollower

    # The follower reads data only: a worker's output cut by its bound (a hole between
    # its head and tail, engine.processes.output_bound) is copied as head, marker, tail.
    try:
        follower = OutputFollower(src, offset, COPY_CHUNK_BYTES)
    except OSError:
        return offset
    with follower:
        while True:
            try:
                chunk = follower.read()
            except OSError:
                return offset
            if chunk.reset:
                offset = 0
            if not chunk.data:
                return offset if chunk.cut == 0 and not chunk.reset else follower.delivered_offset
            try:
                _append(dest, chunk.data, limit)
            except OSError:
                return offset
            offset = follower.delivered_offset


def append_log_line(dest: Path, line: str, limit: int = LOG_ROTATE_BYTES) -> None:
    """Write one line of our own (a run header) into a card log."""
    _append(dest, (line.rstrip("\n") + "\n").encode("utf-8", errors="replace"), limit)


def read_tail(path: Path, nbytes: int) -> bytes:
    """The last ``nbytes`` of a file, without its partial first line; b"" on any error
    (the processes' tail reader, which reads only the tail of a huge log)."""
    from engine.processes.follower import read_tail as tail_of

    try:
        tail = tail_of(path, nbytes)
    except OSError:
        return b""
    if not tail.cut:
        return tail.data
    cut = tail.data.find(b"\n")
    return tail.data[cut + 1 :] if cut >= 0 else b""


def last_words(log_path: Path) -> str:
    """The worker's last output: blank lines dropped, lines joined by spaces, the last
    400 characters. "" when there is none."""
    data = read_tail(log_path, LAST_WORDS_BYTES).decode("utf-8", errors="replace")
    lines = [line.strip() for line in data.splitlines()]
    # Only this run's words: drop everything up to our own latest run header.
    for i in range(len(lines) - 1, -1, -1):
        if lines[i].startswith(RUN_HEADER_PREFIX):
            lines = lines[i + 1 :]
            break
    text = " ".join(line for line in lines if line)
    return text[-LAST_WORDS_CHARS:]


def with_last_words(error: str, words: str) -> str:
    return f"{error} Worker's last output: {words!r}" if words else error
