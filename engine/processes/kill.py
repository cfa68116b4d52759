"""Killing a session: the verified TERM, grace, KILL of its process group.

:meth:`engine.processes.registry.ProcessRegistry.kill` looks the session up and hands
it here. Nothing is signalled whose identity is not verified right before the signal:
a session's leader through the fingerprint taken at spawn, a lost session's leftovers
each through its own (born in this boot after the wrapper, and naming the session in
its environment), hermes-agent's processes through the start ticks its list records.
The intent is written first (``killed``, pending), so whoever looks while the command
dies of the TERM sees it killed, not crashed; the record is completed or removed after.
"""

from __future__ import annotations

import os
import time

from engine.processes import session as sess
from engine.processes.session import KillOutcome, ProcessSession, SessionSource

TYPE_CHECKING = False  # as in the registry: a kill must not pay for typing
if TYPE_CHECKING:
    from engine.processes.kill_report import KillReport
    from engine.processes.registry import ProcessRegistry


def kill_session(registry: ProcessRegistry, s: ProcessSession, grace: float | None) -> KillReport:
    """Verified terminate of the session's process group (TERM, grace, KILL).

    A leader whose fingerprint no longer matches is never signalled
    (``pid_recycled``); survivors are reported and the session stays running. A lost
    session's group members left behind are signalled only each through its own
    fingerprint (:func:`_kill_orphans`); a hermes-agent process only while its list
    still names it (:func:`_kill_hermes`).
    """
    from engine import identity
    from engine.fsutil import atomic_write_json
    from engine.processes.kill_report import KillReport

    if s.source is SessionSource.HERMES:
        return _kill_hermes(registry, s, grace)
    base = dict(id=s.id, pid=s.pid, command=s.command)
    if s.status is sess.SessionStatus.LOST and _pid_reused(s):
        return KillReport(**base, status=s.status, outcome=KillOutcome.PID_RECYCLED,
                          detail=f"pid {s.pid} now belongs to another process: not signalled")
    if s.status is sess.SessionStatus.LOST:
        verified, unverified = _orphaned_group(s)
        if verified:
            return _kill_orphans(registry, s, verified, unverified, grace)
        if unverified:
            return KillReport(**base, status=s.status, outcome=KillOutcome.UNVERIFIED,
                              detail=f"its wrapper is gone and {len(unverified)} process(es) left in its group "
                              "could not be verified as its own: not signalled")
    if s.finished:
        return KillReport(**base, status=s.status, outcome=KillOutcome.ALREADY_FINISHED,
                          detail=f"already {s.exit_text()}")
    if not identity.is_verifiable(s.fingerprint):
        return KillReport(**base, status=s.status, outcome=KillOutcome.UNVERIFIED,
                          detail="no fingerprint was taken at spawn, so its pid is never signalled")
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
        report = identity.terminate(s.pid, s.fingerprint, grace)
    except BaseException:
        kill_file.unlink(missing_ok=True)
        raise
    registry.reap()
    signals = tuple(report.signals)
    survivors = tuple(report.survivors)
    record = sess.read_exit_record(s.dir)
    if report.outcome is identity.SignalOutcome.SENT and (record is None or record.signal is not None):
        last = "SIGKILL" if any(sig == "SIGKILL" for _p, sig in signals) else "SIGTERM"
        atomic_write_json(kill_file, {
            "pending": bool(survivors), "signal": last, "at": time.time(), "by_pid": os.getpid(),
            "signals": [{"pid": p, "signal": n} for p, n in signals],
        })
    else:
        kill_file.unlink(missing_ok=True)  # nothing was sent, or it had exited normally on its own
    registry.forget_finished(s.id)
    after = registry.get(s.id)
    if report.outcome is identity.SignalOutcome.SENT:
        if survivors:
            outcome, detail = KillOutcome.SURVIVORS, f"{len(survivors)} process(es) still alive after SIGKILL"
        elif after.status is sess.SessionStatus.KILLED:
            outcome, detail = KillOutcome.KILLED, ""
        else:
            outcome, detail = KillOutcome.GONE, f"it ended on its own ({after.exit_text()})"
    elif report.outcome is identity.SignalOutcome.PID_RECYCLED:
        outcome, detail = KillOutcome.PID_RECYCLED, f"pid {s.pid} now belongs to another process: not signalled"
    elif report.outcome is identity.SignalOutcome.GONE:
        outcome, detail = KillOutcome.GONE, "the process had already exited"
    elif report.outcome is identity.SignalOutcome.UNVERIFIED:
        outcome, detail = KillOutcome.UNVERIFIED, report.detail or "identity not verified: not signalled"
    else:
        outcome, detail = KillOutcome.ERROR, report.detail or "the kernel refused the signal"
    return KillReport(**base, status=after.status, outcome=outcome, detail=detail,
                      signals=signals, survivors=survivors)


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


