"""The attention items of process sessions, scratch and the home, and of the app's own
dispatcher: each a pure function of facts the engine already reads (a session list, a
scratch survey, the prune log's tail, a statvfs, doctor's checks, tick results)."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from engine.attention.model import Item, Kind
from engine.attention.words import outside, plural
from engine.kanban.tick_result import HoldReason
from engine.text import escape_text, human_bytes, human_duration

# -- process sessions ---------------------------------------------------------------------

WORKER_OWNER_PREFIX = "kanban:"  # a card's worker: its failure is the card's item


def session_items(sessions, watch_states: dict | None = None) -> list[Item]:
    """Failed sessions (exit non-zero, killed, lost) that were not started again since
    (a later session of the same command in the same folder ends the item), and the
    watches that matched or stopped. ``watch_states``: session id -> its watch.json."""
    from engine.processes.session import SessionSource, SessionStatus

    watch_states = watch_states or {}
    ours = [s for s in sessions if s.source is SessionSource.OWN]
    latest_start: dict[tuple[str, str], float] = {}
    for s in ours:
        k = (s.command, s.cwd)
        latest_start[k] = max(latest_start.get(k, 0.0), s.started_at)
    items: list[Item] = []
    for s in ours:
        worker = s.owner.startswith(WORKER_OWNER_PREFIX)
        failed = not worker and s.finished and latest_start[(s.command, s.cwd)] <= s.started_at and (
            s.status is not SessionStatus.EXITED or s.exit_code != 0)
        state = watch_states.get(s.id) or {}
        hits = state.get("hits") if isinstance(state.get("hits"), int) else 0
        if not (failed or hits > 0 or state.get("disabled")):
            continue  # no item: its command is not masked and cut for nothing (1,000 running sessions)
        command = outside(s.command, 60)
        if failed:
            items.append(Item(
                f"{Kind.SESSION_FAILED}:{s.id}", Kind.SESSION_FAILED, s.id, s.ended_at or s.started_at,
                f"{command}: {s.exit_text()} after {human_duration(s.runtime())}",
                f"read its output (hermes-tui proc log {s.short_id}), then run it again or dismiss this"))
        since = state.get("_mtime") if isinstance(state.get("_mtime"), float) else None
        patterns = ", ".join(repr(outside(p, 40)) for p in s.watch)
        if hits > 0:
            items.append(Item(
                f"{Kind.WATCH_MATCHED}:{s.id}:{hits}", Kind.WATCH_MATCHED, s.id, since,
                f"{command}: its watch ({patterns}) matched {plural(hits, 'time')}",
                f"read the matched lines in its output (hermes-tui proc log {s.short_id})"))
        if state.get("disabled"):
            items.append(Item(
                f"{Kind.WATCH_DISABLED}:{s.id}", Kind.WATCH_DISABLED, s.id, since,
                f"{command}: watching stopped ({outside(state.get('disabled_reason'), 80) or 'a cap was reached'}); "
                "only its completion is notified now",
                "read its output; start it again with a narrower --watch TEXT if the matches were noise"))
    return items


def read_watch_states(sessions) -> dict:
    """Each watched session's watch.json (what the app's watch found), with its mtime."""
    from engine.fsutil import read_json
    from engine.processes.session import WATCH_STATE_FILE

    states = {}
    for s in sessions:
        if not s.watch:
            continue
        path = Path(s.dir) / WATCH_STATE_FILE
        try:
            mtime = os.stat(path).st_mtime
            data = read_json(path)
        except (OSError, ValueError):
            continue
        if isinstance(data, dict):
            data["_mtime"] = float(mtime)
            states[s.id] = data
    return states


# -- scratch ------------------------------------------------------------------------------

QUARANTINE_WARN_HOURS = 6.0
DISK_FULL_FRACTION = 0.95  # used share of the scratch disk that makes it "nearly full"


@dataclass(frozen=True)
class ShownEntry:
    """An idle entry as a pane holds it (name, idle age, size): what :func:`survey_items`
    needs of an entry report, without the report (a pane of 100,000 entries keeps none)."""

    name: str
    idle_seconds: float
    size_bytes: int | None
    newest_mtime: float

    @property
    def state(self):
        from engine.scratch.entries import EntryState

        return EntryState.IDLE


@dataclass(frozen=True)
class ShownSurvey:
    """A survey as a pane last took it: its time, the idle window, the idle entries and
    the quarantine (:func:`shown_survey`)."""

    now: float
    idle_hours: float
    entries: tuple[ShownEntry, ...]
    quarantine: tuple


def shown_survey(now: float, idle_hours: float, idle: tuple[tuple[str, float, int | None, float], ...],
                 quarantine: tuple) -> ShownSurvey:
    """A :class:`ShownSurvey` from (name, idle seconds, size, newest mtime) of a pane's idle
    rows. The mtime is the survey's own, not ``now - idle``: an item's key carries it, and
    the CLI's key for the same entry must be the same to the second."""
    return ShownSurvey(now, idle_hours, tuple(ShownEntry(name, idle_s, size, newest)
                                              for name, idle_s, size, newest in idle), quarantine)


