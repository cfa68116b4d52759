"""The suite's own waits (tests/support/waiting.py) wait for what they say."""

from __future__ import annotations

from textual.app import App, ComposeResult
from textual.screen import Screen
from textual.widgets import Static

from tests.support import screen_shown, wait_until_pilot


class _Dialog(Screen):
    def compose(self) -> ComposeResult:
        yield Static("body", classes="body")


async def test_a_pushed_screen_is_shown_only_once_it_is_composed_and_mounted():
    """``app.screen`` is the new screen from the moment it is pushed, before its widgets
    exist: a wait on ``isinstance(app.screen, ...)`` let two tests look into an empty
    dialog in a paired -n 4 round. ``screen_shown`` waits for its widgets."""
    app = App()
    async with app.run_test() as pilot:
        app.push_screen(_Dialog())  # no await: the screen's own task has not run yet
        assert isinstance(app.screen, _Dialog)
        assert not screen_shown(app, _Dialog)
        assert not app.screen.query(".body")
        await wait_until_pilot(pilot, lambda: screen_shown(app, _Dialog), what="the dialog composed")
        assert app.screen.query_one(".body")
