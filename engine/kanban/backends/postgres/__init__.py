"""The PostgreSQL board: one board shared by several machines.

- :mod:`engine.kanban.backends.postgres.url`     which server and database (``postgresql://...``), printed without its password
- :mod:`engine.kanban.backends.postgres.schema`  the tables, their version, and refusing a database that is not ours
- :mod:`engine.kanban.backends.postgres.dialect` the few spellings where PostgreSQL's SQL differs from SQLite's
- :mod:`engine.kanban.backends.postgres.board`   :class:`PgBoard`, the same store interface as the SQLite board
- :mod:`engine.kanban.backends.postgres.tick`    a dispatch tick's steps as one statement each (few round trips)

The transitions and the dispatcher run unchanged on top of either board: the rules
(compare-and-set updates, events, the failure breaker) exist once. The one exception is
the tick's hot path: its first look, its claim and its record are each one PostgreSQL
statement here (a round trip costs a network's latency), and tests/test_pg_tick.py
holds them to what the statement-by-statement tick writes.
"""
