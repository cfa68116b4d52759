"""The app's own key bindings (the "Everywhere" ones), apart from the app class, so the
keymap can list and check them without importing the app (which imports the keymap)."""

from __future__ import annotations

from textual.binding import Binding

APP_BINDINGS = [
    Binding("q", "quit", "Quit", id="app.quit"),
    Binding("question_mark", "help", "Help", id="app.help"),
    Binding("1", "focus_pane('board')", "Go to the board", show=False, id="app.pane.board"),
    Binding("2", "focus_pane('processes')", "Go to processes", show=False, id="app.pane.processes"),
    Binding("3", "focus_pane('scratch')", "Go to scratch entries", show=False, id="app.pane.scratch"),
    Binding("4", "focus_pane('prune-log')", "Go to the prune log", show=False, id="app.pane.prune_log"),
    Binding("z", "zoom", "Zoom", tooltip="Zoom the focused pane (again to restore)", id="app.zoom",
            show=False),
    Binding("colon", "focus_command_bar", "Command", tooltip="Type a command to run", id="app.command"),
    Binding("exclamation_mark", "attention", "Attention", tooltip="What needs you (the attention list)",
            id="app.attention", show=False),
    # Works while the command bar has focus (priority); remappable by its id. Not in the
    # Footer: the command bar names this key while a command runs.
    Binding("ctrl+b", "background", "Background", tooltip="Move the foreground command to the background",
            id="processes.background", priority=True, show=False),
]


class AppKeys:
    """Stands for the app where a check has none at hand (``doctor``, ``keys:`` validation):
    the same BINDINGS list the app has."""

    BINDINGS = APP_BINDINGS
