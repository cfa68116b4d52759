"""Completion and watch-pattern notifications, with their rate limits.

Two pure policies (time is passed in, so tests drive them exactly) and one follower
that applies them to the sessions of a home:

- :class:`WatchPolicy` (per session): case-sensitive substring per line (not a regex);
  a delivered match starts a 15 s cooldown, matches inside it are dropped and counted
  (the next delivered match reports how many); three consecutive windows with drops,
  or the 8th delivered match, disable watching with one ``watch_disabled`` event and
  fall back to notify-on-complete.
- :class:`WatchOverflow` (across all sessions): more than 15 matches in 10 s trips it (one
  ``watch_overflow_tripped`` event), then 30 s of silence, then one
  ``watch_overflow_released`` event with the number dropped.
- :class:`NotificationCenter`: follows watched sessions' output by byte offset and
  notices finished notify sessions; a completion is claimed on disk (O_EXCL) before it
  is shown, so it appears once, even across app restarts and two open apps.
"""

from __future__ import annotations

import enum
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from engine.fsutil import atomic_write_json, read_json
from engine.processes import session as sess
from engine.processes.follower import OutputFollower, read_tail
from engine.processes.redact import maybe_redact, strip_ansi
from engine.text import human_duration, one_line

if TYPE_CHECKING:
    from engine.processes.registry import ProcessRegistry
    from engine.processes.session import ProcessSession

COOLDOWN_SECONDS = 15.0
STRIKE_LIMIT = 3
LIFETIME_MAX_HITS = 8
EVENT_MAX_LINES = 20
EVENT_MAX_CHARS = 2000
COMPLETION_TAIL_CHARS = 2000
MAX_PARTIAL_CHARS = 64 * 1024
BREAKER_MAX = 15
BREAKER_WINDOW = 10.0
BREAKER_SILENCE = 30.0



class EventKind(enum.StrEnum):
    """What a :class:`ProcessEvent` tells."""

    COMPLETION = "completion"
    WATCH_MATCH = "watch_match"
    WATCH_DISABLED = "watch_disabled"
    TRIPPED = "watch_overflow_tripped"
    RELEASED = "watch_overflow_released"


class WatchVerdict(enum.StrEnum):
    """What :meth:`WatchPolicy.offer` decides for a batch of matching lines."""

    DELIVER = "deliver"
    DROP = "drop"  # inside the cooldown: counted, not shown
    DISABLE = "disable"  # a cap was reached: watching stops, completion is notified instead


@dataclass(frozen=True)
class ProcessEvent:
    """One notification. ``text`` is the one-line summary; ``detail`` the (redacted) body.
    ``ok`` says whether it reports something going as hoped (a clean exit, a match);
    how loudly to show it is the viewer's choice."""

    kind: EventKind
    at: float
    session_id: str | None = None
    command: str = ""
    text: str = ""
    detail: str = ""
    exit_code: int | None = None
    signal: str | None = None
    status: sess.SessionStatus | None = None
    duration: float | None = None
    pattern: str | None = None
    lines: tuple[str, ...] = ()
    suppressed: int = 0

    @property
    def ok(self) -> bool:
        if self.kind is EventKind.COMPLETION:
            return self.status is sess.SessionStatus.EXITED and self.exit_code == 0
        return self.kind not in (EventKind.WATCH_DISABLED, EventKind.TRIPPED)


# --------------------------------------------------------------------------------------
# Per-session watch policy
# --------------------------------------------------------------------------------------


@dataclass
class WatchPolicy:
    patterns: tuple[str, ...]
    hits: int = 0
    suppressed: int = 0
    cooldown_until: float = 0.0
    window_has_drops: bool = False
    consecutive_strikes: int = 0
    disabled: bool = False
    disabled_reason: str = ""

    def match(self, line: str) -> str | None:
        for p in self.patterns:
            if p in line:
                return p
        return None

    def offer(self, pattern: str, lines: list[str], now: float) -> tuple[WatchVerdict, ...]:
        """A batch of matching lines arrived. Returns the verdicts in order (a delivered
        8th match is followed by ``DISABLE``)."""
        if self.disabled:
            return ()
        if now < self.cooldown_until:
            self.suppressed += 1
            if not self.window_has_drops:
                self.window_has_drops = True
                self.consecutive_strikes += 1
                if self.consecutive_strikes >= STRIKE_LIMIT:
                    self.disabled = True
                    self.disabled_reason = (
                        f"{STRIKE_LIMIT} cooldown windows in a row had dropped matches"
                    )
                    return (WatchVerdict.DROP, WatchVerdict.DISABLE)
            return (WatchVerdict.DROP,)
        if self.cooldown_until and not self.window_has_drops:
            self.consecutive_strikes = 0  # a window with no drops resets the strikes
        self.hits += 1
        self.cooldown_until = now + COOLDOWN_SECONDS
        self.window_has_drops = False
        if self.hits >= LIFETIME_MAX_HITS:
            self.disabled = True
            self.disabled_reason = f"lifetime cap of {LIFETIME_MAX_HITS} delivered matches reached"
            return (WatchVerdict.DELIVER, WatchVerdict.DISABLE)
        return (WatchVerdict.DELIVER,)

    def take_suppressed(self) -> int:
        n, self.suppressed = self.suppressed, 0
        return n

    def to_json(self) -> dict:
        return {
            "hits": self.hits,
            "suppressed": self.suppressed,
            "cooldown_until": self.cooldown_until,
            "window_has_drops": self.window_has_drops,
            "consecutive_strikes": self.consecutive_strikes,
            "disabled": self.disabled,
            "disabled_reason": self.disabled_reason,
        }

    @classmethod
    def from_json(cls, patterns: tuple[str, ...], data: dict) -> WatchPolicy:
        p = cls(patterns)
        for key in ("hits", "suppressed", "consecutive_strikes"):
            if isinstance(data.get(key), int):
                setattr(p, key, data[key])
        for key in ("cooldown_until",):
            if isinstance(data.get(key), (int, float)):
                setattr(p, key, float(data[key]))
        p.window_has_drops = bool(data.get("window_has_drops", False))
        p.disabled = bool(data.get("disabled", False))
        p.disabled_reason = str(data.get("disabled_reason", ""))
        return p


