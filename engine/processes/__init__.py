"""Background processes: spawn, follow, yield, kill, notify.

The public surface other parts code against::

    from engine.processes import ProcessRegistry, ProcessSession, ProcessLookupFailed
    from engine.processes import SessionStatus, KillOutcome  # the states, as StrEnums
"""

from engine.processes.registry import KillReport, ProcessRegistry, SpawnFailed
from engine.processes.session import (
    EXITED,
    KILLED,
    LOST,
    RUNNING,
    KillOutcome,
    ProcessLookupFailed,
    ProcessSession,
    SessionStatus,
)

__all__ = [
    "EXITED",
    "KILLED",
    "LOST",
    "RUNNING",
    "KillOutcome",
    "KillReport",
    "ProcessLookupFailed",
    "ProcessRegistry",
    "ProcessSession",
    "SessionStatus",
    "SpawnFailed",
]