def _kill_orphans(registry: ProcessRegistry, s: ProcessSession, members: dict[int, str], unverified: list[int],
                  grace: float | None) -> KillReport:
    """The wrapper of ``s`` is gone but its command runs on: TERM each verified member
    of its process group through its own fingerprint, grace, KILL survivors."""
    import signal as signal_mod

    from engine import identity
    from engine.fsutil import atomic_write_json
    from engine.processes.kill_report import KillReport

    grace = registry.kill_grace(grace)
    kill_file = s.dir / sess.KILLED_FILE
    atomic_write_json(kill_file, {"pending": True, "signal": None, "at": time.time(), "by_pid": os.getpid()})
    signals: list[tuple[int, str]] = []
    for pid, fp in sorted(members.items()):
        if identity.send_signal(pid, fp, signal_mod.SIGTERM).sent:
            signals.append((pid, "SIGTERM"))
    living = identity.wait_gone(members, time.monotonic() + grace)
    for pid, fp in sorted(living.items()):
        if identity.send_signal(pid, fp, signal_mod.SIGKILL).sent:
            signals.append((pid, "SIGKILL"))
    survivors = tuple(sorted(identity.wait_gone(living, time.monotonic() + 1.0)))
    if not signals:
        kill_file.unlink(missing_ok=True)
        return KillReport(id=s.id, pid=s.pid, command=s.command, status=s.status, outcome=KillOutcome.GONE,
                          detail="its wrapper is gone and its group ended before any signal")
    last = "SIGKILL" if any(sig == "SIGKILL" for _p, sig in signals) else "SIGTERM"
    atomic_write_json(kill_file, {
        "pending": bool(survivors), "signal": last, "at": time.time(), "by_pid": os.getpid(),
        "signals": [{"pid": p, "signal": n} for p, n in signals], "orphans": True,
    })
    registry.forget_finished(s.id)
    after = registry.get(s.id)
    detail = (f"its wrapper (pid {s.pid}) was gone; signalled the {len(members)} process(es) left in its "
              "group, each verified by its own fingerprint")
    if unverified:
        detail += f"; {len(unverified)} unverified one(s) not signalled: {', '.join(map(str, unverified))}"
    outcome = KillOutcome.SURVIVORS if survivors else KillOutcome.KILLED
    return KillReport(id=s.id, pid=s.pid, command=s.command, status=after.status, outcome=outcome,
                      detail=detail, signals=tuple(signals), survivors=survivors)


def _orphaned_group(s: ProcessSession) -> tuple[dict[int, str], list[int]]:
    """Live members of the process group a lost session's wrapper led, split into the
    verified (pid -> own fingerprint) and the rest. A member is verified when it was
    born in this boot after the wrapper, and its environment names this session
    (``HERMES_PROCESS_ID``, set for every command we spawn)."""
    from engine import identity

    if not identity.is_verifiable(s.fingerprint):
        return {}, []
    boot, _sep, ticks = s.fingerprint.partition("|")
    verified: dict[int, str] = {}
    unverified: list[int] = []
    marker = f"HERMES_PROCESS_ID={s.id}".encode()
    for pid, stat in sorted(identity.group_members(s.pid).items()):
        fp = identity.fingerprint_of(stat)
        if fp.partition("|")[0] == boot and stat.start_ticks >= int(ticks) and marker in _environ(pid):
            verified[pid] = fp
        else:
            unverified.append(pid)
    return verified, unverified


def _environ(pid: int) -> list[bytes]:
    from engine import identity

    try:
        with open(identity.PROC / str(pid) / "environ", "rb") as fh:
            return fh.read().split(b"\0")
    except OSError:
        return []


def _pid_reused(s: ProcessSession) -> bool:
    """The session's pid exists now but is another process (fingerprint differs)."""
    from engine import identity

    now = identity.fingerprint(s.pid)
    return now != identity.UNVERIFIED and identity.is_verifiable(s.fingerprint) and now != s.fingerprint
