"""Retention of finished sessions: by age and by count. Running sessions are never touched.
Folders of spawns that never started their command are removed once abandoned."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from engine.processes.registry import ProcessRegistry


def prune_finished(registry: ProcessRegistry, now: float | None = None) -> list[str]:
    """Remove finished sessions older than ``keep_finished_hours`` (by end time, or start
    time for a lost one) and, beyond ``max_finished``, the oldest first. Returns their ids."""
    cfg = registry.settings.processes
    now = time.time() if now is None else now
    finished = [s for s in registry.list(include_finished=True) if s.finished]
    finished.sort(key=lambda s: (s.ended_at or s.started_at, s.id))
    cutoff = now - cfg.keep_finished_hours * 3600.0
    doomed = [s for s in finished if (s.ended_at or s.started_at) < cutoff]
    keep = [s for s in finished if s not in doomed]
    excess = len(keep) - cfg.max_finished
    if excess > 0:
        doomed.extend(keep[:excess])
    removed = []
    for s in doomed:
        if registry.remove(s.id):
            removed.append(s.id)
    return removed + registry.remove_abandoned_starts(now)
