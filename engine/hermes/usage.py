"""Tokens and cost of hermes-agent's runs, from hermes's own records (read-only).

Facts from hermes-agent 0.19.0:

- A worker that completes its card through hermes's ``kanban_complete`` tool stamps its
  own session id into the run's ``metadata`` (``task_runs.metadata``, JSON):
  ``{"worker_session_id": "<session id>"}`` (``tools/kanban_tools.py``). Nothing else
  links a run to a session: a run ended any other way (a person's ``hermes kanban
  complete``, a crash, a spawn failure) has no link.
- hermes records each session's usage in the ``sessions`` table of the ``state.db`` of
  the home the worker ran in (``input_tokens``, ``output_tokens``, ``cache_read_tokens``,
  ``cache_write_tokens``, ``reasoning_tokens``, ``estimated_cost_usd``,
  ``actual_cost_usd``, ``model``; ``hermes_state.py``). A worker runs in its profile's
  home: ``profiles/<assignee>/state.db``, the root ``state.db`` for ``default``.

Every database is opened read-only through SQLite (immutable when no writer has it
open), as hermes's board is: nothing is created or changed beside it.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable
from pathlib import Path

from engine.hermes.processes import hermes_homes
from engine.kanban.backends.hermes.board_file import connect_read_only, table_columns
from engine.kanban.usage import RunUsage

SESSION_KEY = "worker_session_id"


def session_of_run(metadata: object) -> str | None:
    """The worker session a run's metadata names, or None."""
    if isinstance(metadata, str):
        try:
            metadata = json.loads(metadata)
        except (ValueError, RecursionError):
            return None
    value = metadata.get(SESSION_KEY) if isinstance(metadata, dict) else None
    return value if isinstance(value, str) and value else None


def _state_dbs(root: Path, profile: str | None) -> list[Path]:
    """The state.db files to look in: the run's profile's home first, then every other."""
    homes = hermes_homes(root)
    first = [home for name, home in homes if name == profile] if profile not in (None, "", "default") else []
    ordered = first + [home for _name, home in homes if home not in first]
    return [home / "state.db" for home in ordered if (home / "state.db").is_file()]


def _session_row(path: Path, session_id: str) -> sqlite3.Row | None:
    try:
        conn = connect_read_only(path)
    except sqlite3.Error:
        return None
    try:
        if "input_tokens" not in table_columns(conn).get("sessions", set()):
            return None
        return conn.execute("SELECT * FROM sessions WHERE id = ?", (session_id,)).fetchone()
    except sqlite3.Error:
        return None
    finally:
        conn.close()


def _value(row: sqlite3.Row, name: str):
    try:
        return row[name]
    except (IndexError, KeyError):
        return None


def run_usage(root: Path, run_id: int, task_id: str, profile: str | None, metadata: object) -> RunUsage:
    """One run's usage through the session its metadata names, or why it has none."""
    session_id = session_of_run(metadata)
    if session_id is None:
        return RunUsage(run_id, task_id, False, why="the run records no worker session")
    for path in _state_dbs(root, profile):
        row = _session_row(path, session_id)
        if row is None:
            continue
        cost = _value(row, "actual_cost_usd") or _value(row, "estimated_cost_usd")
        return RunUsage(run_id, task_id, True, input_tokens=int(_value(row, "input_tokens") or 0),
                        output_tokens=int(_value(row, "output_tokens") or 0),
                        cost_usd=float(cost) if cost is not None else None, session_id=session_id,
                        model=_value(row, "model") or None)
    return RunUsage(run_id, task_id, False, session_id=session_id,
                    why=f"its worker session {session_id} is in no state.db of this home")


def runs_usage(root: Path, runs: Iterable[tuple[int, str, str | None, object]]) -> list[RunUsage]:
    """Usage of (run id, card id, profile, metadata) runs, in their order."""
    return [run_usage(root, run_id, task_id, profile, metadata) for run_id, task_id, profile, metadata in runs]
