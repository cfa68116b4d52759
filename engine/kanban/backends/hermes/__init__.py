"""hermes-agent's own board, behind the board backend protocol.

- :mod:`engine.kanban.backends.hermes.board`      :class:`HermesBoardService`, the backend
- :mod:`engine.kanban.backends.hermes.board_file` reading hermes's board file (read-only, schema by tables)
"""
