"""The scratch entries as they are now: activity, keep reason, processes inside.

One survey feeds both the listing (``hermes-tui scratch``, the Scratch pane) and the
prune plan, so the two can never disagree about why an entry stays.
"""

from __future__ import annotations

import contextlib
import enum
import os
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

from engine.fsutil import tree_size
from engine.scratch.activity import Activity, TouchState, iter_scan, walk_start_moment
from engine.scratch.keep import static_keep_reason
from engine.scratch.mounts import MountTable, mount_reason
from engine.scratch.ownership import JudgedProcess, judge_snapshot
from engine.scratch.procscan import ProcScanError, scan_processes
from engine.scratch.quarantine import QuarantinedEntry, list_quarantine
from engine.scratch.target import TRASH_PREFIX, PruneOptions, PruneTarget, is_entry_name
from engine.text import human_duration


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
    # Seconds since the entry arrived, when its arrival (not a write) is what makes it
    # active; then ``idle_seconds`` is the same age.
    arrived_seconds: float | None = None

    @property
    def age_text(self) -> str:
        """The Idle column: ``arrived 3m ago`` when the arrival keeps it, else the
        age of the newest write (``3d 4h``), ``?`` when unknown."""
        if self.arrived_seconds is not None:
            return f"arrived {human_duration(self.arrived_seconds)} ago"
        return human_duration(self.idle_seconds)

    @property
    def pids(self) -> list[int]:
        return [j.proc.pid for j in self.processes]

    def to_json(self) -> dict:
        return {
            "name": self.name,
            "path": self.path,
            "state": self.state,
            "arrived_seconds": self.arrived_seconds,
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
    # The moment the entries' walks began, as the filesystem dates writes (real time,
    # whatever ``now`` says): a write after it may have been missed by them.
    walked_at: float = 0.0
    arrival_cutoff: float | None = None  # a top ctime at or after it is an arrival (activity)


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


# What a listing says of a trash entry a killed pass left (the next pass renames it back).
LEFTOVER_REASON = "being removed, will be put back (left by an interrupted pass)"


def _list_names(target: PruneTarget) -> list[str]:
    root = os.fspath(target.scratch_dir)
    try:
        return sorted(os.listdir(root))
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise SurveyError(f"cannot list {root}: {exc.strerror or exc}") from None


def list_entry_paths(target: PruneTarget, names: list[str] | None = None) -> list[tuple[str, str]]:
    """(name, path) of the top-level entries, sorted by name; the stamp and the
    pruner's trash are not entries."""
    root = os.fspath(target.scratch_dir)
    names = _list_names(target) if names is None else names
    return [(n, os.path.join(root, n)) for n in names if is_entry_name(n)]


def _leftover_reports(target: PruneTarget, names: list[str], by_entry: dict, with_sizes: bool
                      ) -> list[EntryReport]:
    """A trash entry (``TRASH_PREFIX + name``) is only there while a pass deletes it;
    when no pass runs, a killed one left it, and the next pass puts it back under its
    name. Listed under that name, kept, so nobody thinks it is gone."""
    root = os.fspath(target.scratch_dir)
    out = []
    trash = [n for n in names if n.startswith(TRASH_PREFIX)]
    reason = LEFTOVER_REASON if trash and not _pass_running(target) else "being removed by a running prune"
    for n in trash:
        path = os.path.join(root, n)
        size = tree_size(path) if with_sizes else None
        out.append(EntryReport(n[len(TRASH_PREFIX):], path, Activity(TouchState.SCAN_FAILED, error=LEFTOVER_REASON),
                               EntryState.KEPT, None, size, reason, tuple(by_entry.get(n, ()))))
    return out


def _pass_running(target: PruneTarget) -> bool:
    """Does a pass hold the home's prune lock now? Probed read-only (never created)
    and without blocking; unknown counts as not running."""
    import fcntl

    try:
        fd = os.open(target.lock_file, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)
    return False


def _activity_reason(act: Activity) -> str | None:
    if act.failed:
        return f"activity scan failed ({act.error}), left untouched"
    return None


@dataclass
class SurveyStream:
    """A survey whose entries come one at a time (:func:`stream_survey`): everything a
    :class:`Survey` has, but ``entries`` is an iterator, in name order, each report made
    as its walk ends, so a listing of 100,000 entries holds one at a time. Iterate it
    once; ``count`` says how many it will give."""

    target: PruneTarget
    now: float
    cutoff: float
    idle_hours: float
    count: int
    entries: Iterator[EntryReport]
    processes: tuple[JudgedProcess, ...]
    process_error: str | None
    quarantine: tuple[QuarantinedEntry, ...]
    walked_at: float = 0.0
    arrival_cutoff: float | None = None


def survey_scratch(
    target: PruneTarget,
    options: PruneOptions,
    *,
    now: float | None = None,
    with_sizes: bool = False,
    size_cache: SizeCache | None = None,
    stop: threading.Event | None = None,
) -> Survey:
    """Every entry's report at once: :func:`stream_survey` gathered into a Survey."""
    stream = stream_survey(target, options, now=now, with_sizes=with_sizes, size_cache=size_cache, stop=stop)
    return Survey(
        target=stream.target,
        now=stream.now,
        cutoff=stream.cutoff,
        idle_hours=stream.idle_hours,
        entries=tuple(stream.entries),
        processes=stream.processes,
        process_error=stream.process_error,
        quarantine=stream.quarantine,
        walked_at=stream.walked_at,
        arrival_cutoff=stream.arrival_cutoff,
    )


def stream_survey(
    target: PruneTarget,
    options: PruneOptions,
    *,
    now: float | None = None,
    with_sizes: bool = False,
    size_cache: SizeCache | None = None,
    stop: threading.Event | None = None,
) -> SurveyStream:
    """Scan every entry (in parallel processes when there are many), the keep rules
    and /proc. ``with_sizes`` also measures entries the activity walk did not finish
    (active ones), for listings; the prune does not need it. Without a ``size_cache``
    the activity walks themselves go to the end; with one (the pane, refreshing every
    few seconds) they stop early and active sizes come from the cache.

    /proc is read first (each report needs the processes inside its entry), then the
    entries are walked as the caller iterates. ``stop`` set ends the walks still to
    come as ``scan-failed`` (unknown, kept): a caller going away stops at once."""
    now = time.time() if now is None else now
    cutoff = now - options.idle_hours * 3600.0
    arrival_cutoff = options.arrival_cutoff(now)
    names = _list_names(target)
    named = list_entry_paths(target, names)
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
    with MountTable.read() as table:  # mounts inside entries (file bind mounts too, and where no walk goes)
        mounted = table.under_any(os.fspath(target.scratch_dir))
    walked_at = walk_start_moment()

    def reports() -> Iterator[EntryReport]:
        # A listing without a cache wants every size: one full walk per entry gives both
        # the state and the size (an active entry is not walked twice).
        activities = iter_scan([p for _n, p in named], cutoff, full=with_sizes and size_cache is None, stop=stop,
                               arrival_cutoff=arrival_cutoff)
        leftovers = iter(_leftover_reports(target, names, by_entry, with_sizes))
        left = next(leftovers, None)
        with contextlib.closing(activities):
            for (name, path), act in zip(named, activities, strict=True):
                while left is not None and left.name < name:  # in name order with the others
                    yield left
                    left = next(leftovers, None)
                sized = with_sizes and not (stop is not None and stop.is_set())  # a stopped walk is not redone
                yield _report(name, path, act, tuple(by_entry.get(name, ())), process_error, now, sized, size_cache,
                              mounted.get(name))
        while left is not None:
            yield left
            left = next(leftovers, None)
        if size_cache is not None:
            size_cache.forget_except({p for _n, p in named})

    return SurveyStream(
        target=target,
        now=now,
        cutoff=cutoff,
        idle_hours=options.idle_hours,
        count=len(named) + sum(1 for n in names if n.startswith(TRASH_PREFIX)),
        entries=reports(),
        processes=tuple(judged),
        process_error=process_error,
        quarantine=tuple(list_quarantine(target.quarantine_dir)),
        walked_at=walked_at,
        arrival_cutoff=arrival_cutoff,
    )


def _report(name: str, path: str, act: Activity, procs: tuple[JudgedProcess, ...], process_error: str | None,
            now: float, with_sizes: bool, size_cache: SizeCache | None, mount: str | None = None) -> EntryReport:
    """``mount``: a mount point inside the entry that the mount table lists (relative)."""
    keeper = next((j for j in procs if j.keeps), None)
    mount = act.mount if act.mount is not None else mount
    rule = (static_keep_reason(path) or (mount_reason(mount) if mount is not None else None)
            or (keeper.keep_reason() if keeper else None))
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
    idle_s = arrived_s = None
    if act.arrived_at is not None:
        idle_s = arrived_s = max(0.0, now - act.arrived_at)
    elif not act.failed and act.newest_mtime is not None:
        idle_s = max(0.0, now - act.newest_mtime)
    size = act.size_bytes
    if size is None and with_sizes:
        size = size_cache.size(path, now) if size_cache is not None else tree_size(path)
    return EntryReport(name, path, act, state, idle_s, size, reason, procs, arrived_s)
