"""Every dialog fits an 80x24 terminal or scrolls: each control the user can reach
with Tab is on screen when it has the focus, and the buttons and the error line are
always on screen (the new-card form's Priority, Parents, Cancel/Create and error line
fell below its box, and Tab did not bring them into view)."""

from __future__ import annotations

import pytest
from textual.app import App

from widgets.board.board_modals import AssignScreen, NewCardScreen
from widgets.common.confirm import ConfirmModal
from widgets.common.help_screen import HelpRow, HelpScreen

SIZES = [(80, 24), (120, 36), (160, 48)]
LONG_BODY = "\n".join(f"line {i} of what the dialog will do, in full" for i in range(60))


def on_screen(screen, widget) -> bool:
    """The widget's first and last cells are the widget itself (or a part of it) where
    the screen is drawn: not cut by its box, not scrolled away, not under another."""
    region = widget.region
    if not region:
        return False
    for x, y in ((region.x, region.y), (region.right - 1, region.bottom - 1)):
        try:
            hit, _ = screen.get_widget_at(x, y)
        except Exception:  # outside the screen
            return False
        if hit is not widget and widget not in hit.ancestors:
            return False
    return True


class Host(App):
    def __init__(self, make) -> None:
        super().__init__()
        self._make = make

    def on_mount(self) -> None:
        self.push_screen(self._make())


DIALOGS = {
    "new-card": lambda: NewCardScreen(["worker", "writer"], "worker"),
    "assign": lambda: AssignScreen("t_1a2b3c4d", "worker", ["worker", "writer"]),
    "confirm-long": lambda: ConfirmModal("Kill proc_0123456789ab (pid 4242)?", LONG_BODY, yes_label="Kill"),
    "help": lambda: HelpScreen([HelpRow("Section", "k", "what the key does " * 3, "pane.key")] * 90),
}


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("name", list(DIALOGS))
async def test_every_control_of_a_dialog_is_on_screen_when_focused(name, size):
    app = Host(DIALOGS[name])
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        screen = app.screen
        always = list(screen.query("Button")) + list(screen.query("#form-error"))
        for widget in always:
            assert on_screen(screen, widget), f"{widget} is off screen at {size}"
        focusable = [w for w in screen.query("*") if w.focusable]
        seen = set()
        for _ in range(len(focusable) + 1):
            focused = screen.focused
            if focused is not None:
                seen.add(focused)
                await pilot.pause()
                assert on_screen(screen, focused), f"focused {focused} is off screen at {size}"
            await pilot.press("tab")
            await pilot.pause()
        assert {w for w in focusable if w.can_focus} <= seen  # Tab reached every control


async def test_the_new_card_form_s_error_line_shows_at_80x24():
    app = Host(DIALOGS["new-card"])
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        await pilot.press("ctrl+s")  # no title
        await pilot.pause()
        error = app.screen.query_one("#form-error")
        assert "needs a title" in str(error.render())
        assert on_screen(app.screen, error)
