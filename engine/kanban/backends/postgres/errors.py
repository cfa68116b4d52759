"""The PostgreSQL board's own refusals, importable without the driver (the pane
catches them without loading asyncpg for an SQLite board).

Three kinds of trouble are *of the moment*, and every long-lived user (``kanban daemon``,
the app's dispatch loop and board pane) retries them the same way: one line, then the
next call tries again. They are the :class:`BoardUnreachable` family:

- :class:`BoardUnreachable` itself: the server is away (refused, lost, shut down);
- :class:`StatementRefused`: the server is there but refused one statement for a reason
  of the moment (``lock_timeout``, ``statement_timeout``, a deadlock, a serialization
  failure, no room or no connection slot left); the transaction was rolled back whole;
- :class:`DriverFault`: the driver refused a call on the board's connection (``another
  operation is in progress``): the connection is dropped and the next call opens one.

``retrying`` is the words a retrying user prints after the error's line, ``back`` what
it says when the board answers again, and ``status`` what a status line shows meanwhile.
"""

from __future__ import annotations

from engine.kanban.backend import StoreError


class BoardUnreachable(StoreError):
    """The board's server cannot be reached now (refused, lost, shut down): one line.
    Not the board's fault, and not final: the next call connects again."""

    retrying = "retrying until it is back"
    back = "is reachable again"
    status = "board unreachable"


class StatementRefused(BoardUnreachable):
    """The server refused one statement for a reason of the moment (lock_timeout,
    statement_timeout, a deadlock, a serialization failure, resources): nothing of the
    change was applied, and the next call (the next tick) tries again. A subclass of
    :class:`BoardUnreachable` so every user that waits out an outage waits this out too:
    a daemon that exited on it left its cards to other hosts, which started them again."""

    retrying = "retrying"
    back = "answers again"
    status = "board refused a statement"


class BoardConflict(StatementRefused):
    """Two hosts changed the same rows at once and the server chose this side to give way."""


class DriverFault(BoardUnreachable):
    """The database driver refused a call on the board's connection (``another operation
    is in progress``): not the server, not the board. The connection is dropped; the
    next call opens a new one."""

    retrying = "retrying on a new connection"
    back = "answers again"
    status = "board connection reset"


class NoBoardYet(StoreError):
    """The database is empty and the caller did not ask to create the board (the app
    shows "no board yet", as for a missing board file)."""


class UnusableUrl(StoreError):
    """The driver cannot use the board's URL (an option it does not know, a value it
    cannot read): bad input, exit 2, one line without the password."""
