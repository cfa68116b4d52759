"""Outside text as an attention item carries it: secrets masked, one line, no control
characters (an item's words reach terminals, desktop notices and webhooks)."""

from __future__ import annotations

from engine.processes.redact import redact
from engine.text import escape_text, one_line

WHY_CHARS = 160


def outside(text: str | None, limit: int = WHY_CHARS) -> str:
    """``text`` from a card, a session or a log as an item may show it."""
    if not text:
        return ""
    return escape_text(one_line(redact(str(text)), limit))


def plural(n: int, one: str, many: str | None = None) -> str:
    return f"{n} {one if n == 1 else (many or one + 's')}"
