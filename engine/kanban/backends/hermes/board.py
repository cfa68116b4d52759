"""hermes-agent's own board (``<home>/kanban.db``), read-only, behind the board interface.

Why it is built this way:

- **Read-only through SQLite, never rewritten.** Each read opens a fresh SQLite
  connection with ``mode=ro``: no migration, no write lock, no pragma that writes. A
  read-only connection to a WAL database still creates ``-wal``/``-shm`` beside it when
  they are missing, so when they are missing (no hermes process has the board open) the
  connection is also ``immutable`` (no lock, no side file); when hermes has them, the
  read goes through them and sees hermes's latest commits.
- **Schema detection by tables and columns**, not by version: a table or column a
  newer hermes adds is ignored, one an older hermes lacks reads as its default.
- **Changes go through hermes's own CLI** (``hermes kanban VERB ...``), never SQL:
  hermes owns its rules (dependencies, failure counters, comments on blocks). Without
  ``hermes`` on PATH the board is read-only.
- **hermes-tui never dispatches it**: hermes's gateway does.

:class:`HermesBoardService` is a :class:`engine.kanban.backend.BoardBackend`, with
hermes's own verbs and reasons besides (:class:`engine.kanban.backend.HermesExtras`);
callers need no branch per backend beyond its :attr:`capabilities`.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sqlite3
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.config import Settings
from engine.home import HomeLayout
from engine.kanban.backend import (
    MIN_ID_PREFIX,
    BadId,
    BoardView,
    Capabilities,
    StoreError,
    TransitionResult,
    UnknownTask,
)
from engine.kanban.backends.hermes.board_file import HERMES_STATUSES, connect_read_only, table_columns
from engine.kanban.models import Comment, Event, NewTask, Run, Task, TaskDetails, load_payload

CLI_TIMEOUT_SECONDS = 60.0
FINISHED = ("done", "archived")  # columns that show only their newest cards


class ReadOnlyBoard(StoreError):
    """A change was asked of a board hermes-tui may only read."""


class DispatchRefused(StoreError):
    """hermes-tui's dispatcher was asked to tick hermes-agent's board."""


# --------------------------------------------------------------------------------------
# Rows to models (a missing column reads as the model's default)
# --------------------------------------------------------------------------------------


def _get(row: sqlite3.Row, name: str, default: Any = None) -> Any:
    try:
        value = row[name]
    except (IndexError, KeyError):
        return default
    return default if value is None else value


def _float(row: sqlite3.Row, name: str) -> float | None:
    value = _get(row, name)
    try:
        return None if value is None else float(value)
    except (TypeError, ValueError):
        return None


def task_from_hermes(row: sqlite3.Row, parents: tuple[str, ...] = ()) -> Task:
    return Task(
        id=str(row["id"]), title=str(_get(row, "title", "")), body=str(_get(row, "body", "")),
        assignee=_get(row, "assignee"), status=str(row["status"]), priority=int(_get(row, "priority", 0) or 0),
        created_at=_float(row, "created_at") or 0.0, started_at=_float(row, "started_at"),
        completed_at=_float(row, "completed_at"), claim_lock=_get(row, "claim_lock"),
        claim_expires=_float(row, "claim_expires"), worker_pid=_get(row, "worker_pid"),
        worker_started_at=_get(row, "worker_started_at"),
        consecutive_failures=int(_get(row, "consecutive_failures", 0) or 0),
        max_retries=_get(row, "max_retries"), max_runtime_seconds=_float(row, "max_runtime_seconds"),
        last_failure_error=_get(row, "last_failure_error"), last_heartbeat_at=_float(row, "last_heartbeat_at"),
        current_run_id=_get(row, "current_run_id"), result=_get(row, "result"), parent_ids=parents,
    )


def run_from_hermes(row: sqlite3.Row) -> Run:
    return Run(
        id=int(row["id"]), task_id=str(row["task_id"]), profile=_get(row, "profile"),
        status=str(_get(row, "status", "")), claim_lock=_get(row, "claim_lock"), worker_pid=_get(row, "worker_pid"),
        worker_started_at=_get(row, "worker_started_at"), session_id=None, output_path=None, log_offset=0,
        started_at=_float(row, "started_at") or 0.0, ended_at=_float(row, "ended_at"), outcome=_get(row, "outcome"),
        error=_get(row, "error"), summary=_get(row, "summary"),
    )


def event_from_hermes(row: sqlite3.Row) -> Event:
    return Event(int(row["id"]), str(row["task_id"]), _get(row, "run_id"), str(row["kind"]),
                 load_payload(_get(row, "payload")), _float(row, "created_at") or 0.0)


def comment_from_hermes(row: sqlite3.Row) -> Comment:
    return Comment(int(row["id"]), str(row["task_id"]), str(_get(row, "author", "")), str(_get(row, "body", "")),
                   _float(row, "created_at") or 0.0)


# --------------------------------------------------------------------------------------
# The reader (synchronous; the service runs it in a thread)
# --------------------------------------------------------------------------------------


class HermesBoardReader:
    """Reads of hermes's board, each on its own short read-only connection."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)

    def _query(self, work: Callable[[sqlite3.Connection, dict[str, set[str]]], Any]) -> Any:
        try:
            conn = connect_read_only(self.path)
        except sqlite3.Error as exc:
            raise StoreError(f"cannot read hermes-agent's board {self.path}: {exc}") from None
        try:
            return work(conn, table_columns(conn))
        except sqlite3.Error as exc:
            raise StoreError(f"cannot read hermes-agent's board {self.path}: {exc}") from None
        finally:
            conn.close()

    def resolve(self, id_or_prefix: str) -> str:
        raw = (id_or_prefix or "").strip()
        if not raw:
            raise UnknownTask("a card id is needed")

        def work(conn, _cols):
            if conn.execute("SELECT 1 FROM tasks WHERE id = ?", (raw,)).fetchone():
                return raw
            prefix = raw if raw.startswith("t_") else "t_" + raw
            if len(prefix) - 2 < MIN_ID_PREFIX:
                raise BadId(f"card id {raw!r} is too short: give at least {MIN_ID_PREFIX} characters after 't_'")
            rows = conn.execute("SELECT id FROM tasks WHERE substr(id, 1, ?) = ? LIMIT 2",
                                (len(prefix), prefix)).fetchall()
            if not rows:
                raise UnknownTask(f"no card {raw!r} on this board")
            if len(rows) > 1:
                raise UnknownTask(f"{raw!r} matches several cards; give more of the id")
            return rows[0][0]

        return self._query(work)

    def tasks(self, statuses: Sequence[str] | None = None, ids: Sequence[str] | None = None) -> list[Task]:
        """Cards in board order (priority, age, id), with their parents."""

        def work(conn, cols):
            where, params = "1", []
            if statuses is not None:
                where = f"status IN ({','.join('?' * len(statuses))})"
                params = list(statuses)
            if ids is not None:
                where += f" AND id IN ({','.join('?' * len(ids))})"
                params += list(ids)
            order = "ORDER BY coalesce(priority, 0) DESC, created_at, id" if "priority" in cols["tasks"] else \
                "ORDER BY created_at, id"
            rows = conn.execute(f"SELECT * FROM tasks WHERE {where} {order}", params).fetchall()
            links = _parents(conn, cols)
            return [task_from_hermes(r, tuple(sorted(links.get(r["id"], ())))) for r in rows]

        return self._query(work)

    def recent(self, status: str, limit: int) -> list[Task]:
        """The ``limit`` newest cards of a finished status (a board with thousands of done
        cards is not read whole on every refresh)."""

        def work(conn, cols):
            rows = conn.execute("SELECT * FROM tasks WHERE status = ? ORDER BY coalesce(completed_at, created_at) "
                                "DESC, id LIMIT ?", (status, limit)).fetchall()
            links = _parents(conn, cols)
            return [task_from_hermes(r, tuple(sorted(links.get(r["id"], ())))) for r in rows]

        return self._query(work)

    def details(self, task_id: str, event_limit: int | None) -> TaskDetails:
        def work(conn, cols):
            row = conn.execute("SELECT * FROM tasks WHERE id = ?", (task_id,)).fetchone()
            if row is None:
                raise UnknownTask(f"no card {task_id!r} on this board")
            links = cols.get("task_links", set())
            parents = children = ()
            if {"parent_id", "child_id"} <= links:
                parents = tuple(r[0] for r in conn.execute(
                    "SELECT parent_id FROM task_links WHERE child_id = ? ORDER BY parent_id", (task_id,)))
                children = tuple(r[0] for r in conn.execute(
                    "SELECT child_id FROM task_links WHERE parent_id = ? ORDER BY child_id", (task_id,)))
            return TaskDetails(
                task=task_from_hermes(row, parents), parents=parents, children=children,
                runs=tuple(_runs(conn, cols, task_id)), events=tuple(_events(conn, task_id, 0, event_limit)),
                comments=tuple(_comments(conn, cols, task_id)),
            )

        return self._query(work)

    def runs_of(self, task_id: str) -> list[Run]:
        return self._query(lambda conn, cols: _runs(conn, cols, task_id))

    def events(self, task_id: str | None, after_id: int, limit: int | None) -> list[Event]:
        return self._query(lambda conn, _cols: _events(conn, task_id, after_id, limit))

    def last_event_id(self) -> int:
        return self._query(lambda conn, _cols: int(conn.execute(
            "SELECT coalesce(max(id), 0) FROM task_events").fetchone()[0]))

    def counts(self) -> dict[str, int]:
        return self._query(lambda conn, _cols: {str(r[0]): int(r[1]) for r in conn.execute(
            "SELECT status, count(*) FROM tasks GROUP BY status")})

    def latest_events(self, kinds: Sequence[str], statuses: Sequence[str]) -> dict[str, Event]:
        k, s = ",".join("?" * len(kinds)), ",".join("?" * len(statuses))
        return self._query(lambda conn, _cols: {e.task_id: e for e in map(event_from_hermes, conn.execute(
            f"SELECT * FROM task_events WHERE id IN (SELECT max(e.id) FROM task_events e JOIN tasks t "
            f"ON t.id = e.task_id WHERE t.status IN ({s}) AND e.kind IN ({k}) GROUP BY e.task_id)",
            [*statuses, *kinds]))})

    def events_since(self, kinds: Sequence[str], since: float) -> list[Event]:
        return self._query(lambda conn, _cols: [event_from_hermes(r) for r in conn.execute(
            f"SELECT * FROM task_events WHERE kind IN ({','.join('?' * len(kinds))}) AND created_at >= ? "
            "ORDER BY id", [*kinds, since])])

    def run_links(self, task_id: str | None) -> list[tuple[int, str, str | None, object]]:
        """(run id, card id, profile, metadata) of a card's runs, or of every run."""

        def work(conn, cols):
            if not {"id", "task_id"} <= cols.get("task_runs", set()):
                return []
            profile = "profile" if "profile" in cols["task_runs"] else "NULL"
            metadata = "metadata" if "metadata" in cols["task_runs"] else "NULL"
            where, params = ("WHERE task_id = ?", [task_id]) if task_id is not None else ("", [])
            return [(int(r[0]), str(r[1]), r[2], r[3]) for r in conn.execute(
                f"SELECT id, task_id, {profile}, {metadata} FROM task_runs {where} ORDER BY id", params)]

        return self._query(work)

    def reason_events(self, kinds: Sequence[str]) -> dict[str, Event]:
        """Each card's latest event of ``kinds`` (a guard, a give-up, or what supersedes them)."""
        marks = ",".join("?" * len(kinds))
        return self._query(lambda conn, _cols: {str(r["task_id"]): event_from_hermes(r) for r in conn.execute(
            f"SELECT * FROM task_events WHERE id IN (SELECT max(id) FROM task_events WHERE kind IN ({marks}) "
            "GROUP BY task_id)", list(kinds))})


