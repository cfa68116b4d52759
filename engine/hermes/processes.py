"""hermes-agent's ``processes.json``: the background processes hermes registered.

hermes-agent checkpoints every live background process it started into
``<home>/processes.json`` (a JSON array; see the reference notes, "Checkpoint and
recovery"): ``session_id``, ``command``, ``pid``, ``pid_scope``, ``host_start_time``
(the kernel start ticks, field 22 of ``/proc/<pid>/stat``), ``cwd``, ``started_at``...

The scratch pruner treats them as registered processes: it keeps their entries and
never signals them. So this reader is strict: a file that exists but cannot be read
or does not have that shape raises :class:`ProcessesFileUnreadable`, and the pruner
then signals nobody. Only reading; hermes owns the file.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from engine import identity

FILE_NAME = "processes.json"
# hermes keeps at most 64 sessions; a file far larger than that is not its checkpoint.
MAX_BYTES = 4 * 1024 * 1024


class ProcessesFileUnreadable(Exception):
    """processes.json exists but cannot be trusted: treat every process as registered."""


@dataclass(frozen=True)
class HermesProcess:
    """One entry of processes.json, as far as hermes-tui needs it."""

    session_id: str
    pid: int
    host_start_time: int | None
    pid_scope: str
    command: str
    cwd: str | None
    started_at: float | None


def processes_file(home_root: Path) -> Path:
    return Path(home_root) / FILE_NAME


def _entry(raw: object, index: int) -> HermesProcess:
    if not isinstance(raw, dict):
        raise ProcessesFileUnreadable(f"entry {index} is not an object")
    pid = raw.get("pid")
    if pid is not None and (isinstance(pid, bool) or not isinstance(pid, int)):
        raise ProcessesFileUnreadable(f"entry {index} has a pid that is not a number: {pid!r}")
    start = raw.get("host_start_time")
    if start is not None and (isinstance(start, bool) or not isinstance(start, int)):
        raise ProcessesFileUnreadable(f"entry {index} has a host_start_time that is not a number: {start!r}")
    started = raw.get("started_at")
    return HermesProcess(
        session_id=str(raw.get("session_id") or f"#{index}"),
        pid=pid or 0,
        host_start_time=start,
        pid_scope=str(raw.get("pid_scope") or "host"),
        command=str(raw.get("command") or ""),
        cwd=raw.get("cwd") if isinstance(raw.get("cwd"), str) else None,
        started_at=float(started) if isinstance(started, (int, float)) and not isinstance(started, bool) else None,
    )


def read_processes(home_root: Path) -> tuple[HermesProcess, ...]:
    """Every entry of processes.json; none when the file does not exist.

    Raises ProcessesFileUnreadable when it exists but is unreadable or malformed."""
    path = processes_file(home_root)
    from engine.regular_file import read_regular

    try:
        data = read_regular(path, MAX_BYTES)
    except FileNotFoundError:
        return ()
    except OSError as exc:
        raise ProcessesFileUnreadable(f"cannot read {path}: {exc.strerror or exc}") from None
    if len(data) > MAX_BYTES:
        raise ProcessesFileUnreadable(f"{path} is larger than {MAX_BYTES // (1024 * 1024)} MiB")
    try:
        entries = json.loads(data)
    except (ValueError, RecursionError) as exc:
        raise ProcessesFileUnreadable(f"{path} is not valid JSON: {exc}") from None
    if not isinstance(entries, list):
        raise ProcessesFileUnreadable(f"{path} is not a JSON array")
    try:
        return tuple(_entry(raw, i) for i, raw in enumerate(entries))
    except ProcessesFileUnreadable as exc:
        raise ProcessesFileUnreadable(f"{path}: {exc}") from None


def verified_fingerprint(proc: HermesProcess, *, require_start_time: bool = False) -> str | None:
    """The fingerprint of the live process ``proc`` names, or None when it is gone,
    a zombie, not on this host, or its pid now names another process (start ticks
    differ: the pid was reused). An entry without a recorded start time cannot be
    told from a reused pid: for sparing (the pruner) the live process is taken as
    hermes's, since sparing a stranger is the safe mistake; with ``require_start_time``
    (showing it alive, signalling it) it is not verified."""
    if proc.pid_scope != "host" or proc.pid <= 0:
        return None
    if require_start_time and proc.host_start_time is None:
        return None
    stat = identity.read_stat(proc.pid)
    if stat is None or stat.is_zombie:
        return None
    if proc.host_start_time is not None and stat.start_ticks != proc.host_start_time:
        return None
    fp = identity.fingerprint_of(stat)
    return fp if identity.is_verifiable(fp) else None


def live_hermes_processes(home_root: Path) -> list[tuple[int, str, str]]:
    """(pid, fingerprint, label) of every live process hermes registered, verified by
    pid + start ticks. Raises ProcessesFileUnreadable (fail closed)."""
    live = []
    for proc in read_processes(home_root):
        fp = verified_fingerprint(proc)
        if fp is not None:
            live.append((proc.pid, fp, f"hermes-agent session {proc.session_id}"))
    return live