# --------------------------------------------------------------------------------------
# Across all sessions: the watch overflow
# --------------------------------------------------------------------------------------


@dataclass
class WatchOverflow:
    max_matches: int = BREAKER_MAX
    window: float = BREAKER_WINDOW
    silence: float = BREAKER_SILENCE
    recent: deque = field(default_factory=deque)
    tripped_until: float | None = None
    dropped: int = 0

    def allow(self, now: float) -> tuple[bool, list[ProcessEvent]]:
        """May a watch match be delivered now? Also returns tripped/released events."""
        events = self.tick(now)
        if self.tripped_until is not None:
            self.dropped += 1
            return False, events
        while self.recent and now - self.recent[0] >= self.window:
            self.recent.popleft()
        if len(self.recent) >= self.max_matches:
            self.tripped_until = now + self.silence
            self.dropped = 1
            self.recent.clear()
            events.append(ProcessEvent(
                EventKind.TRIPPED, now,
                text=f"watch notifications paused for {self.silence:.0f}s: more than "
                f"{self.max_matches} matches in {self.window:.0f}s across all processes",
            ))
            return False, events
        self.recent.append(now)
        return True, events

    def tick(self, now: float) -> list[ProcessEvent]:
        if self.tripped_until is not None and now >= self.tripped_until:
            n, self.dropped, self.tripped_until = self.dropped, 0, None
            return [ProcessEvent(
                EventKind.RELEASED, now, suppressed=n,
                text=f"watch notifications resumed; {n} match(es) were dropped while paused",
            )]
        return []


# --------------------------------------------------------------------------------------
# Building events
# --------------------------------------------------------------------------------------


def completion_event(s: ProcessSession, redact: bool, now: float | None = None) -> ProcessEvent:
    tail = read_tail(s.output_path, COMPLETION_TAIL_CHARS * 4).text
    tail = maybe_redact(strip_ansi(tail), redact)[-COMPLETION_TAIL_CHARS:]
    command = maybe_redact(s.command, redact)
    duration = s.runtime()
    return ProcessEvent(
        EventKind.COMPLETION,
        time.time() if now is None else now,
        session_id=s.id,
        command=command,
        text=f"{s.id} {s.exit_text()} after {human_duration(duration)}: {one_line(command, SUMMARY_CHARS)}",
        detail=tail,
        exit_code=s.exit_code,
        signal=s.signal,
        status=s.status,
        duration=duration,
    )


SUMMARY_CHARS = 60


def _cap_lines(lines: list[str]) -> tuple[str, ...]:
    kept: list[str] = []
    total = 0
    for line in lines[:EVENT_MAX_LINES]:
        if total + len(line) > EVENT_MAX_CHARS:
            kept.append(line[: max(0, EVENT_MAX_CHARS - total)])
            break
        kept.append(line)
        total += len(line)
    return tuple(kept)


# --------------------------------------------------------------------------------------
# Applying the policies to a home
# --------------------------------------------------------------------------------------


@dataclass
class _Watched:
    session_id: str
    command: str
    follower: OutputFollower
    policy: WatchPolicy
    partial: str = ""
    saved_at: float = 0.0
    dirty: bool = False


