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
    """Keeps one psutil.Process per member pid; drops them when the pid goes away."""

    def __init__(self) -> None:
        self._procs: dict[int, psutil.Process] = {}

    def sample(self, sessions: Iterable[ProcessSession]) -> dict[str, Usage]:
        usage: dict[str, Usage] = {}
        live: set[int] = set()
        for s in sessions:
            if not s.running or not identity.is_alive(s.pid, s.fingerprint):
                continue
            cpu = 0.0
            rss = 0
            count = 0
            for pid in session_members(s.pid):
                proc = self._procs.get(pid)
                try:
                    if proc is None or not proc.is_running():
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
                del self._procs[pid]
        return usage
