"""CPU and memory of our own sessions, for the processes table.

Only the processes of our sessions are sampled. A session's members are found from its
leader through ``/proc/<pid>/task/<pid>/children`` (a few small reads), never by
scanning every process on the machine; each member costs one read of its
``/proc/<pid>/stat`` a sample (its CPU ticks, resident pages and start time), and its
CPU share is the ticks it used since the previous sample over the time between them.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from engine import identity
from engine.processes.session import ProcessSession

MAX_MEMBERS = 64
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
# The kernel counts CPU time in whole clock ticks (10 ms at 100 a second): over a shorter
# span than this a share is noise (one tick over 0.2 ms read as 5,000%), so samples
# closer together than this keep measuring from the older reading and repeat the share
# measured last. The app samples once a second.
MIN_SPAN_SECONDS = 0.25
MAX_SHARE = 100.0 * (os.cpu_count() or 1)  # every CPU of the machine, busy
PAGE_BYTES = os.sysconf("SC_PAGE_SIZE")


@dataclass(frozen=True)
class Usage:
    cpu_percent: float
    rss: int
    processes: int


@dataclass(frozen=True)
class _Reading:
    """What one read of /proc/<pid>/stat gives the sampler."""

    start_ticks: int  # the process's start: another process on the same pid has another
    cpu_ticks: int  # user and system time so far
    rss_pages: int
    at: float  # time.monotonic() of the read


def _read(pid: int) -> _Reading | None:
    """One read of the member's stat (fields 14, 15, 22 and 24); None when it is gone,
    a zombie (nothing left to count) or unreadable."""
    raw = identity.stat_bytes(pid)
    if raw is None:
        return None
    rest = raw[raw.rfind(b")") + 1:].split()  # rest[0] is field 3; field N is rest[N - 3]
    if len(rest) < 22 or rest[0] in (b"Z", b"X", b"x"):
        return None
    try:
        return _Reading(int(rest[19]), int(rest[11]) + int(rest[12]), int(rest[21]), time.monotonic())
    except ValueError:
        return None


def _children(pid: int) -> list[int]:
    try:
        raw = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(x) for x in raw.split() if x.isdigit()]


def session_members(leader: int) -> list[int]:
    """The leader and its descendants (breadth first, at most MAX_MEMBERS)."""
    seen = [leader]
    queue = [leader]
    while queue and len(seen) < MAX_MEMBERS:
        for child in _children(queue.pop(0)):
            if child not in seen:
                seen.append(child)
                queue.append(child)
    return seen[:MAX_MEMBERS]


def _share(before: _Reading, now: _Reading) -> float:
    """The CPU share (% of one CPU) between two readings of one process, at least
    MIN_SPAN_SECONDS apart: never negative, never more than all the machine's CPUs."""
    used = max(0, now.cpu_ticks - before.cpu_ticks) / CLOCK_TICKS
    return min(100.0 * used / (now.at - before.at), MAX_SHARE)


class SessionSampler:
    """Keeps each member's last reading; drops it when the pid goes away.

    Members are the leader's descendants (the command and what it started; the
    supervising wrapper itself is idle and not counted). They are re-discovered every
    ``members_every`` samples; in between, the cached list is used and members that
    exited simply drop out. A member's first reading (or the first of a new process on a
    reused pid) counts no CPU: there is nothing before it to measure from.
    """

    def __init__(self, members_every: int = 5) -> None:
        self._last: dict[int, _Reading] = {}  # pid -> the reading shares are measured from
        self._share: dict[int, float] = {}  # pid -> the share measured last
        self._members: dict[str, tuple[int, list[int]]] = {}  # session id -> (age, pids)
        self.members_every = members_every

    def _members_of(self, s: ProcessSession) -> list[int]:
        age, pids = self._members.get(s.id, (self.members_every, []))
        if age >= self.members_every:
            pids = session_members(s.pid)[1:]
            age = 0
        self._members[s.id] = (age + 1, pids)
        return pids

    def sample(self, sessions: Iterable[ProcessSession]) -> dict[str, Usage]:
        """Usage of each running session (its leader is verified by the caller's listing)."""
        usage: dict[str, Usage] = {}
        last, seen, shares = self._last, {}, {}
        for s in sessions:
            if not s.running or not identity.is_verifiable(s.fingerprint):
                continue
            cpu = 0.0
            rss = 0
            count = 0
            for pid in self._members_of(s):
                now = _read(pid)
                if now is None:
                    continue
                before = last.get(pid)
                if before is None or before.start_ticks != now.start_ticks:
                    seen[pid], shares[pid] = now, 0.0  # nothing to measure from yet
                elif now.at - before.at < MIN_SPAN_SECONDS:
                    seen[pid], shares[pid] = before, self._share.get(pid, 0.0)
                else:
                    seen[pid], shares[pid] = now, _share(before, now)
                cpu += shares[pid]
                rss += now.rss_pages * PAGE_BYTES
                count += 1
            usage[s.id] = Usage(cpu, rss, count)
        self._last = seen  # a pid that left every session is forgotten: never measured from
        self._share = shares
        for session_id in list(self._members):
            if session_id not in usage:
                del self._members[session_id]
        return usage
