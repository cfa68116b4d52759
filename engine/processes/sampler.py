"""CPU and memory of our own sessions, for the processes table.

Only the processes of our sessions are sampled, through cached ``psutil.Process``
objects (``cpu_percent`` needs the previous sample of the same object). A session's
members are found from its leader through ``/proc/<pid>/task/<pid>/children`` (a few
small reads), never by scanning every process on the machine.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import psutil

from engine import identity
from engine.processes.session import ProcessSession

MAX_MEMBERS = 64


@dataclass(frozen=True)
class Usage:
    cpu_percent: float
    rss: int
    processes: int


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


class SessionSampler:
    """Keeps one psutil.Process per member pid; drops them when the pid goes away.

    Members are the leader's descendants (the command and what it started; the
    supervising wrapper itself is idle and not counted). They are re-discovered every
    ``members_every`` samples; in between, the cached list is used and members that
    exited simply drop out.
    """

    def __init__(self, members_every: int = 5) -> None:
        self._procs: dict[int, psutil.Process] = {}
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
        live: set[int] = set()
        for s in sessions:
            if not s.running or not identity.is_verifiable(s.fingerprint):
                continue
            cpu = 0.0
            rss = 0
            count = 0
            for pid in self._members_of(s):
                proc = self._procs.get(pid)
                try:
                    if proc is None:
                        proc = psutil.Process(pid)
                        proc.cpu_percent(None)  # primes the counter; the next call is real
                        self._procs[pid] = proc
                        first = True
                    else:
                        first = False
                    with proc.oneshot():
                        c = proc.cpu_percent(None)
                        rss += proc.memory_info().rss
                    cpu += 0.0 if first else c
                    count += 1
                    live.add(pid)
                except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
                    self._procs.pop(pid, None)
            usage[s.id] = Usage(cpu, rss, count)
        for pid in list(self._procs):
            if pid not in live:
                del self._procs[pid]  # a pid that left a session is never reused from cache
        for session_id in list(self._members):
            if session_id not in usage:
                del self._members[session_id]
        return usage
