"""Killing a session: the verified TERM, grace, KILL of everything it runs (its tree).

:meth:`engine.processes.registry.ProcessRegistry.kill` looks the session up and hands
it here. Nothing is signalled whose identity is not verified right before the signal:
a session's wrapper through the fingerprint taken at spawn, every other process of its
tree (engine.processes.tree: its group, its session, its descendants, its environment
marker) through its own, taken when it is found; hermes-agent's processes through the
start ticks its list records.
The intent is written first (``killed``, pending), so whoever looks while the command
dies of the TERM sees it killed, not crashed; the record is completed or removed after.
"""

from __future__ import annotations

import os
import time

from engine.fsutil import atomic_write_json
from engine.processes import session as sess
from engine.processes.session import KillOutcome, ProcessSession, SessionSource

TYPE_CHECKING = False  # as in the registry: a kill must not pay for typing
if TYPE_CHECKING:
    from engine.processes.kill_report import KillReport
    from engine.processes.registry import ProcessRegistry


def kill_session(registry: ProcessRegistry, s: ProcessSession, grace: float | None) -> KillReport:
    """Verified stop of everything the session runs (TERM, grace, KILL): its wrapper and
    every process it started, in whatever group or session (:mod:`engine.processes.tree`).

    Done only when none is left: survivors are reported (one line saying what lives) and
    the session stays running. A wrapper whose fingerprint no longer matches is never
    signalled (``pid_recycled``). A session that ended (or lost its wrapper) but left
    processes running has those stopped, each verified by its own fingerprint; a
    hermes-agent process only while its list still names it (:func:`_kill_hermes`).
    """
    from engine import identity
    from engine.processes import tree
    from engine.processes.kill_report import KillReport

    if s.source is SessionSource.HERMES:
        return _kill_hermes(registry, s, grace)
    base = dict(id=s.id, pid=s.pid, command=s.command)
    if not identity.is_verifiable(s.fingerprint):
        if s.finished:
            return KillReport(**base, status=s.status, outcome=KillOutcome.ALREADY_FINISHED,
                              detail=f"already {s.exit_text()}")
        return KillReport(**base, status=s.status, outcome=KillOutcome.UNVERIFIED,
                          detail="no fingerprint was taken at spawn, so its pid is never signalled")
    root = tree.Root(s.id, s.pid, s.fingerprint)
    first = tree.members(root)
    if s.finished:
        if not first:
            if s.status is sess.SessionStatus.LOST and _pid_reused(s):
                return KillReport(**base, status=s.status, outcome=KillOutcome.PID_RECYCLED,
                                  detail=f"pid {s.pid} now belongs to another process: not signalled")
            return KillReport(**base, status=s.status, outcome=KillOutcome.ALREADY_FINISHED,
                              detail=f"already {s.exit_text()}")
        if s.status is sess.SessionStatus.LOST:
            return _kill_orphans(registry, s, root, first, grace)
        return _kill_leftovers(registry, s, root, first, grace)
    if identity.liveness(s.pid, s.fingerprint) is identity.Liveness.RECYCLED:
        return KillReport(**base, status=s.status, outcome=KillOutcome.PID_RECYCLED,
                          detail=f"pid {s.pid} now belongs to another process: not signalled")
    grace = registry.kill_grace(grace)
    kill_file = s.dir / sess.KILLED_FILE
    # Intent first: whoever looks while the command dies of our TERM sees "killed".
    try:
        atomic_write_json(kill_file, {"pending": True, "signal": None, "at": time.time(), "by_pid": os.getpid()})
    except PermissionError:
        raise  # another user's session: the CLI's one line for that
    except OSError as exc:  # a read-only or full file system: a kill without its record would read as a crash
        return KillReport(**base, status=s.status, outcome=KillOutcome.ERROR,
                          detail=f"cannot record the kill in {s.dir} ({exc.strerror or exc}): not signalled")
    try:
        report = tree.stop(root, grace, first=first)
    except BaseException:
        kill_file.unlink(missing_ok=True)
        raise
    registry.reap()
    signals = tuple(report.signals)
    record = sess.read_exit_record(s.dir)
    if report.attempted and (record is None or record.signal is not None):
        last = "SIGKILL" if any(sig == "SIGKILL" for _p, sig in signals) else "SIGTERM"
        atomic_write_json(kill_file, {
            "pending": not report.stopped, "signal": last, "at": time.time(), "by_pid": os.getpid(),
            "signals": [{"pid": p, "signal": n} for p, n in signals],
        })
    else:
        kill_file.unlink(missing_ok=True)  # nothing was sent, or it had exited normally on its own
    registry.forget_finished(s.id)
    after = registry.get(s.id)
    if not report.stopped and not report.attempted:
        outcome = KillOutcome.ERROR
        detail = f"{report.refused[0] if report.refused else 'nothing could be signalled'}; {report.left_line()}"
    elif not report.stopped:
        outcome, detail = KillOutcome.SURVIVORS, f"{report.left_line()} after SIGKILL"
    elif not report.attempted:
        outcome, detail = KillOutcome.GONE, "the process had already exited"
    elif after.status is sess.SessionStatus.KILLED:
        outcome, detail = KillOutcome.KILLED, _outside_words(s, first)
    else:
        outcome, detail = KillOutcome.GONE, f"it ended on its own ({after.exit_text()})"
    return KillReport(**base, status=after.status, outcome=outcome, detail=detail,
                      signals=signals, survivors=report.survivors)


