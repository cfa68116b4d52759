"""What an app under test tells the user: every notification, as text."""

from __future__ import annotations


def capture_notes(app) -> list[str]:
    """The text of every notification ``app`` shows from now on (the list grows as they come)."""
    notes: list[str] = []
    real = app.notify

    def notify(message, **kw):
        notes.append(str(message))
        return real(message, **kw)

    app.notify = notify
    return notes
