"""Every process a session started, whatever group or session it moved to, and stopping
them all.

A session's command may leave the wrapper's process group: GNU ``timeout`` puts itself
in a new group, as do ``setsid``, ``set -m`` and ``os.setpgid``; a double fork leaves the
parent chain too. A stop that signals the group only leaves those running. So a
session's *tree* is found from three handles, each verified:

- **parent links** (``/proc/<pid>/stat`` field 4): the wrapper, while it lives, and every
  descendant of it, each born after its parent;
- **the wrapper's group and session**: members born after the wrapper (Linux does not
  reuse a pid while it still names a live group or session, so these ids stay a safe
  handle after the wrapper is gone, unless the pid now names another live process: then
  they are not used);
- **the environment marker**: every command of a session gets ``HERMES_PROCESS_ID=<id>``
  (engine.processes.supervisor) and passes it on, so a process born after the wrapper
  whose ``/proc/<pid>/environ`` names the session is its own, even after a double fork
  re-parented it to init.

A process whose marker names *another* session (a session this one started with
``hermes-tui run``, the output keeper) is not this one's, nor is anything below it. A
fingerprint (boot id and start ticks) is taken of each member when it is found, and
every signal goes through :func:`engine.identity.send_signal`, which checks it again
through a pidfd right before the signal. This process itself is never a member.

:func:`stop` is TERM, the grace, KILL, and is done only when nothing of the tree is
left: it looks again while it waits (a process forked meanwhile gets its TERM too) and
reports, in one line (:func:`describe`), whatever still lives.

Limits: a descendant that both cleared its environment (``env -i``) and left the parent
chain, the group and the session is not found; nor is one running as another user whose
environment cannot be read and that left every other handle.
"""

from __future__ import annotations

import os
import signal
import time
from dataclasses import dataclass, field

from engine import identity
from engine.identity import ProcStat

MARKER = b"HERMES_PROCESS_ID="
KILL_WAIT_SECONDS = 2.0  # after KILL: how long a stop looks for what is still there
POLL_SECONDS = 0.05


@dataclass(frozen=True)
class Root:
    """What names a session's tree: its id (the marker), the wrapper's pid and the
    fingerprint taken of it at spawn. ``session_id`` None: read from the live wrapper's
    environment, when it can be."""

    session_id: str | None
    pid: int | None
    fingerprint: str | None


def _marker(pid: int) -> str | None:
    """The session ``pid``'s environment names: the id, "" when none, None when its
    environment cannot be read (another user's, or gone)."""
    try:
        with open(identity.PROC / str(pid) / "environ", "rb") as fh:
            data = fh.read()
    except OSError:
        return None
    for entry in data.split(b"\0"):
        if entry.startswith(MARKER):
            return entry[len(MARKER):].decode("utf-8", errors="replace")
    return ""


class _Markers:
    """Markers read once per process (by pid and start time) across the looks of one stop."""

    def __init__(self) -> None:
        self._seen: dict[tuple[int, int], str | None] = {}

    def of(self, st: ProcStat) -> str | None:
        key = (st.pid, st.start_ticks)
        if key not in self._seen:
            self._seen[key] = _marker(st.pid)
        return self._seen[key]


def members(root: Root, markers: _Markers | None = None) -> dict[int, ProcStat]:
    """The live (non-zombie) processes of ``root``'s tree, pid -> stat (one pass over
    /proc). Empty when the root's fingerprint cannot be verified or is of another boot
    (nothing of it can run here)."""
    bid = identity.boot_id()
    fp = root.fingerprint
    if not bid or not root.pid or not identity.is_verifiable(fp):
        return {}
    boot, _sep, ticks = str(fp).partition("|")
    if boot != bid:
        return {}
    born = int(ticks)
    markers = markers or _Markers()
    stats = {st.pid: st for st in identity._live_stats()}
    wrapper = identity.read_stat(root.pid)
    ours = wrapper is not None and identity.fingerprint_of(wrapper) == fp
    pinned = wrapper is None or ours  # the wrapper's pid names no other process: its group and session are its
    own = root.session_id
    if own is None and ours:
        own = markers.of(wrapper) or None
    me = os.getpid()

    def foreign(st: ProcStat) -> bool:
        theirs = markers.of(st)
        return bool(theirs) and theirs != own

    found: dict[int, ProcStat] = {}
    if ours and root.pid in stats:
        found[root.pid] = stats[root.pid]
    for st in stats.values():
        if st.pid in found or st.pid == me or st.start_ticks < born:
            continue
        if pinned and root.pid in (st.pgrp, st.session):
            if not foreign(st):
                found[st.pid] = st
        elif own and markers.of(st) == own:
            found[st.pid] = st
    children: dict[int, list[ProcStat]] = {}
    for st in stats.values():
        children.setdefault(st.ppid, []).append(st)
    queue = list(found)
    while queue:
        parent = found[queue.pop()]
        for child in children.get(parent.pid, ()):
            if child.pid in found or child.pid == me or child.start_ticks < parent.start_ticks or foreign(child):
                continue
            found[child.pid] = child
            queue.append(child.pid)
    return found


