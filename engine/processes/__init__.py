"""Background processes: spawn, follow, yield, kill, notify.

The public surface other parts code against::

    from engine.processes import ProcessRegistry, ProcessSession, ProcessLookupFailed
"""

from engine.processes.registry import KillReport, ProcessRegistry, SpawnFailed
from engine.processes.session import (
    EXITED,
    KILLED,
    LOST,
    RUNNING,
    ProcessLookupFailed,
    ProcessSession,
)

__all__ = [
    "EXITED",
    "KILLED",
    "LOST",
    "RUNNING",
    "KillReport",
    "ProcessLookupFailed",
    "ProcessRegistry",
    "ProcessSession",
    "SpawnFailed",
]
