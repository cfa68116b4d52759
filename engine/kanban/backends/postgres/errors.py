"""The PostgreSQL board's own refusals, importable without the driver (the pane
catches them without loading asyncpg for an SQLite board)."""

from __future__ import annotations

from engine.kanban.backend import StoreError


class BoardUnreachable(StoreError):
    """The board's server cannot be reached now (refused, lost, shut down): one line.
    Not the board's fault, and not final: the next call connects again."""


class NoBoardYet(StoreError):
    """The database is empty and the caller did not ask to create the board (the app
    shows "no board yet", as for a missing board file)."""


class BoardConflict(StoreError):
    """Two hosts changed the same rows at once and the server chose this side to give way."""


class UnusableUrl(StoreError):
    """The driver cannot use the board's URL (an option it does not know, a value it
    cannot read): bad input, exit 2, one line without the password."""