def survey_items(survey, quarantine_hours: float) -> list[Item]:
    """Idle entries the next pass takes (with their size), and quarantined entries
    deleted within QUARANTINE_WARN_HOURS. An entry's name is outside text: in the key,
    the subject and the words it is masked (secrets, as outputs are) and escaped."""
    from engine.processes.redact import shown
    from engine.scratch.entries import EntryState

    items: list[Item] = []
    for e in survey.entries:
        if e.state is not EntryState.IDLE:
            continue
        newest = e.newest_mtime if isinstance(e, ShownEntry) else e.activity.newest_mtime
        occurrence = int(newest) if newest is not None else 0
        due = newest + survey.idle_hours * 3600.0 if newest is not None else None
        name = shown(e.name)
        items.append(Item(
            f"{Kind.PRUNE_DUE}:{name}:{occurrence}", Kind.PRUNE_DUE, name, due,
            f"idle {human_duration(e.idle_seconds)}, {human_bytes(e.size_bytes)}; the next pass takes it",
            "look at the prune preview (p in the scratch pane, or hermes-tui prune --dry-run); "
            "write to it to keep it"))
    for q in survey.quarantine:
        expires = q.expires_at(quarantine_hours)
        left = expires - survey.now
        if left > QUARANTINE_WARN_HOURS * 3600.0:
            continue
        when = f"in {human_duration(left)}" if left > 0 else "at the next pass"
        file_name, name = shown(q.file_name), shown(q.name)
        items.append(Item(
            f"{Kind.QUARANTINE_EXPIRING}:{file_name}", Kind.QUARANTINE_EXPIRING, file_name, q.quarantined_at,
            f"{name}: quarantined {human_duration(survey.now - q.quarantined_at)} ago, deleted {when}",
            f"restore it if it is still needed (hermes-tui scratch restore {name})"))
    return items


def _record_time(stamp: str) -> float | None:
    """The epoch of a prune log record's local time ("2026-01-01 10:00:00,123")."""
    try:
        base, _, millis = stamp.partition(",")
        return time.mktime(time.strptime(base, "%Y-%m-%d %H:%M:%S")) + int(millis or 0) / 1000.0
    except (ValueError, OverflowError):
        return None


LOG_TAIL_BYTES = 64 * 1024


