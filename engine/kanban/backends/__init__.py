"""The board backends, one folder each; what every one must do is engine/kanban/backend.py.

- :mod:`engine.kanban.backends.sqlite`   hermes-tui's board in a file of the home (the default)
- :mod:`engine.kanban.backends.postgres` hermes-tui's board in a PostgreSQL database (several machines)
- :mod:`engine.kanban.backends.hermes`   hermes-agent's own board: read-only reads, changes through `hermes kanban`
"""