class NotificationCenter:
    """Turns what happens to a home's sessions into :class:`ProcessEvent` lists.

    Call :meth:`poll` periodically (from a worker thread). Watch progress (byte offset
    and counters) is saved in each session's ``watch.json``, so a restarted app neither
    repeats old matches nor forgets the caps.
    """

    SAVE_EVERY = 2.0

    def __init__(self, registry: ProcessRegistry, *, redact: bool = True, clock=time.time) -> None:
        self.registry = registry
        self.redact = redact
        self.clock = clock
        self.overflow = WatchOverflow()
        self._watched: dict[str, _Watched] = {}
        self._seen_finished: set[str] = set()

    def poll(self, sessions: list[ProcessSession] | None = None, watch: bool = True) -> list[ProcessEvent]:
        now = self.clock()
        if sessions is None:
            sessions = self.registry.list(include_finished=True)
        events: list[ProcessEvent] = list(self.overflow.tick(now))
        for s in sessions:
            # Output of a session that had already ended when we first saw it is not
            # scanned (its matches are history); one we were watching gets a last drain.
            if watch and s.watch and (s.running or s.id in self._watched):
                events.extend(self._scan(s, now))
            if s.finished and s.id not in self._seen_finished:
                self._seen_finished.add(s.id)
                w = self._watched.pop(s.id, None)
                if w is not None:
                    w.follower.close()
                    self._save(w, now, force=True)
                if self._wants_completion(s) and sess.claim_notification(s.dir):
                    events.append(completion_event(s, self.redact, now))
        return events

    def _wants_completion(self, s: ProcessSession) -> bool:
        if s.notify:
            return True
        if s.watch:  # watching disabled by a cap falls back to notify-on-complete
            state = _read_watch_state(s.dir)
            return bool(state.get("disabled"))
        return False

    def _scan(self, s: ProcessSession, now: float) -> list[ProcessEvent]:
        w = self._watched.get(s.id)
        if w is None:
            state = _read_watch_state(s.dir)
            policy = WatchPolicy.from_json(s.watch, state)
            offset = state.get("offset") if isinstance(state.get("offset"), int) else 0
            w = _Watched(s.id, s.command, OutputFollower(s.output_path, offset), policy, saved_at=now)
            self._watched[s.id] = w
        chunk = w.follower.read_all()
        if chunk.reset:
            w.partial = ""
        if not chunk.data:
            self._save(w, now)
            return []
        w.dirty = True
        text = w.partial + chunk.text
        lines = text.split("\n")
        w.partial = lines.pop()  # an unfinished line waits for its end...
        if len(w.partial) > MAX_PARTIAL_CHARS:  # ...unless it never ends (a \r progress bar)
            lines.append(w.partial)
            w.partial = ""
        events: list[ProcessEvent] = []
        if w.policy.disabled:
            self._save(w, now)
            return events
        by_pattern: dict[str, list[str]] = {}
        for line in lines:
            p = w.policy.match(line)
            if p is not None:
                by_pattern.setdefault(p, []).append(strip_ansi(line.rstrip("\r")))
        for pattern, matched in by_pattern.items():
            for verdict in w.policy.offer(pattern, matched, now):
                if verdict is WatchVerdict.DELIVER:
                    suppressed = w.policy.take_suppressed()
                    allowed, extra = self.overflow.allow(now)
                    events.extend(extra)
                    if allowed:
                        events.append(self._match_event(w, pattern, matched, suppressed, now))
                elif verdict is WatchVerdict.DISABLE:
                    events.append(self._disabled_event(w, now))
        self._save(w, now, force=bool(events))
        return events

    def _match_event(self, w: _Watched, pattern: str, lines: list[str], suppressed: int, now: float) -> ProcessEvent:
        shown = tuple(maybe_redact(line, self.redact) for line in _cap_lines(lines))
        more = f" (+{suppressed} dropped in cooldown)" if suppressed else ""
        command = maybe_redact(w.command, self.redact)
        return ProcessEvent(
            EventKind.WATCH_MATCH, now, session_id=w.session_id, command=command, pattern=pattern,
            lines=shown, suppressed=suppressed,
            text=f"{w.session_id} matched {pattern!r}{more}: {one_line(shown[0] if shown else '', SUMMARY_CHARS)}",
            detail="\n".join(shown),
        )

    def _disabled_event(self, w: _Watched, now: float) -> ProcessEvent:
        return ProcessEvent(
            EventKind.WATCH_DISABLED, now, session_id=w.session_id, command=maybe_redact(w.command, self.redact),
            suppressed=w.policy.suppressed,
            text=f"{w.session_id}: watching stopped ({w.policy.disabled_reason}); "
            "you will be notified when it completes",
        )

    def _save(self, w: _Watched, now: float, force: bool = False) -> None:
        if not w.dirty and not force:
            return
        if not force and now - w.saved_at < self.SAVE_EVERY:
            return
        data = w.policy.to_json()
        # The saved offset is where the unfinished line starts, so it is re-read whole.
        data["offset"] = max(0, w.follower.delivered_offset - len(w.partial.encode("utf-8")))
        try:
            atomic_write_json(self.registry.session_dir(w.session_id) / sess.WATCH_STATE_FILE, data)
        except OSError:
            return
        w.saved_at = now
        w.dirty = False

    def close(self) -> None:
        now = self.clock()
        for w in self._watched.values():
            self._save(w, now, force=True)
            w.follower.close()
        self._watched.clear()


def _read_watch_state(d: Path) -> dict:
    try:
        data = read_json(d / sess.WATCH_STATE_FILE)
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}
