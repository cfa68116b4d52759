"""Claims and host locality: this host's id on a board, and whose claim lock is whose.

A claim lock is ``host:pid``; only a lock whose host part is exactly this host's id is
"host-local", and only host-local workers are ever checked or signalled
(:mod:`engine.kanban.workers`, which re-exports these names). Its own module so that a
board command that signals no worker (``kanban create``) does not load the workers'
module and :mod:`engine.identity` with it just to check this host's id.
"""

from __future__ import annotations

import os
import re
import socket

HOST_ID_VARIABLE = "HERMES_KANBAN_HOST_ID"
# A host id: 1-64 of these characters (a Linux host name fits: at most 64). Never ":",
# which separates the host from the pid in a claim lock (``host:pid``).
HOST_ID_PATTERN = re.compile(r"[A-Za-z0-9._-]{1,64}")
HOST_ID_RULE = "1-64 characters from A-Z a-z 0-9 . _ -"


class BadHostId(ValueError):
    """This host's id is not usable (a usage error: exit 2, one line)."""


def hostname() -> str:
    """This host's id on a board: ``$HERMES_KANBAN_HOST_ID`` when set (several homes of one
    machine acting as separate hosts of a shared board, or a machine whose name is not
    unique in the fleet), else the machine's name. Either must follow :data:`HOST_ID_RULE`;
    one that does not is refused (:class:`BadHostId`), never cut or rewritten: two hosts
    whose names were sanitised alike would take each other's workers for their own."""
    given = os.environ.get(HOST_ID_VARIABLE, "")
    if given:
        if not HOST_ID_PATTERN.fullmatch(given):
            raise BadHostId(f"{HOST_ID_VARIABLE} must be {HOST_ID_RULE}, got {given[:80]!r}")
        return given
    machine = socket.gethostname() or "localhost"
    if not HOST_ID_PATTERN.fullmatch(machine):
        raise BadHostId(f"this machine's name {machine[:80]!r} is not a usable host id ({HOST_ID_RULE}); "
                        f"set {HOST_ID_VARIABLE}")
    return machine


def boot_id() -> str:
    """This boot of this machine (changes on every reboot): with the host id, the host
    identity a shared board's lease records."""
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as f:
            return f.read().strip()
    except OSError:
        return ""


def claim_lock_here() -> str:
    """The claim lock this process writes: ``host:pid``."""
    return f"{hostname()}:{os.getpid()}"


def lock_host(lock: str | None) -> str | None:
    """The host part of a claim lock ``host:pid`` (everything before the last ":"), or
    None when it is not one."""
    host, sep, pid = (lock or "").rpartition(":")
    return host if sep and host and pid.isdigit() else None


def is_host_local(lock: str | None) -> bool:
    """Whether the lock was written on this host: its host part equals this host's id
    exactly (``hostA:x:12`` is not ``hostA``'s)."""
    return lock_host(lock) == hostname()


def host_lock_sql(column: str, host: str) -> tuple[str, tuple]:
    """SQL (both dialects) true when ``column`` holds a claim lock of ``host`` exactly:
    it starts with ``host:`` and no other ":" follows. With its parameters."""
    prefix = host + ":"
    return (f"(substr({column}, 1, ?) = ? AND substr({column}, ?) NOT LIKE '%:%')",
            (len(prefix), prefix, len(prefix) + 1))
