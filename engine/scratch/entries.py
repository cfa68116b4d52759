"""The scratch entries as they are now: activity, keep reason, processes inside.

One survey feeds both the listing (``hermes-tui scratch``, the Scratch pane) and the
prune plan, so the two can never disagree about why an entry stays.
"""

from __future__ import annotations

import enum
import os
import time
from dataclasses import dataclass

from engine.fsutil import tree_size
from engine.scratch.activity import Activity, scan_many
from engine.scratch.keep import static_keep_reason
from engine.scratch.ownership import JudgedProcess, judge_snapshot
from engine.scratch.procscan import ProcScanError, scan_processes
from engine.scratch.quarantine import QuarantinedEntry, list_quarantine
from engine.scratch.target import PruneOptions, PruneTarget, is_entry_name


class EntryState(enum.StrEnum):
    """What a survey found an entry to be (printed and in ``--json`` as its value)."""

    ACTIVE = "active"  # written to within the idle window
    IDLE = "idle"  # nothing written within it: what a pass takes
    KEPT = "kept"  # a keep rule, or a process working inside, holds it
    UNKNOWN = "unknown"  # its activity could not be read: kept (fail closed)


class SurveyError(Exception):
    """The scratch folder itself cannot be listed."""


@dataclass(frozen=True)
class EntryReport:
    name: str
    path: str
    activity: Activity
    state: EntryState
    idle_seconds: float | None
    size_bytes: int | None
    kept_reason: str | None
    processes: tuple[JudgedProcess, ...]

    @property
    def pids(self) -> list[int]:
        return [j.proc.pid for j in self.processes]

    def to_json(self) -> dict:
        return {
            "name": self.name,
            "path": self.path,
            "state": self.state,
            "idle_seconds": self.idle_seconds,
            "size_bytes": self.size_bytes,
            "kept_reason": self.kept_reason,
            "pids": self.pids,
        }


@dataclass(frozen=True)
class Survey:
    target: PruneTarget
    now: float
    cutoff: float
    idle_hours: float
    entries: tuple[EntryReport, ...]
    processes: tuple[JudgedProcess, ...]  # every judged process (scratch and quarantine)
    process_error: str | None  # the process check failed: nothing may be deleted
    quarantine: tuple[QuarantinedEntry, ...]


class SizeCache:
    """Sizes of entries the activity scan did not walk fully (active ones), kept for
    ``max_age`` seconds so a pane refreshing every few seconds does not walk a huge
    active tree every time. Only for display: the prune never uses it."""

    def __init__(self, max_age: float = 120.0):
        self.max_age = max_age
        self._sizes: dict[str, tuple[float, int]] = {}

    def size(self, path: str, now: float) -> int:
        hit = self._sizes.get(path)
        if hit is not None and now - hit[0] < self.max_age:
            return hit[1]
        size = tree_size(path)
        self._sizes[path] = (now, size)
        return size

    def forget_except(self, paths: set[str]) -> None:
        for p in [p for p in self._sizes if p not in paths]:
            del self._sizes[p]


def list_entry_paths(target: PruneTarget) -> list[tuple[str, str]]:
    """(name, path) of the top-level entries, sorted by name; the stamp and the
    pruner's trash are not entries."""
    root = os.fspath(target.scratch_dir)
    try:
        names = os.listdir(root)
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise SurveyError(f"cannot list {root}: {exc.strerror or exc}") from None
    return [(n, os.path.join(root, n)) for n in sorted(names) if is_entry_name(n)]


def _activity_reason(act: Activity) -> str | None:
    if act.failed:
        return f"activity scan failed ({act.error}), left untouched"
    return None


def survey_scratch(
    target: PruneTarget,
    options: PruneOptions,
    *,
    now: float | None = None,
    with_sizes: bool = False,
    size_cache: SizeCache | None = None,
) -> Survey:
    """Scan every entry (in parallel processes when there are many), the keep rules
    and /proc. ``with_sizes`` also measures entries the activity walk did not finish
    (active ones), for listings; the prune does not need it. Without a ``size_cache``
    the activity walks themselves go to the end; with one (the pane, refreshing every
    few seconds) they stop early and active sizes come from the cache."""
    now = time.time() if now is None else now
    cutoff = now - options.idle_hours * 3600.0
    named = list_entry_paths(target)
    # A listing without a cache wants every size: one full walk per entry gives both
    # the state and the size (an active entry is not walked twice).
    activities = scan_many([p for _n, p in named], cutoff, full=with_sizes and size_cache is None)
    process_error = None
    judged: list[JudgedProcess] = []
    try:
        snapshot = scan_processes([os.fspath(target.scratch_dir), os.fspath(target.quarantine_dir)])
        judged = judge_snapshot(snapshot, target, options)
    except ProcScanError as exc:
        process_error = str(exc)
    except Exception as exc:  # a process check that raises: nothing is deleted this pass
        process_error = f"{type(exc).__name__}: {exc}"
    by_entry: dict[str, list[JudgedProcess]] = {}
    for j in judged:
        if j.area == "scratch" and j.entry is not None:
            by_entry.setdefault(j.entry, []).append(j)
    reports = []
    for (name, path), act in zip(named, activities, strict=True):
        procs = tuple(by_entry.get(name, ()))
        keeper = next((j for j in procs if j.keeps), None)
        rule = static_keep_reason(path) or (keeper.keep_reason() if keeper else None)
        if rule is None and act.idle and process_error:
            rule = f"process check failed ({process_error}), nothing is deleted"
        if rule is not None:
            state, reason = EntryState.KEPT, rule
        elif act.failed:
            state, reason = EntryState.UNKNOWN, _activity_reason(act)
        elif act.touched:
            state, reason = EntryState.ACTIVE, None
        else:
            state, reason = EntryState.IDLE, None
        idle_s = None
        if not act.failed and act.newest_mtime is not None:
            idle_s = max(0.0, now - act.newest_mtime)
        size = act.size_bytes
        if size is None and with_sizes:
            size = size_cache.size(path, now) if size_cache is not None else tree_size(path)
        reports.append(EntryReport(name, path, act, state, idle_s, size, reason, procs))
    if size_cache is not None:
        size_cache.forget_except({p for _n, p in named})
    return Survey(
        target=target,
        now=now,
        cutoff=cutoff,
        idle_hours=options.idle_hours,
        entries=tuple(reports),
        processes=tuple(judged),
        process_error=process_error,
        quarantine=tuple(list_quarantine(target.quarantine_dir)),
    )
