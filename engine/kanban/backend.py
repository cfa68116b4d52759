"""Where a board backend starts, and what it must do.

A *board backend* is what the CLI, the app's board pane, the dispatch loop, the attention
list and the demo talk to when they show or change a board. It is the
:class:`BoardBackend` protocol below; callers never ask which backend they hold, they
ask its :class:`Capabilities` ("can this board be dispatched?"), never a kind string.

There are two implementations over three stores, one folder each under
``engine/kanban/backends/``:

- :class:`engine.kanban.service.BoardService`: hermes-tui's own board, dispatched by our
  dispatcher, over one of two stores with the same interface (``Board``):
  ``backends/sqlite/`` (a file in the home, WAL) and ``backends/postgres/`` (one server
  database shared by several machines).
- :class:`engine.kanban.backends.hermes.board.HermesBoardService`: hermes-agent's own
  board, read through read-only SQLite connections and changed through ``hermes kanban``;
  never dispatched by us.

``BoardService.open`` is the one way in: it decides which board (``--db``, variables,
config, the home) and hands out the backend for it, shared per board and event loop.

What a backend must do, all async unless said otherwise:

- **say what it is**: ``path``, ``capabilities``, ``read_only_reason``, ``now()`` (board
  time), ``statuses()``, ``profiles()``, ``log_path(task_id)``;
- **read**: ``resolve``, ``get``, ``list_tasks``, ``view`` (a :class:`BoardView`),
  ``details``, ``runs_of``, ``events``, ``last_event_id``, ``counts``, ``latest_events``,
  ``events_since``, ``usage``;
- **notice changes**: ``data_version()`` (a value that moves when the board may have
  changed; None: unknown, read it) and ``listen(on_change)`` (True when the board
  announces its changes, False: poll it);
- **change a card**, each returning a :class:`TransitionResult`: ``assign``, ``complete``,
  ``block``, ``review``, ``heartbeat``, ``reclaim``, ``report_usage``, ``comment``,
  ``unblock``, ``archive``, ``move``; and ``create`` / ``create_many`` giving the new cards;
- **tick**: one dispatch round (a :class:`DispatchResult`), refused when not
  ``dispatchable``;
- **close**: give the backend back (``async with`` does it).

A change a backend cannot make raises :class:`StoreError` (or a subclass) with one line
saying why; it never half-makes it. A backend with ``hermes_verbs`` also has hermes's own
verbs (``reassign``, ``schedule``, ``promote``, ``link``, ``edit``) and one with
``reports_reasons`` has ``reasons(tasks)`` and ``gateway()``: see :class:`HermesExtras`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from engine.kanban.backends.postgres.url import DatabaseUrl
    from engine.kanban.models import Event, NewTask, Run, Task, TaskDetails
    from engine.kanban.tick_result import DispatchResult
    from engine.kanban.workers import StopReport


MIN_ID_PREFIX = 4  # characters after "t_": "t_" alone, or "t_a", must never pick a card


class StoreError(Exception):
    """The board cannot be used (corrupt, foreign, newer schema, unreadable), or a change
    cannot be made: one line, meant for the user."""


class BoardGone(StoreError):
    """The board's file was removed, or another file now stands at its path, since this
    process opened it (its identity, ``st_dev``/``st_ino``, is checked with a stat before
    every statement): nothing is read from or written to the file it held, which is no
    longer the board anyone else sees."""


class UnknownTask(StoreError):
    """No card with that id (or the prefix names none or several)."""


class BadId(UnknownTask):
    """The id given is not usable as an id (too short a prefix): a usage error."""


@dataclass(frozen=True)
class Capabilities:
    """What a backend can do: callers ask these, never which backend it is."""

    read_only: bool
    """No change can be made (``read_only_reason`` says why)."""
    dispatchable: bool
    """hermes-tui's dispatcher may tick it (start workers, reap them)."""
    batch_create: bool
    """``create_many`` makes several cards in one transaction (all or none)."""
    checks_profiles: bool
    """A card's assignee is one of this home's configured profiles (so a typo is warned of)."""
    signals_workers: bool
    """A reclaim or archive stops the card's worker itself (else the board's owner does)."""
    worker_log_files: bool
    """A card's worker writes its own log file (``log_path``); else its output is a
    process session of this home, found through ``runs_of``."""
    reports_reasons: bool = False
    """``reasons(tasks)`` and ``gateway()``: why the board's own dispatcher holds cards back."""
    hermes_verbs: bool = False
    """hermes-agent's own verbs: ``reassign``, ``schedule``, ``promote``, ``link``, ``edit``."""


