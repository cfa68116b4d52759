"""hermes-agent's background processes, shown beside our own sessions.

hermes-agent lists the live background processes it started in ``processes.json``
(see :mod:`engine.hermes.processes`). Each entry becomes a read-only
:class:`ProcessSession` with ``source=HERMES``: hermes keeps no output file and no exit
record we could read, so such a session is either running (its pid verified by the
start ticks hermes recorded) or not, and nothing of it is ever written by us.

Signalling one needs more than listing it: the entry is read again right before, and
only a live process whose start ticks equal the recorded ones is signalled. An entry
without a recorded start time is shown but never signalled (its pid may be reused).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from engine import identity
from engine.hermes.processes import (
    HermesProcess,
    ProcessesFileUnreadable,
    read_all_processes,
    verified_fingerprint,
)
from engine.processes.session import KillOutcome, ProcessSession, SessionSource, SessionStatus

OWNER = "hermes-agent"
NO_OUTPUT = Path(os.devnull)  # followed, it reads as empty; never written


@dataclass(frozen=True)
class HermesListing:
    """The sessions read from processes.json, or why it could not be read (one line)."""

    sessions: tuple[ProcessSession, ...]
    problem: str | None = None


@dataclass(frozen=True)
class SignalTarget:
    """What a kill may signal: the verified fingerprint, or why not (``refusal`` is the
    KillReport outcome, ``detail`` its one-line reason)."""

    fingerprint: str | None
    refusal: KillOutcome | None = None
    detail: str = ""


def live_fingerprint(proc: HermesProcess) -> str | None:
    """Verified by pid and the start ticks hermes recorded (required here)."""
    return verified_fingerprint(proc, require_start_time=True)


def session_of(proc: HermesProcess, home_root: Path) -> ProcessSession:
    fp = live_fingerprint(proc)
    return ProcessSession(
        id=proc.session_id,
        pid=proc.pid,
        fingerprint=fp or identity.UNVERIFIED,
        command=proc.command,
        cwd=proc.cwd or "",
        owner=OWNER if proc.profile is None else f"{OWNER} ({proc.profile})",
        started_at=proc.started_at or 0.0,
        status=SessionStatus.RUNNING if fp is not None else SessionStatus.LOST,
        exit_code=None,
        signal=None,
        ended_at=None,
        output_path=NO_OUTPUT,
        notify=proc.owner.notify_on_complete,
        watch=proc.owner.watch_patterns,
        background=True,
        dir=Path(home_root),
        source=SessionSource.HERMES,
        hermes_owner=proc.owner,
    )


def list_hermes_sessions(home_root: Path) -> HermesListing:
    """Every session of processes.json (none when there is no such file); a file that
    cannot be read lists none and says why."""
    try:
        entries = read_all_processes(home_root)
    except ProcessesFileUnreadable as exc:
        return HermesListing((), f"hermes-agent's processes.json cannot be read ({exc}); its sessions")
    return HermesListing(tuple(session_of(p, home_root) for p in entries))


def signal_target(home_root: Path, session_id: str) -> SignalTarget:
    """Read processes.json again, right before a signal, and verify the entry's process."""
    try:
        entries = read_all_processes(home_root)
    except ProcessesFileUnreadable as exc:
        return SignalTarget(None, KillOutcome.UNVERIFIED, f"{exc}: not signalled")
    proc = next((p for p in entries if p.session_id == session_id), None)
    if proc is None:
        return SignalTarget(None, KillOutcome.GONE, "no longer in hermes-agent's processes.json: not signalled")
    if proc.pid_scope != "host" or proc.pid <= 0:
        return SignalTarget(None, KillOutcome.UNVERIFIED, f"pid scope {proc.pid_scope!r} is not this host's: not signalled")
    if proc.host_start_time is None:
        return SignalTarget(None, KillOutcome.UNVERIFIED, f"hermes-agent recorded no start time, so pid {proc.pid} "
                            "cannot be verified: not signalled")
    fp = live_fingerprint(proc)
    if fp is not None:
        return SignalTarget(fp)
    stat = identity.read_stat(proc.pid)
    if stat is None or stat.is_zombie:
        return SignalTarget(None, KillOutcome.GONE, "the process had already exited")
    return SignalTarget(None, KillOutcome.PID_RECYCLED, f"pid {proc.pid} now belongs to another process "
                        "(its start time differs from hermes-agent's record): not signalled")
