"""The board's statuses, in board (column) order: constants only, so that code which
needs just these (the pane's columns at start-up) does not load every record class.
``engine.kanban.models`` re-exports them."""

from __future__ import annotations

TODO = "todo"
READY = "ready"
RUNNING = "running"
REVIEW = "review"
BLOCKED = "blocked"
DONE = "done"
ARCHIVED = "archived"  # shown only behind a toggle
STATUSES = (TODO, READY, RUNNING, REVIEW, BLOCKED, DONE, ARCHIVED)
# A parent in one of these no longer holds its children back.
FINISHED = (DONE, ARCHIVED)
