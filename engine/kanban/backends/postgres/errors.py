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


class HostIdInUse(StoreError):
    """Another machine holds this host id's live lease (another boot of the same id: two
    machines named alike, a cloned VM): this dispatcher must do nothing, since each would
    take the other's live workers for its own crashed ones. One line naming the host id
    and both boots. Not retried by a daemon: a person must give each machine its own id
    (or, after a reboot, wait for the old boot's lease to lapse)."""

    def __init__(self, host_id: str, this_boot: str, holder_boot: str, seconds_left: float) -> None:
        from engine.kanban.hosts import HOST_ID_VARIABLE

        self.host_id, self.this_boot, self.holder_boot = host_id, this_boot, holder_boot
        super().__init__(
            f"host id {host_id!r} is in use by another machine: its lease (boot {holder_boot!r}) runs "
            f"{max(0.0, seconds_left):.0f}s more, this machine is boot {this_boot!r}; nothing was dispatched. "
            f"Give each machine its own {HOST_ID_VARIABLE} (after a reboot: the old lease lapses by itself)")
