"""The PostgreSQL board: one board shared by several machines.

- :mod:`engine.kanban.backends.postgres.url`     which server and database (``postgresql://...``), printed without its password
- :mod:`engine.kanban.backends.postgres.schema`  the tables, their version, and refusing a database that is not ours
- :mod:`engine.kanban.backends.postgres.dialect` the few spellings where PostgreSQL's SQL differs from SQLite's
- :mod:`engine.kanban.backends.postgres.board`   :class:`PgBoard`, the same store interface as the SQLite board

The transitions and the dispatcher run unchanged on top of either board: the rules
(compare-and-set updates, events, the failure breaker) exist once.
"""
