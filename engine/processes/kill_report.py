"""What a kill did (its own module: a listing never needs it)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engine.processes.session import KILL_SUCCEEDED, KillOutcome, SessionStatus


@dataclass(frozen=True)
class KillReport:
    """What a kill did. ``signals`` are (pid, signal name) in the order sent."""

    id: str
    pid: int
    command: str
    status: SessionStatus  # the session's status after the attempt
    outcome: KillOutcome
    detail: str = ""
    signals: tuple[tuple[int, str], ...] = ()
    survivors: tuple[int, ...] = ()

    @property
    def ok(self) -> bool:
        return self.outcome in KILL_SUCCEEDED

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "pid": self.pid,
            "status": self.status,
            "outcome": self.outcome,
            "detail": self.detail,
            "signals": [{"pid": p, "signal": s} for p, s in self.signals],
            "survivors": list(self.survivors),
        }