def read_log_tail(log_file: Path) -> list:
    """The prune log's last records (its last LOG_TAIL_BYTES), parsed."""
    from engine.scratch.audit import iter_lines, parse_record

    try:
        with open(log_file, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            fh.seek(max(0, size - LOG_TAIL_BYTES))
            data = fh.read(LOG_TAIL_BYTES)
    except OSError:
        return []
    if size > LOG_TAIL_BYTES:
        data = data.split(b"\n", 1)[-1]  # the first line may be cut
    return [parse_record(line) for line in iter_lines(data) if line.strip()]


def pass_items(records, last_pass_started: float | None) -> list[Item]:
    """The newest failed pass, unless a pass has started since (its stamp is newer)."""
    failed = [r for r in records if r.action == "failed"]
    if not failed:
        return []
    last = failed[-1]
    at = _record_time(last.time)
    if at is None or (last_pass_started is not None and last_pass_started > at):
        return []
    return [Item(f"{Kind.PASS_FAILED}:{last.time}", Kind.PASS_FAILED, "prune pass", at,
                 f"a prune pass failed: {outside(last.detail)}",
                 "read the prune log (pane 4); the next pass retries, or run hermes-tui prune")]


def disk_items(scratch_dir: str, used_fraction: float | None, free_bytes: int | None) -> list[Item]:
    if used_fraction is None or used_fraction < DISK_FULL_FRACTION:
        return []
    return [Item(f"{Kind.DISK_NEARLY_FULL}:{scratch_dir}", Kind.DISK_NEARLY_FULL, escape_text(scratch_dir), None,
                 f"the scratch disk is {used_fraction:.0%} full ({human_bytes(free_bytes)} free)",
                 "prune idle entries (hermes-tui prune) or free space on that disk")]


def disk_usage(path: Path) -> tuple[float | None, int | None]:
    """(used fraction, bytes free to us) of the filesystem holding ``path``."""
    try:
        st = os.statvfs(path)
    except OSError:
        return None, None
    if not st.f_blocks:
        return None, None
    return 1.0 - st.f_bavail / st.f_blocks, st.f_bavail * st.f_frsize


# -- the home -----------------------------------------------------------------------------

def doctor_items(warnings) -> list[Item]:
    """``warnings``: engine.doctor.HomeWarning records."""
    return [Item(f"{Kind.DOCTOR}:{w.check}", Kind.DOCTOR, w.check, None, w.text, w.action) for w in warnings]


# -- the app's dispatcher -----------------------------------------------------------------

HELD_BACK_TICKS = 3  # a card held back this many ticks in a row is an item
GROUP_HELD_AT = 5  # more such cards than this for one reason are one item
FAILING_TICKS = 2  # this many failed ticks in a row are an item


# What answers a card held back, by the tick's reason code (engine.kanban.dispatcher).
_HELD_BACK_ACTIONS = {
    HoldReason.AT_CAPACITY: "wait for a running card to finish, or raise kanban.max_in_progress",
    HoldReason.PER_PROFILE_CAPPED: "wait for the profile's running card to finish, or raise its max_in_progress",
    HoldReason.SKIPPED_UNASSIGNED: "assign it (e on the board), or set kanban.default_assignee",
    HoldReason.SKIPPED_NONSPAWNABLE: "assign it to a profile of this home (kanban.profiles), or run it where that one is",
    HoldReason.RATE_LIMIT_COOLDOWN: "nothing: it is tried again once the cooldown is over",
    HoldReason.LAST_RUN_ALIVE: "nothing: it starts once its last run is stopped (see the tick's warnings if it survives)",
}


@dataclass
class DispatchWatch:
    """What one process's dispatcher did tick after tick (only the process that ticks
    knows): cards held back again and again, ticks that keep failing.

    A dispatcher that found the board unchanged gives its last tick's result again (the
    same object, see engine.kanban.dispatcher.QuietTick): then every held card is held
    one tick more, and only the cards about to reach HELD_BACK_TICKS are looked at, not
    the 100,000 a big board may hold back."""

    held: dict = field(default_factory=dict)  # card id -> (first held at, tick it was first held, Skip)
    ticks: int = 0  # the ticks that ended (failed ones not counted)
    failures: int = 0
    failing_since: float | None = None
    last_error: str = ""
    version: int = 0  # changes when the items may have
    _last: object = None  # the result of the last tick, while its cards are held
    _young: set = field(default_factory=set)  # ticks first held of cards not yet held HELD_BACK_TICKS
    _items: tuple | None = None  # (what they were made of, the items), see items()
    _groups: tuple | None = None  # (the held dict, version, the ripe cards by reason), see _grouped()

    def held_ticks(self, since: int) -> int:
        return self.ticks - since + 1

    def tick_done(self, result, now: float) -> None:
        changed = self.failures >= FAILING_TICKS or self.failing_since is not None
        self.failures, self.failing_since, self.last_error = 0, None, ""
        if result is self._last:  # the same cards held, one tick more
            self.ticks += 1
            ripe = [since for since in self._young if self.held_ticks(since) >= HELD_BACK_TICKS]
            self._young.difference_update(ripe)
            changed = changed or bool(ripe)
        else:
            before = self._ripe()
            self.ticks += 1
            held = {}
            if not result.spawned:
                for skip in result.skipped:
                    first, since, _ = self.held.get(skip.task_id, (now, self.ticks, skip))
                    held[skip.task_id] = (first, since, skip)
            self.held = held
            self._young = {since for _first, since, _skip in held.values()
                           if self.held_ticks(since) < HELD_BACK_TICKS}
            changed = changed or self._ripe() != before
        self._last = None if result.spawned else result
        if changed:
            self.version += 1

    def tick_failed(self, error: str, now: float) -> None:
        before = self.failures >= FAILING_TICKS, self.failing_since
        self.failures += 1
        self.failing_since = self.failing_since or now
        self.last_error = error
        if (self.failures >= FAILING_TICKS, self.failing_since) != before:
            self.version += 1

    def _ripe(self) -> set[str]:
        return {k for k, (_f, since, _s) in self.held.items() if self.held_ticks(since) >= HELD_BACK_TICKS}

    def _grouped(self) -> dict[str, tuple[list, float, int]]:
        """The cards held back HELD_BACK_TICKS ticks or more by reason, each reason's
        (cards as (card, first held at, tick first held, Skip) in card order, the earliest
        first held at, the earliest tick first held). Kept while the held cards and the
        version stand: a tick given again only adds one to every count, which the items
        read off the earliest tick (a 100,000-card board was walked and sorted again at
        every look of the monitor)."""
        if self._groups is not None and self._groups[0] is self.held and self._groups[1] == self.version:
            return self._groups[2]
        by_reason: dict[str, list] = {}
        for card, (first, since, skip) in sorted(self.held.items()):
            if self.held_ticks(since) >= HELD_BACK_TICKS:
                by_reason.setdefault(skip.reason, []).append((card, first, since, skip))
        groups = {reason: (cards, min(c[1] for c in cards), min(c[2] for c in cards))
                  for reason, cards in by_reason.items()}
        self._groups = (self.held, self.version, groups)
        return groups

    def items(self) -> list[Item]:
        """The cards held back HELD_BACK_TICKS ticks or more, one item each; more than
        GROUP_HELD_AT of them for one reason are one item (named by the first card, which
        ``enter`` selects), not 100,000. Made once per tick (the monitor asks more often)."""
        from engine.kanban.wording import skip_reason

        shape = (self.ticks, self.version, self.failures, self.last_error)
        if self._items is not None and self._items[0] == shape:
            return list(self._items[1])
        items = []
        for reason, (cards, first, oldest) in self._grouped().items():
            action = _HELD_BACK_ACTIONS.get(reason, "look at why, on the board's detail line")
            if len(cards) > GROUP_HELD_AT:
                card, _first, _since, skip = cards[0]
                most = self.held_ticks(oldest)
                items.append(Item(f"{Kind.HELD_BACK}:{reason}:cards:{int(first)}", Kind.HELD_BACK, card, first,
                                  f"{plural(len(cards), 'card')} held back up to {most} ticks in a row "
                                  f"({card} and {plural(len(cards) - 1, 'more', 'more')}): {skip_reason(skip)}",
                                  action))
                continue
            for card, first, since, skip in cards:
                items.append(Item(f"{Kind.HELD_BACK}:{card}:{int(first)}", Kind.HELD_BACK, card, first,
                                  f"held back {self.held_ticks(since)} ticks in a row: {skip_reason(skip)}", action))
        if self.failures >= FAILING_TICKS and self.failing_since is not None:
            items.append(Item(f"{Kind.DISPATCH_FAILING}:{int(self.failing_since)}", Kind.DISPATCH_FAILING,
                              "dispatcher", self.failing_since,
                              f"{plural(self.failures, 'tick')} in a row failed: {outside(self.last_error)}",
                              "check the board (hermes-tui doctor, hermes-tui kanban dispatch)"))
        self._items = (shape, tuple(items))
        return items
