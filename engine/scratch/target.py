"""Where a prune works and how (paths and options), resolved once by the caller.

The detached automatic pass receives the scratch path its launcher resolved and the
home it belongs to (derived from the configured home, never from the scratch path:
a ``cache/scratch`` symlinked onto another disk must not change whose registry and
log are used).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from engine.config import Settings
from engine.home import HomeLayout
from engine.scratch.registered import RegisteredProvider, registry_provider

STAMP_NAME = ".last_prune"
SKIP_NAMES = frozenset({STAMP_NAME})
# An entry being removed is first renamed to TRASH_PREFIX + its name (see execute.py).
TRASH_PREFIX = ".scratch-prune-trash."


def is_entry_name(name: str) -> bool:
    """A top-level name the prune treats as an entry (not its stamp, not its trash)."""
    return name not in SKIP_NAMES and not name.startswith(TRASH_PREFIX)
LOCK_NAME = ".scratch-prune.lock"


@dataclass(frozen=True)
class PruneTarget:
    home: HomeLayout
    scratch_dir: Path

    @classmethod
    def of(cls, home: HomeLayout) -> PruneTarget:
        return cls(home, home.scratch_dir)

    @property
    def quarantine_dir(self) -> Path:
        return self.home.quarantine_dir

    @property
    def log_file(self) -> Path:
        return self.home.prune_log

    @property
    def lock_file(self) -> Path:
        return self.home.cache_dir / LOCK_NAME

    @property
    def stamp_file(self) -> Path:
        return self.scratch_dir / STAMP_NAME


@dataclass(frozen=True)
class PruneOptions:
    """How a pass judges. ``lineage=None`` means "this process's own lineage";
    a given lineage (the launcher's) is added to the pass's own.
    ``lineage_error`` says the launcher could not compute it: then nothing is
    signalled and every entry a live process works in is kept."""

    idle_hours: float = 24.0
    quarantine_hours: float = 12.0
    kill_grace_seconds: float = 3.0
    lineage: tuple[tuple[int, str], ...] | None = None
    lineage_error: str | None = None
    registered: RegisteredProvider | None = None  # None: nothing is registered
    # How long an entry's arrival (its top's ctime, see activity.py) counts as
    # activity; None: the idle window; 0: only writes count.
    arrival_hours: float | None = None

    def arrival_cutoff(self, now: float) -> float | None:
        hours = self.idle_hours if self.arrival_hours is None else self.arrival_hours
        return now - hours * 3600.0 if hours > 0 else None

    @classmethod
    def from_settings(
        cls,
        home: HomeLayout,
        settings: Settings,
        *,
        idle_hours: float | None = None,
        registered: RegisteredProvider | None = None,
        **kwargs,
    ) -> PruneOptions:
        s = settings.scratch
        return cls(
            idle_hours=s.idle_hours if idle_hours is None else idle_hours,
            quarantine_hours=s.quarantine_hours,
            kill_grace_seconds=s.kill_grace_seconds,
            arrival_hours=s.arrival_hours,
            registered=registered if registered is not None else registry_provider(home, settings),
            **kwargs,
        )
