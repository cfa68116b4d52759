"""hermes-tui's board in an SQLite file (WAL), on one connection with a thread of its own.

- :mod:`engine.kanban.backends.sqlite.store`      :class:`Board`: schema, migrations, reads, transactions
- :mod:`engine.kanban.backends.sqlite.connection` the connection's own thread

:class:`engine.kanban.service.BoardService` stands on it (or on the PostgreSQL store,
which has the same interface) to be the :class:`engine.kanban.backend.BoardBackend`.
"""
