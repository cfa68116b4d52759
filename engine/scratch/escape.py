"""Outside text made safe for one log line or a terminal.

Its own module so that what only lists (``scratch``, the plan) can escape a name
without importing the audit log's writer (logging and its handlers).
"""

from __future__ import annotations


def escape_text(text: str) -> str:
    """``text`` with control characters, lone surrogates and other unprintable
    characters written as Python escapes (``\\n``, ``\\x1b``, ``\\udcff``), so it can
    neither split a log record nor drive a terminal. Printable text is unchanged."""
    text = str(text)
    if text.isprintable():
        try:
            text.encode("utf-8")
            return text
        except UnicodeEncodeError:
            pass
    return repr(text)[1:-1]