@dataclass(frozen=True)
class BoardView:
    """What a board screen shows: the cards, plus each status's full count (a finished
    column may hold only its newest cards)."""

    tasks: tuple[Task, ...]
    counts: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class TransitionResult:
    """What one change did to a card: its status before and after, and what happened to
    its worker when the change stopped one."""

    task_id: str
    from_status: str
    to_status: str
    stop: StopReport | None = None

    def to_json(self) -> dict:
        return {
            "id": self.task_id,
            "from_status": self.from_status,
            "status": self.to_status,
            "worker": self.stop.to_json() if self.stop else None,
        }


class BoardBackend(Protocol):
    """One open board (see the module doc for what each part is for)."""

    @property
    def path(self) -> Path | DatabaseUrl: ...
    @property
    def capabilities(self) -> Capabilities: ...
    @property
    def read_only_reason(self) -> str: ...
    def now(self) -> float: ...
    def log_path(self, task_id: str) -> Path: ...
    async def statuses(self) -> tuple[str, ...]: ...
    async def profiles(self) -> tuple[str, ...]: ...
    async def close(self) -> None: ...
    async def __aenter__(self) -> BoardBackend: ...
    async def __aexit__(self, *exc: object) -> None: ...

    # reads
    async def resolve(self, id_or_prefix: str) -> str: ...
    async def get(self, task_id: str) -> Task: ...
    async def list_tasks(self, statuses: Sequence[str] | None = None) -> list[Task]: ...
    async def view(self, statuses: Sequence[str], recent_limit: int = 100) -> BoardView: ...
    async def details(self, task_id: str, event_limit: int | None = None) -> TaskDetails: ...
    async def runs_of(self, task_id: str) -> list[Run]: ...
    async def events(self, task_id: str | None = None, after_id: int = 0,
                     limit: int | None = None) -> list[Event]: ...
    async def last_event_id(self) -> int: ...
    async def counts(self) -> dict[str, int]: ...
    async def latest_events(self, kinds: Sequence[str], statuses: Sequence[str]) -> dict[str, Event]: ...
    async def events_since(self, kinds: Sequence[str], since: float) -> list[Event]: ...
    async def usage(self, task_id: str | None = None) -> Any: ...

    # changes under it
    async def data_version(self) -> object: ...
    async def listen(self, on_change: Callable[[], None]) -> bool: ...

    # changes
    async def create(self, new: NewTask, *, actor: str = "cli") -> Task: ...
    async def create_many(self, new: Sequence[NewTask], *, actor: str = "cli") -> list[Task]: ...
    async def assign(self, task_id: str, assignee: str | None) -> TransitionResult: ...
    async def complete(self, task_id: str, summary: str | None = None, call: Any = ...) -> TransitionResult: ...
    async def block(self, task_id: str, reason: str | None = None, call: Any = ...) -> TransitionResult: ...
    async def review(self, task_id: str, summary: str | None = None, call: Any = ...) -> TransitionResult: ...
    async def heartbeat(self, task_id: str, call: Any) -> TransitionResult: ...
    async def reclaim(self, task_id: str, reason: str = "", expected: Any = None) -> TransitionResult: ...
    async def report_usage(self, task_id: str, *, input_tokens: int, output_tokens: int,
                           cost_usd: float | None, call: Any = ...) -> TransitionResult: ...
    async def comment(self, task_id: str, text: str) -> TransitionResult: ...
    async def unblock(self, task_id: str) -> TransitionResult: ...
    async def archive(self, task_id: str, expected: Any = None) -> TransitionResult: ...
    async def move(self, task_id: str, to_status: str, expected: Any = None) -> TransitionResult: ...

    # dispatching
    async def tick(self, spawner: Any = None) -> DispatchResult: ...


class HermesExtras(Protocol):
    """What a backend with ``reports_reasons`` and ``hermes_verbs`` has besides
    :class:`BoardBackend` (hermes-agent's board)."""

    async def reasons(self, tasks: Sequence[Task]) -> dict[str, list]: ...
    async def gateway(self) -> Any: ...
    async def reassign(self, task_id: str, profile: str | None, *, reclaim: bool = False,
                       reason: str = "") -> TransitionResult: ...
    async def schedule(self, task_id: str, reason: str = "") -> TransitionResult: ...
    async def promote(self, task_id: str, reason: str = "", *, force: bool = False) -> TransitionResult: ...
    async def link(self, parent_id: str, child_id: str, *, unlink: bool = False) -> TransitionResult: ...
    async def edit(self, task_id: str, result: str, summary: str | None = None) -> TransitionResult: ...