def _parents(conn: sqlite3.Connection, cols: dict[str, set[str]]) -> dict[str, list[str]]:
    links: dict[str, list[str]] = {}
    if {"parent_id", "child_id"} <= cols.get("task_links", set()):
        for parent, child in conn.execute("SELECT parent_id, child_id FROM task_links"):
            links.setdefault(child, []).append(parent)
    return links


def _runs(conn: sqlite3.Connection, cols: dict[str, set[str]], task_id: str) -> list[Run]:
    if not {"id", "task_id"} <= cols.get("task_runs", set()):
        return []
    return [run_from_hermes(r) for r in conn.execute("SELECT * FROM task_runs WHERE task_id = ? ORDER BY id",
                                                      (task_id,))]


def _comments(conn: sqlite3.Connection, cols: dict[str, set[str]], task_id: str) -> list[Comment]:
    if not {"id", "task_id", "body"} <= cols.get("task_comments", set()):
        return []
    return [comment_from_hermes(r) for r in conn.execute(
        "SELECT * FROM task_comments WHERE task_id = ? ORDER BY id", (task_id,))]


def _events(conn: sqlite3.Connection, task_id: str | None, after_id: int, limit: int | None) -> list[Event]:
    where, params = "WHERE id > ?", [after_id]
    if task_id is not None:
        where += " AND task_id = ?"
        params.append(task_id)
    if limit is not None:
        sql = f"SELECT * FROM (SELECT * FROM task_events {where} ORDER BY id DESC LIMIT ?) ORDER BY id"
        params.append(limit)
    else:
        sql = f"SELECT * FROM task_events {where} ORDER BY id"
    return [event_from_hermes(r) for r in conn.execute(sql, params)]