def describe(left: dict[int, ProcStat], state: str = "still alive", limit: int = 4) -> str:
    """Processes in one line: ``2 processes still alive: 812 (timeout), 813 (sleep)``."""
    if not left:
        return ""
    from engine.text import escape_text

    shown = ", ".join(f"{pid} ({escape_text(st.name)})" for pid, st in sorted(left.items())[:limit])
    more = f" and {len(left) - limit} more" if len(left) > limit else ""
    noun = "process" if len(left) == 1 else "processes"
    return f"{len(left)} {noun} {state}: {shown}{more}"


@dataclass
class TreeStop:
    """What :func:`stop` did: every signal sent, in order, and what still lives."""

    found: int = 0  # members at the first look
    signals: list[tuple[int, str]] = field(default_factory=list)
    left: dict[int, ProcStat] = field(default_factory=dict)
    refused: list[str] = field(default_factory=list)  # why a signal was not sent (the kernel refused it)

    @property
    def stopped(self) -> bool:
        """Nothing of the tree is left."""
        return not self.left

    @property
    def attempted(self) -> bool:
        return bool(self.signals)

    @property
    def survivors(self) -> tuple[int, ...]:
        return tuple(sorted(self.left))

    def left_line(self) -> str:
        return describe(self.left)


def stop(root: Root, grace: float, *, first: dict[int, ProcStat] | None = None) -> TreeStop:
    """TERM every member of ``root``'s tree, wait up to ``grace`` seconds (looking again:
    a process started meanwhile, such as a TERM trap's clean-up, is left to run), then KILL
    whatever is left, and look until nothing
    is (at most :data:`KILL_WAIT_SECONDS`). Blocking: call it from a thread. ``first``:
    the members found already (a caller that looked first)."""
    markers = _Markers()
    current = members(root, markers) if first is None else first
    report = TreeStop(found=len(current))
    if not current:
        return report
    for pid, st in sorted(current.items()):
        _send(report, pid, identity.fingerprint_of(st), signal.SIGTERM)
    # Only what ran at the TERM gets it: a process started during the grace is most likely
    # the command's own clean-up (a TERM trap's work), left to finish; KILL ends it after.
    deadline = time.monotonic() + max(0.0, grace)
    while time.monotonic() < deadline:
        time.sleep(min(POLL_SECONDS, max(0.0, deadline - time.monotonic())))
        current = members(root, markers)
        if not current:
            return report
    killed: dict[int, str] = {}
    deadline = time.monotonic() + KILL_WAIT_SECONDS
    while current:
        for pid, st in sorted(current.items()):
            fp = identity.fingerprint_of(st)
            if killed.get(pid) != fp:
                killed[pid] = fp
                _send(report, pid, fp, signal.SIGKILL)
        if time.monotonic() >= deadline:
            break
        time.sleep(POLL_SECONDS)
        current = members(root, markers)
    report.left = current
    return report


def _send(report: TreeStop, pid: int, fp: str, sig: int) -> None:
    result = identity.send_signal(pid, fp, sig)
    if result.sent:
        report.signals.append((pid, result.signal))
    elif result.outcome is identity.SignalOutcome.ERROR:
        report.refused.append(f"{result.signal} to {pid}: {result.detail or 'refused'}")