def _outside_words(s: ProcessSession, found: dict) -> str:
    """"" or what the stop reached outside the wrapper's group (a ``timeout``, a ``setsid``)."""
    from engine.processes import tree

    outside = {pid: st for pid, st in found.items() if st.pgrp != s.pid}
    if not outside:
        return ""
    return "also stopped " + tree.describe(outside, "outside its group")


def _kill_leftovers(registry: ProcessRegistry, s: ProcessSession, root, first: dict,
                    grace: float | None) -> KillReport:
    """``s`` ended (its exit is recorded) but processes it started run on: stop those,
    each verified. Its exit stays its own: no kill record is written."""
    from engine.processes import tree
    from engine.processes.kill_report import KillReport

    report = tree.stop(root, registry.kill_grace(grace), first=first)
    registry.reap()
    if report.stopped:
        outcome = KillOutcome.LEFTOVERS_KILLED
        detail = f"its command had ended ({s.exit_text()}); stopped {tree.describe(first, 'it left running')}"
    else:
        outcome, detail = KillOutcome.SURVIVORS, f"its command had ended ({s.exit_text()}); {report.left_line()}"
    return KillReport(id=s.id, pid=s.pid, command=s.command, status=s.status, outcome=outcome, detail=detail,
                      signals=tuple(report.signals), survivors=report.survivors)


def _kill_hermes(registry: ProcessRegistry, s: ProcessSession, grace: float | None) -> KillReport:
    """TERM (grace, KILL) a process hermes-agent started, only when processes.json,
    read again now, still names it and its start ticks verify the live pid. Nothing
    of hermes's is written: no kill record, no change to processes.json."""
    from engine import identity
    from engine.processes.hermes_sessions import signal_target
    from engine.processes.kill_report import KillReport

    base = dict(id=s.id, pid=s.pid, command=s.command)
    target = signal_target(registry.home.root, s.id)
    if target.fingerprint is None:
        return KillReport(**base, status=sess.SessionStatus.LOST if target.refusal is KillOutcome.GONE else s.status,
                          outcome=target.refusal, detail=target.detail)
    grace = registry.kill_grace(grace)
    report = identity.terminate(s.pid, target.fingerprint, grace)
    signals, survivors = tuple(report.signals), tuple(report.survivors)
    if report.outcome is identity.SignalOutcome.SENT:
        outcome = KillOutcome.SURVIVORS if survivors else KillOutcome.KILLED
        detail = f"{len(survivors)} process(es) still alive after SIGKILL" if survivors else ""
    elif report.outcome is identity.SignalOutcome.GONE:
        outcome, detail = KillOutcome.GONE, "the process had already exited"
    elif report.outcome is identity.SignalOutcome.PID_RECYCLED:
        outcome, detail = KillOutcome.PID_RECYCLED, f"pid {s.pid} now belongs to another process: not signalled"
    else:
        outcome, detail = KillOutcome(report.outcome.value), report.detail or "not signalled"
    status = {KillOutcome.SURVIVORS: sess.SessionStatus.RUNNING, KillOutcome.KILLED: sess.SessionStatus.KILLED,
              KillOutcome.GONE: sess.SessionStatus.LOST}.get(outcome, s.status)
    return KillReport(**base, status=status, outcome=outcome, detail=detail, signals=signals,
                      survivors=survivors)


def _kill_orphans(registry: ProcessRegistry, s: ProcessSession, root, first: dict,
                  grace: float | None) -> KillReport:
    """The wrapper of ``s`` is gone without an exit record but its command runs on: stop
    every process of its tree (each verified by its own fingerprint), and record the kill."""
    from engine.processes import tree
    from engine.processes.kill_report import KillReport

    grace = registry.kill_grace(grace)
    kill_file = s.dir / sess.KILLED_FILE
    atomic_write_json(kill_file, {"pending": True, "signal": None, "at": time.time(), "by_pid": os.getpid()})
    report = tree.stop(root, grace, first=first)
    signals = report.signals
    if not signals:
        kill_file.unlink(missing_ok=True)
        return KillReport(id=s.id, pid=s.pid, command=s.command, status=s.status, outcome=KillOutcome.GONE,
                          detail="its wrapper is gone and what it left ended before any signal")
    last = "SIGKILL" if any(sig == "SIGKILL" for _p, sig in signals) else "SIGTERM"
    atomic_write_json(kill_file, {
        "pending": not report.stopped, "signal": last, "at": time.time(), "by_pid": os.getpid(),
        "signals": [{"pid": p, "signal": n} for p, n in signals], "orphans": True,
    })
    registry.forget_finished(s.id)
    after = registry.get(s.id)
    detail = (f"its wrapper (pid {s.pid}) was gone; signalled the {len(first)} process(es) left of it, "
              "each verified by its own fingerprint")
    if not report.stopped:
        detail += f"; {report.left_line()}"
    outcome = KillOutcome.KILLED if report.stopped else KillOutcome.SURVIVORS
    return KillReport(id=s.id, pid=s.pid, command=s.command, status=after.status, outcome=outcome,
                      detail=detail, signals=tuple(signals), survivors=report.survivors)


def _pid_reused(s: ProcessSession) -> bool:
    """The session's pid exists now but is another process (fingerprint differs)."""
    from engine import identity

    now = identity.fingerprint(s.pid)
    return now != identity.UNVERIFIED and identity.is_verifiable(s.fingerprint) and now != s.fingerprint