# --------------------------------------------------------------------------------------
# Changes through hermes's own CLI
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class HermesChange(TransitionResult):
    """What one change through hermes's CLI did, with hermes's last line (hermes stops
    its workers itself: ``stop`` is always None)."""

    message: str = ""

    def to_json(self) -> dict[str, Any]:
        return {**super().to_json(), "message": self.message}


def hermes_cli() -> str | None:
    """hermes-agent's command on PATH, or None (then its board is read-only)."""
    return shutil.which("hermes")


def _last_line(text: str) -> str:
    """hermes's last non-blank line (outside text: the CLI's terminal guard escapes it)."""
    lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
    return lines[-1] if lines else ""


class HermesBoardService:
    """hermes-agent's board behind the board interface: reads through SQLite read-only,
    changes through ``hermes kanban``, no dispatching."""


    def __init__(self, path: Path, *, home: HomeLayout, settings: Settings, clock: Callable[[], float] = time.time,
                 command: str | None = None) -> None:
        self._reader = HermesBoardReader(path)
        self.home = home
        self.settings = settings
        self._clock = clock
        self.command = command

    @classmethod
    async def open(cls, path: Path, *, home: HomeLayout, settings: Settings,
                   clock: Callable[[], float] = time.time) -> HermesBoardService:
        service = cls(path, home=home, settings=settings, clock=clock, command=hermes_cli())
        await service.counts()  # one read now: an unreadable board fails here, with one line
        return service

    @property
    def path(self) -> Path:
        return self._reader.path

    @property
    def slug(self) -> str | None:
        """Which of hermes's boards this is (``default``, or a named board under
        ``kanban/boards/``); None for a hermes database elsewhere (``--db``)."""
        from engine.hermes.boards import slug_of

        return slug_of(self.home.hermes_kanban_root, self.path)

    @property
    def capabilities(self) -> Capabilities:
        """Read-only without ``hermes`` on PATH; never dispatched, one card per create,
        hermes's profiles and logs, hermes's own verbs and reasons."""
        return Capabilities(read_only=self.command is None, dispatchable=False, batch_create=False,
                            checks_profiles=False, signals_workers=False, worker_log_files=True,
                            reports_reasons=True, hermes_verbs=True)

    @property
    def read_only_reason(self) -> str:
        return ("hermes-agent's board is read-only here: `hermes` is not on PATH "
                "(changes to it go through hermes's own CLI)")

    def now(self) -> float:
        return float(self._clock())

    async def close(self) -> None:
        return None

    async def __aenter__(self) -> HermesBoardService:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def statuses(self) -> tuple[str, ...]:
        """hermes's statuses in board order, plus any other status its cards hold."""
        found = await self.counts()
        return HERMES_STATUSES + tuple(sorted(s for s in found if s not in HERMES_STATUSES))

    async def listen(self, on_change) -> bool:
        """hermes's board announces nothing: it is read on the refresh timer."""
        return False

    async def profiles(self) -> tuple[str, ...]:
        """hermes's own profiles (``default`` and ``<home>/profiles/<name>``): the names its
        cards are assigned to."""
        from engine.hermes.profiles import hermes_profiles

        return await asyncio.to_thread(hermes_profiles, self.home.root)

    def log_path(self, task_id: str) -> Path:
        """hermes's worker log of a card: ``kanban/logs/`` for ``default``, the board's own
        ``logs/`` for a named board."""
        from engine.hermes.boards import logs_dir

        slug = self.slug
        folder = self.home.hermes_kanban_logs_dir if slug is None else logs_dir(self.home.hermes_kanban_root, slug)
        return folder / f"{task_id}.log"

    # -- reads ---------------------------------------------------------------------------

    async def _read(self, func, *args):
        return await asyncio.to_thread(func, *args)

    async def resolve(self, id_or_prefix: str) -> str:
        return await self._read(self._reader.resolve, id_or_prefix)

    async def get(self, task_id: str) -> Task:
        tasks = await self._read(self._reader.tasks, None, [task_id])
        if not tasks:
            raise UnknownTask(f"no card {task_id!r} on this board")
        return tasks[0]

    async def list_tasks(self, statuses: Sequence[str] | None = None) -> list[Task]:
        return await self._read(self._reader.tasks, list(statuses) if statuses else None)

    async def view(self, statuses: Sequence[str], recent_limit: int = 100):
        finished = [s for s in statuses if s in FINISHED]
        busy = [s for s in statuses if s not in FINISHED]
        tasks = await self.list_tasks(busy) if busy else []
        for status in finished:
            tasks += await self._read(self._reader.recent, status, recent_limit)
        return BoardView(tuple(tasks), await self.counts())

    async def details(self, task_id: str, event_limit: int | None = None) -> TaskDetails:
        return await self._read(self._reader.details, task_id, event_limit)

    async def runs_of(self, task_id: str) -> list[Run]:
        return await self._read(self._reader.runs_of, task_id)

    async def events(self, task_id: str | None = None, after_id: int = 0, limit: int | None = None) -> list[Event]:
        return await self._read(self._reader.events, task_id, after_id, limit)

    async def last_event_id(self) -> int:
        return await self._read(self._reader.last_event_id)

    async def counts(self) -> dict[str, int]:
        return await self._read(self._reader.counts)

    async def latest_events(self, kinds: Sequence[str], statuses: Sequence[str]) -> dict[str, Event]:
        return await self._read(self._reader.latest_events, list(kinds), list(statuses))

    async def events_since(self, kinds: Sequence[str], since: float) -> list[Event]:
        return await self._read(self._reader.events_since, list(kinds), since)

    async def reasons(self, tasks: Sequence[Task]) -> dict[str, list]:
        """Why hermes does not spawn each of ``tasks`` (:mod:`engine.hermes.reasons`): card
        id -> its reasons (cards with none are left out)."""
        from engine.hermes import reasons as hr

        events = await self._read(self._reader.reason_events, hr.REASON_EVENTS)
        config = await asyncio.to_thread(hr.read_hermes_config, self.home.root)
        out = {}
        for task in tasks:
            found = hr.card_reasons(task, events.get(task.id), self.home.root, config)
            if found:
                out[task.id] = found
        return out

    async def usage(self, task_id: str | None = None):
        """Tokens and cost of a card's runs (or of the whole board's), through the worker
        sessions they link to (:mod:`engine.hermes.usage`)."""
        from engine.hermes.usage import runs_usage
        from engine.kanban.usage import total

        links = await self._read(self._reader.run_links, task_id)
        return total(await asyncio.to_thread(runs_usage, self.home.root, links))

    async def gateway(self):
        """Whether hermes's gateway (its dispatcher) runs, verified from gateway.pid."""
        from engine.hermes import reasons as hr

        config = await asyncio.to_thread(hr.read_hermes_config, self.home.root)
        return await asyncio.to_thread(hr.gateway_state, self.home.root, config)

    async def data_version(self) -> object:
        """The change times and sizes of hermes's board file and its WAL: every commit
        hermes makes changes one of them (a stat: nothing is opened, nothing written)."""
        from engine.fsutil import sqlite_file_version

        return await self._read(sqlite_file_version, self.path)

    # -- changes (hermes kanban ...) -------------------------------------------------------

    async def _hermes(self, *args: str) -> str:
        """Run ``hermes kanban ARGS`` on this board; its stdout, or StoreError with the
        last line it printed."""
        if self.command is None:
            raise ReadOnlyBoard(self.read_only_reason)
        env = dict(os.environ, HERMES_HOME=str(self.home.root), HERMES_KANBAN_DB=str(self.path))
        slug = self.slug
        board = ["--board", slug] if slug is not None else []  # the board's logs and workspaces
        try:
            proc = await asyncio.create_subprocess_exec(
                self.command, "kanban", *board, *args, stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=env)
        except OSError as exc:
            raise StoreError(f"cannot run {self.command}: {exc.strerror or exc}") from None
        try:
            out, err = await asyncio.wait_for(proc.communicate(), CLI_TIMEOUT_SECONDS)
        except TimeoutError:
            proc.kill()
            await proc.wait()
            raise StoreError(f"hermes kanban {args[0]} did not answer within {CLI_TIMEOUT_SECONDS:g}s") from None
        stdout, stderr = out.decode(errors="replace"), err.decode(errors="replace")
        # hermes 0.19.0 exits 0 on many refusals ("cannot complete ...", "unknown task ..."),
        # saying so on stderr only: nothing on stdout and something on stderr is a failure.
        if proc.returncode != 0 or (not stdout.strip() and stderr.strip()):
            why = _last_line(stderr) or _last_line(stdout) or f"exit status {proc.returncode}"
            raise StoreError(f"hermes kanban {args[0]} failed: {why}")
        return stdout

    async def _change(self, verb: str, task_id: str, *args: str) -> HermesChange:
        before = (await self.get(task_id)).status
        out = await self._hermes(verb, *args)
        after = (await self.get(task_id)).status
        return HermesChange(task_id, before, after, message=_last_line(out))

    async def create(self, new: NewTask, *, actor: str = "cli") -> Task:
        args = ["create", "--json"]
        if new.body:
            args += ["--body", new.body]
        if new.assignee:
            args += ["--assignee", new.assignee]
        for parent in new.parents:
            args += ["--parent", await self.resolve(parent)]
        if new.priority:
            args += ["--priority", str(new.priority)]
        if new.max_retries is not None:
            args += ["--max-retries", str(new.max_retries)]
        if new.max_runtime_seconds is not None:
            args += ["--max-runtime", f"{int(new.max_runtime_seconds)}s"]
        out = await self._hermes(*args, "--", new.title)
        try:
            task_id = str(json.loads(out)["id"])
        except (ValueError, KeyError, TypeError):
            raise StoreError(f"hermes kanban create answered something other than a card: {_last_line(out)!r}") \
                from None
        return await self.get(task_id)

    async def create_many(self, new: Sequence[NewTask], *, actor: str = "cli") -> list[Task]:
        """Refused: hermes takes one card per ``hermes kanban create``, never several in
        one transaction (``capabilities.batch_create`` is False)."""
        raise StoreError("hermes-agent's board takes one card per `hermes kanban create`, never several in one "
                         "transaction")

    async def complete(self, task_id: str, summary: str | None = None, call=None) -> HermesChange:
        return await self._change("complete", task_id, *(["--summary", summary] if summary else []), "--", task_id)

    async def block(self, task_id: str, reason: str | None = None, call=None) -> HermesChange:
        return await self._change("block", task_id, "--", task_id, *([reason] if reason else []))

    async def unblock(self, task_id: str) -> HermesChange:
        return await self._change("unblock", task_id, "--", task_id)

    async def assign(self, task_id: str, assignee: str | None) -> HermesChange:
        return await self._change("assign", task_id, "--", task_id, assignee or "none")

    async def archive(self, task_id: str, expected=None) -> HermesChange:
        await self._still_as_shown(task_id, expected)
        return await self._change("archive", task_id, "--", task_id)

    async def _still_as_shown(self, task_id: str, expected) -> None:
        """A dialog's action (``expected``: the run and worker pid it showed) on the card
        as it is now: refused if they changed (hermes's CLI then acts on the card)."""
        if expected is not None:
            from engine.kanban.transitions import check_expected

            check_expected(await self.get(task_id), expected)

    async def comment(self, task_id: str, text: str) -> HermesChange:
        return await self._change("comment", task_id, "--", task_id, text)

    async def _not_here(self, what: str):
        raise StoreError(f"{what} is not available on hermes-agent's board (use hermes's own CLI)")

    async def report_usage(self, task_id: str, *, input_tokens: int = 0, output_tokens: int = 0,
                           cost_usd: float | None = None, call=None):
        raise ReadOnlyBoard("hermes-agent records its workers' usage itself (state.db): `kanban usage` is "
                            "for hermes-tui's own board")

    async def review(self, task_id: str, summary: str | None = None, call=None):
        await self._not_here("review")

    async def heartbeat(self, task_id: str, call=None):
        await self._not_here("heartbeat")

    async def reclaim(self, task_id: str, reason: str = "", expected=None) -> HermesChange:
        """hermes releases the card's worker claim (``hermes kanban reclaim``). ``expected``
        (what a dialog showed) is checked like the board service's: a card whose run changed
        meanwhile is refused and nothing is asked of hermes."""
        await self._still_as_shown(task_id, expected)
        return await self._change("reclaim", task_id, *(["--reason", reason] if reason else []), "--", task_id)

    async def reassign(self, task_id: str, profile: str | None, *, reclaim: bool = False,
                       reason: str = "") -> HermesChange:
        extra = (["--reclaim"] if reclaim else []) + (["--reason", reason] if reason else [])
        return await self._change("reassign", task_id, *extra, "--", task_id, profile or "none")

    async def schedule(self, task_id: str, reason: str = "") -> HermesChange:
        """Park the card in scheduled (waiting on time, not on a person)."""
        return await self._change("schedule", task_id, "--", task_id, *([reason] if reason else []))

    async def promote(self, task_id: str, reason: str = "", *, force: bool = False) -> HermesChange:
        """todo/blocked -> ready by hand (``--force``: even with open parents)."""
        return await self._change("promote", task_id, *(["--force"] if force else []), "--", task_id,
                                  *([reason] if reason else []))

    async def link(self, parent_id: str, child_id: str, *, unlink: bool = False) -> HermesChange:
        """Add (or remove) the dependency parent -> child."""
        return await self._change("unlink" if unlink else "link", child_id, "--", parent_id, child_id)

    async def edit(self, task_id: str, result: str, summary: str | None = None) -> HermesChange:
        """Backfill a done card's result (and summary)."""
        return await self._change("edit", task_id, "--result", result, *(["--summary", summary] if summary else []),
                                  "--", task_id)

    async def move(self, task_id: str, to_status: str, expected=None) -> HermesChange:
        """A move the pane offers, as the hermes verb that makes it (done: complete,
        blocked: block, ready from blocked: unblock, archived: archive); others are refused."""
        await self._still_as_shown(task_id, expected)
        current = (await self.get(task_id)).status
        if to_status == "done":
            return await self.complete(task_id)
        if to_status == "blocked":
            return await self.block(task_id)
        if to_status == "ready" and current in ("blocked", "scheduled"):
            return await self.unblock(task_id)
        if to_status == "archived":
            return await self.archive(task_id)
        await self._not_here(f"moving a card from {current} to {to_status}")

    async def tick(self, spawner=None):
        raise DispatchRefused(f"{self.path} is hermes-agent's board: hermes's gateway dispatches it, "
                              "hermes-tui's dispatcher never does")
