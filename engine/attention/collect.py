"""Putting the items together: read each source (or take what a pane already read),
compute the items, leave out the dismissed ones.

The CLI and ``watch`` call :func:`collect` (every source, read here); the app gives the
facts its panes already hold to :func:`compute` and reads only what no pane reads.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field

from engine.attention import state
from engine.attention.board import BoardFacts, board_items, on_board, read_board
from engine.attention.model import (
    BOARD_KINDS,
    DISPATCH_KINDS,
    HOME_KINDS,
    PROCESS_KINDS,
    SCRATCH_KINDS,
    Item,
    Kind,
    newest_first,
)
from engine.attention.sources import (
    DispatchWatch,
    disk_items,
    disk_usage,
    doctor_items,
    pass_items,
    read_log_tail,
    read_watch_states,
    session_items,
    survey_items,
)
from engine.config import Settings
from engine.home import HomeLayout


@dataclass(frozen=True)
class ScratchFacts:
    survey: object | None  # engine.scratch.entries.Survey, None when it could not be taken
    quarantine_hours: float
    records: tuple = ()  # the prune log's last records
    last_pass_started: float | None = None
    disk: tuple[float | None, int | None] = (None, None)
    scratch_dir: str = ""


@dataclass(frozen=True)
class Facts:
    """What the items are computed from; a source left None was not read (its kinds are
    not covered: nothing is said about them, and no claim of theirs is forgotten)."""

    board: BoardFacts | None = None  # one board (tests); ``boards``: every board of the home
    boards: tuple[BoardFacts, ...] | None = None
    sessions: tuple | None = None
    watch_states: dict = field(default_factory=dict)
    scratch: ScratchFacts | None = None
    warnings: tuple | None = None
    dispatch: DispatchWatch | None = None  # the app's dispatcher on its default board
    board_dispatch: tuple = ()  # (slug, DispatchWatch) of each named board the app dispatches
    problems: tuple[str, ...] = ()


@dataclass(frozen=True)
class Attention:
    """The items of one computation. ``items`` leaves out the dismissed ones."""

    items: tuple[Item, ...]
    dismissed: tuple[Item, ...]
    covered: frozenset[Kind]
    problems: tuple[str, ...] = ()
    computed_at: float = 0.0

    @property
    def keys(self) -> frozenset[str]:
        return frozenset(i.key for i in self.items) | frozenset(i.key for i in self.dismissed)

    def on_board(self, slug: str) -> Attention:
        """Only the items of board ``slug``."""
        return Attention(tuple(i for i in self.items if i.board == slug),
                         tuple(i for i in self.dismissed if i.board == slug), self.covered, self.problems,
                         self.computed_at)

    def of_kind(self, kinds) -> Attention:
        wanted = frozenset(kinds)
        return Attention(tuple(i for i in self.items if i.kind in wanted),
                         tuple(i for i in self.dismissed if i.kind in wanted), self.covered, self.problems,
                         self.computed_at)


def compute(facts: Facts, now: float, dismissed: dict[str, float]) -> Attention:
    items: list[Item] = []
    covered: set[Kind] = set()
    if facts.board is not None or facts.boards is not None:
        for board in ((facts.board,) if facts.board is not None else ()) + (facts.boards or ()):
            items += board_items(board, now)
        covered |= BOARD_KINDS
    if facts.dispatch is not None:
        items += facts.dispatch.items()
        covered |= DISPATCH_KINDS
    for slug, watch in facts.board_dispatch:
        items += [on_board(item, slug) for item in watch.items()]
    if facts.sessions is not None:
        items += session_items(facts.sessions, facts.watch_states)
        covered |= PROCESS_KINDS
    if facts.scratch is not None:
        sf = facts.scratch
        if sf.survey is not None:
            items += survey_items(sf.survey, sf.quarantine_hours)
        items += pass_items(sf.records, sf.last_pass_started)
        items += disk_items(sf.scratch_dir, *sf.disk)
        covered |= SCRATCH_KINDS if sf.survey is not None else SCRATCH_KINDS - {Kind.PRUNE_DUE,
                                                                                 Kind.QUARANTINE_EXPIRING}
    if facts.warnings is not None:
        items += doctor_items(facts.warnings)
        covered |= HOME_KINDS
    items = newest_first(list({i.key: i for i in items}.values()))
    shown = tuple(i for i in items if i.key not in dismissed)
    gone = tuple(i for i in items if i.key in dismissed)
    return Attention(shown, gone, frozenset(covered), facts.problems, now)


# -- reading each source ------------------------------------------------------------------

async def board_facts(home: HomeLayout, settings: Settings, now: float) -> BoardFacts | None:
    """The default board's facts through this event loop's board service; empty when the
    home has no board (a read never creates one). Attention reads every board of the
    home (:mod:`engine.attention.boards`); this one is for a caller that wants one."""
    from engine.kanban.service import BoardService

    if not await asyncio.to_thread(BoardService.exists, home, settings):
        return BoardFacts((), {}, ())
    async with await BoardService.open(home, settings, create=False) as service:
        return await read_board(service, now, settings.kanban.dispatch_interval_seconds)


def session_facts(home: HomeLayout, settings: Settings) -> tuple[tuple, dict]:
    from engine.processes.registry import ProcessRegistry

    sessions = tuple(ProcessRegistry(home, settings).list(include_finished=True))
    return sessions, read_watch_states(sessions)


def scratch_facts(home: HomeLayout, settings: Settings, survey=None, *, take_survey: bool = True) -> ScratchFacts:
    """The scratch facts: ``survey`` as a pane took it, or a new one (``take_survey``)."""
    import os

    from engine.scratch.target import PruneTarget

    target = PruneTarget.of(home)
    if survey is None and take_survey:
        from engine.scratch.entries import SurveyError, survey_scratch
        from engine.scratch.target import PruneOptions

        try:
            survey = survey_scratch(target, PruneOptions.from_settings(home, settings))
        except (SurveyError, OSError):
            survey = None
    try:
        started = os.stat(target.stamp_file).st_mtime
    except OSError:
        started = None
    where = target.scratch_dir if target.scratch_dir.exists() else home.root
    return ScratchFacts(survey, settings.scratch.quarantine_hours, tuple(read_log_tail(target.log_file)), started,
                        disk_usage(where) if where.exists() else (None, None), str(target.scratch_dir))


def home_facts(home: HomeLayout, settings: Settings) -> tuple:
    from engine.doctor import home_warnings

    return tuple(home_warnings(home, settings))


def collect(home: HomeLayout, settings: Settings, now: float | None = None, *,
            scratch_survey: bool = True) -> Attention:
    """Every source read here (the CLI, ``watch``). A source that cannot be read is a
    problem line; the others still give their items."""
    now = time.time() if now is None else now
    from engine.attention.boards import read_all

    problems: list[str] = []
    boards = None
    try:
        boards, board_problems = asyncio.run(read_all(home, settings, now))
        problems += board_problems
    except Exception as exc:  # a home whose boards cannot be listed: the rest still counts
        problems.append(f"boards: {exc}")
    sessions, watch = None, {}
    try:
        sessions, watch = session_facts(home, settings)
    except Exception as exc:
        problems.append(f"processes: {exc}")
    facts = Facts(boards=boards, sessions=sessions, watch_states=watch,
                  scratch=scratch_facts(home, settings, take_survey=scratch_survey),
                  warnings=home_facts(home, settings), problems=tuple(problems))
    return compute(facts, now, state.dismissed(home))
