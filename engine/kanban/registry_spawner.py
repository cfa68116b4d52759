"""The default spawner: a card's worker is a process session of the registry.

So a worker is spawned, followed, listed and killed like every other background
command (``hermes-tui ps`` shows it, the processes pane follows its output), it never
depends on the dispatcher that started it, and its exit is the registry's record.

A launch's token is its session's id, chosen by the dispatcher and recorded on the run
before the spawn; the session's ``meta.json`` also names the card and run (``labels``).
So a launch the dispatcher could not record (it was stopped) is found again by its id.
"""

from __future__ import annotations

import os

from engine.config import Settings
from engine.home import HomeLayout
from engine.kanban.workers import LaunchedWorker, LaunchLookup, LaunchState, WorkerExit, WorkerLaunch

# A wrapper found at its gate moves on within moments (its spawner is gone: it reads the
# end of the pipe and leaves; or it read "go" and is about to run the command): how long
# a lookup waits to see which, before it holds the card and looks again next tick.
GATE_SETTLE_SECONDS = 2.0


def _past_gate(d, pid: int, fp: str) -> bool:
    """The wrapper ``pid`` has passed its gate (its stdin is no longer the spawner's
    pipe), or ended (False only while it may still be waiting there: then True once it
    moves on, or False after GATE_SETTLE_SECONDS or once it has ended at the gate)."""
    import time

    from engine import identity
    from engine.processes import session as sess

    deadline = time.monotonic() + GATE_SETTLE_SECONDS
    while True:
        try:
            at_gate = os.readlink(f"/proc/{pid}/fd/0").startswith("pipe:")
        except OSError:
            at_gate = False  # gone (looked at below), or unreadable: not known to be at its gate
        if not identity.is_alive(pid, fp):
            return not (d / sess.NOT_STARTED_FILE).exists()
        if not at_gate:
            return True
        if (d / sess.NOT_STARTED_FILE).exists() or time.monotonic() >= deadline:
            return False
        time.sleep(0.01)


class RegistrySpawner:
    def __init__(self, home: HomeLayout, settings: Settings) -> None:
        from engine.processes import ProcessRegistry

        self.registry = ProcessRegistry(home, settings)

    def launch(self, launch: WorkerLaunch) -> LaunchedWorker:
        session = self.registry.spawn(launch.command, cwd=launch.cwd, env=dict(launch.env),
                                      owner=f"kanban:{launch.task_id}", notify=False, background=True,
                                      session_id=launch.token or None,
                                      labels={"kanban_task": launch.task_id, "kanban_run": launch.run_id})
        return LaunchedWorker(pid=session.pid, fingerprint=session.fingerprint, session_id=session.id,
                              output_path=str(session.output_path))

    def wait_exit(self, session_id: str) -> bool:
        """Block until that worker, a child this registry started, exits (False at once
        for any other session: its exit is found by the next tick's reap)."""
        popen = self.registry.popen_of(session_id)
        if popen is None:
            return False
        try:
            popen.wait()
        except OSError:  # reaped elsewhere meanwhile: it has exited all the same
            pass
        return True

    def find_launch(self, token: str, task_id: str, run_id: int) -> LaunchLookup:
        """What the session of ``token`` says about an unrecorded launch.

        The spawn makes the folder, starts the wrapper at its gate, writes ``meta.json``
        (pid, fingerprint), then releases the gate. A spawner that is gone can release
        nothing any more (its end of the gate's pipe closed with it), so: no folder (now
        fenced, so no late spawn can take it), or a folder without its record, or the
        wrapper's ``not_started`` mark, means the command never ran and never will."""
        from engine import identity
        from engine.processes import session as sess
        from engine.processes.registry import is_session_id

        reg = self.registry
        if not is_session_id(token):
            return LaunchLookup(LaunchState.UNCERTAIN, f"its launch token {token!r} is not a process session id")
        if reg.fence_session_id(token):
            return LaunchLookup(LaunchState.NOT_STARTED, f"no session {token} was ever created")
        d = reg.session_dir(token)
        try:
            meta = sess.read_meta(d)
        except sess.SessionNotStarted:
            return LaunchLookup(LaunchState.NOT_STARTED,
                                f"session {token} was never recorded, so its wrapper was never released")
        except sess.SessionCorrupt as exc:
            return LaunchLookup(LaunchState.UNCERTAIN, f"session {exc.message}")
        labels = meta.get("labels") if isinstance(meta.get("labels"), dict) else {}
        if (labels.get("kanban_task"), labels.get("kanban_run")) != (task_id, run_id):
            return LaunchLookup(LaunchState.UNCERTAIN, f"session {token} does not name card {task_id} run {run_id}")
        if (d / sess.NOT_STARTED_FILE).exists():
            return LaunchLookup(LaunchState.NOT_STARTED, f"session {token} ended at its gate: its command never ran")
        pid, fp = meta["pid"], str(meta.get("fingerprint") or identity.UNVERIFIED)
        state = identity.liveness(pid, fp)
        if state is identity.Liveness.UNVERIFIED_ALIVE:
            return LaunchLookup(LaunchState.UNCERTAIN, f"session {token} (pid {pid}) has no verified identity")
        if state is identity.Liveness.ALIVE and not _past_gate(d, pid, fp):
            if (d / sess.NOT_STARTED_FILE).exists():
                return LaunchLookup(LaunchState.NOT_STARTED,
                                    f"session {token} ended at its gate: its command never ran")
            if identity.is_alive(pid, fp):
                return LaunchLookup(LaunchState.UNCERTAIN, f"session {token}'s wrapper (pid {pid}) is still "
                                    "at its gate; looked at again next tick")
        # Alive (verified), or gone: either way it was ours and may have run; recorded
        # now, the usual phases look after it (a gone worker is judged by its exit).
        return LaunchLookup(LaunchState.STARTED, f"session {token} found",
                            LaunchedWorker(pid=pid, fingerprint=fp, session_id=token,
                                           output_path=str(d / sess.OUTPUT_FILE)))

    def exit_of(self, session_id: str | None, pid: int | None) -> WorkerExit | None:
        from engine.processes import ProcessLookupFailed
        from engine.processes import session as sess

        if not session_id:
            return None
        try:
            session = self.registry.get(session_id)
        except ProcessLookupFailed:
            return None
        if session.running:
            return None
        if (session.dir / sess.NOT_STARTED_FILE).exists():
            return WorkerExit(code=session.exit_code, signal=session.signal, started=False)
        if session.exit_code is None and session.signal is None:
            return None  # "lost": no exit was recorded, and none is invented
        from engine.processes.session import SessionStatus

        return WorkerExit(code=session.exit_code, signal=session.signal,
                          by_hand=session.status is SessionStatus.KILLED)  # only a kill record makes it so

    def reap(self) -> None:
        """Collect our exited children so none lingers as a zombie."""
        self.registry.reap()
