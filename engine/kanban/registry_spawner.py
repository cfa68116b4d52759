"""The default spawner: a card's worker is a process session of the registry.

So a worker is spawned, followed, listed and killed like every other background
command (``hermes-tui ps`` shows it, the processes pane follows its output), it never
depends on the dispatcher that started it, and its exit is the registry's record.
"""

from __future__ import annotations

from engine.config import Settings
from engine.home import HomeLayout
from engine.kanban.workers import LaunchedWorker, WorkerExit, WorkerLaunch


class RegistrySpawner:
    def __init__(self, home: HomeLayout, settings: Settings) -> None:
        from engine.processes import ProcessRegistry

        self.registry = ProcessRegistry(home, settings)

    def launch(self, launch: WorkerLaunch) -> LaunchedWorker:
        session = self.registry.spawn(launch.command, cwd=launch.cwd, env=dict(launch.env),
                                      owner=f"kanban:{launch.task_id}", notify=False, background=True)
        return LaunchedWorker(pid=session.pid, fingerprint=session.fingerprint, process_id=session.id,
                              output_path=str(session.output_path))

    def exit_of(self, process_id: str | None, pid: int | None) -> WorkerExit | None:
        from engine.processes import ProcessLookupFailed

        if not process_id:
            return None
        try:
            session = self.registry.get(process_id)
        except ProcessLookupFailed:
            return None
        if session.running or session.exit_code is None and session.signal is None:
            return None  # "lost": no exit was recorded, and none is invented
        from engine.processes.session import SessionStatus

        return WorkerExit(code=session.exit_code, signal=session.signal,
                          by_hand=session.status is SessionStatus.KILLED)  # only a kill record makes it so

    def reap(self) -> None:
        """Collect our exited children so none lingers as a zombie."""
        self.registry.reap()
