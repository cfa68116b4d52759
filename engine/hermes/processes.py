"""hermes-agent's ``processes.json``: the background processes hermes registered.

hermes-agent checkpoints every live background process it started into
``<home>/processes.json`` (a JSON array; see the reference notes, "Checkpoint and
recovery"): ``session_id``, ``command``, ``pid``, ``pid_scope``, ``host_start_time``
(the kernel start ticks, field 22 of ``/proc/<pid>/stat``), ``cwd``, ``started_at``,
and who it is for (hermes-agent 0.19.0, ``tools/process_registry.py``): ``task_id``
(the kanban card), ``session_key`` (the gateway session), ``watcher_platform`` /
``watcher_chat_id`` / ``watcher_thread_id`` / ``watcher_user_name`` (the chat told
about it), ``notify_on_complete`` and ``watch_patterns``.

Each hermes profile is a home of its own (``profiles/<name>/``, hermes's
``HERMES_HOME`` for that profile) with its own ``processes.json``: :func:`hermes_homes`
lists them, and every reader here covers all of them.

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
class HermesOwner:
    """Who a hermes process is for (every field as hermes wrote it; "" when unset)."""

    task_id: str = ""
    session_key: str = ""
    platform: str = ""
    chat_id: str = ""
    thread_id: str = ""
    user_name: str = ""
    notify_on_complete: bool = False
    watch_patterns: tuple[str, ...] = ()

    def words(self) -> str:
        """One line: the card, the chat, the session, how hermes follows it."""
        parts = []
        if self.task_id:
            parts.append(f"card {self.task_id}")
        if self.platform or self.chat_id:
            chat = f"{self.platform or 'chat'} chat {self.chat_id}".strip()
            chat += f" thread {self.thread_id}" if self.thread_id else ""
            chat += f" ({self.user_name})" if self.user_name else ""
            parts.append(chat)
        if self.session_key:
            parts.append(f"session {self.session_key}")
        if self.notify_on_complete:
            parts.append("notifies on completion")
        if self.watch_patterns:
            parts.append("watches " + " | ".join(self.watch_patterns))
        return ", ".join(parts)

    def to_json(self) -> dict[str, object]:
        return {"task_id": self.task_id or None, "session_key": self.session_key or None,
                "platform": self.platform or None, "chat_id": self.chat_id or None,
                "thread_id": self.thread_id or None, "user_name": self.user_name or None,
                "notify_on_complete": self.notify_on_complete, "watch_patterns": list(self.watch_patterns)}


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
    owner: HermesOwner = HermesOwner()  # who the process is for
    profile: str | None = None  # the hermes profile whose home lists it (None: the root home)


def processes_file(home_root: Path) -> Path:
    return Path(home_root) / FILE_NAME


def hermes_homes(home_root: Path) -> list[tuple[str | None, Path]]:
    """(profile, home) of the root home and of every profile's own home (``profiles/<name>/``)."""
    import os

    homes: list[tuple[str | None, Path]] = [(None, Path(home_root))]
    try:
        entries = sorted(os.scandir(Path(home_root) / "profiles"), key=lambda e: e.name)
    except OSError:
        return homes
    for entry in entries:
        try:
            if entry.is_dir(follow_symlinks=False):
                homes.append((entry.name, Path(entry.path)))
        except OSError:
            continue
    return homes


def _text(raw: dict, key: str) -> str:
    value = raw.get(key)
    return value if isinstance(value, str) else ""


def _owner(raw: dict) -> HermesOwner:
    """Who the process is for; a field of an unexpected type reads as unset (these only
    label the process: sparing and signalling rest on the pid and its start ticks)."""
    patterns = raw.get("watch_patterns")
    return HermesOwner(
        task_id=_text(raw, "task_id") or _text(raw, "owner_task_id"), session_key=_text(raw, "session_key"),
        platform=_text(raw, "watcher_platform"), chat_id=_text(raw, "watcher_chat_id"),
        thread_id=_text(raw, "watcher_thread_id"), user_name=_text(raw, "watcher_user_name"),
        notify_on_complete=raw.get("notify_on_complete") is True,
        watch_patterns=tuple(p for p in patterns if isinstance(p, str)) if isinstance(patterns, list) else (),
    )


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
        owner=_owner(raw),
    )


def read_all_processes(home_root: Path) -> tuple[HermesProcess, ...]:
    """Every entry of the root home's processes.json and of each profile's, with its
    profile. Raises ProcessesFileUnreadable when any of them cannot be trusted."""
    from dataclasses import replace

    found: dict[str, HermesProcess] = {}
    for profile, home in hermes_homes(home_root):
        for proc in read_processes(home):
            # A newer hermes (main after 0.19.0) checkpoints every live process of its
            # process-global registry into each profile's file: one session, listed once.
            found.setdefault(proc.session_id, replace(proc, profile=profile))
    return tuple(found.values())


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
    for proc in read_all_processes(home_root):
        fp = verified_fingerprint(proc)
        if fp is not None:
            profile = f" (profile {proc.profile})" if proc.profile else ""
            live.append((proc.pid, fp, f"hermes-agent session {proc.session_id}{profile}"))
    return live
