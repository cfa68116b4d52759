"""Thread work reaches the UI one way, a typed Message (docs/architecture.md, Concurrency):
no call_from_thread anywhere in the UI, nothing reaching into the app's private
attributes, and a message that a newer one makes moot is dropped for it."""

from __future__ import annotations

import ast
from pathlib import Path

from textual.app import App, ComposeResult
from textual.widgets import Static

from engine.config import Settings
from tests.support import wait_until_pilot
from widgets.processes.output_view import OutputView
from widgets.scratch.scratch_pane import ScratchPane

REPO = Path(__file__).resolve().parent.parent
THREAD_CALLS = ("call_from_thread", "call_soon_threadsafe")


def _is_app(node: ast.expr) -> bool:
    return (isinstance(node, ast.Name) and node.id == "app") or (isinstance(node, ast.Attribute)
                                                                 and node.attr == "app")


def _private(name: object) -> bool:
    return isinstance(name, str) and name.startswith("_") and not name.startswith("__")


def offences(path: Path) -> list[str]:
    """Each ``call_from_thread`` (or the loop's own thread hop), and each read of a
    private attribute of the app (``app._x``, ``self.app._x``, ``getattr(app, "_x")``)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    where = path.relative_to(REPO)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            if node.attr in THREAD_CALLS:
                found.append(f"{where}:{node.lineno} {node.attr}")
            elif _private(node.attr) and _is_app(node.value):
                found.append(f"{where}:{node.lineno} app.{node.attr}")
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr"
              and len(node.args) >= 2 and _is_app(node.args[0]) and isinstance(node.args[1], ast.Constant)
              and _private(node.args[1].value)):
            found.append(f"{where}:{node.lineno} getattr(app, {node.args[1].value!r})")
    return found


def test_the_ui_posts_messages_and_keeps_out_of_the_app_s_private_attributes():
    assert (REPO / "widgets" / "processes" / "output_view.py").exists()
    found = [hit for package in ("widgets", "hermes_tui") for path in sorted((REPO / package).rglob("*.py"))
             for hit in offences(path)]
    assert found == []


def test_only_a_message_made_moot_is_replaced():
    survey = ScratchPane.Surveyed(survey=object())
    assert ScratchPane.Surveyed(error="unreadable").can_replace(survey)
    assert not survey.can_replace(ScratchPane.Surveyed(error="unreadable"))  # the table would stay stale
    batch = OutputView.NewLines(["a"], 1, 0)
    assert not batch.can_replace(OutputView.NewLines(["b"], 1, 0))  # every batch of output must arrive


class CountingScratchPane(ScratchPane):
    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.progress_shown: list[int] = []

    def on_scratch_pane_prune_progress(self, message: ScratchPane.PruneProgress) -> None:
        self.progress_shown.append(message.done)  # then ScratchPane's own handler draws it


class ScratchOnly(App):
    def __init__(self, home) -> None:
        super().__init__()
        self.home = home

    def compose(self) -> ComposeResult:
        yield CountingScratchPane(home=self.home, settings=Settings())


async def test_prune_progress_waiting_behind_a_newer_one_is_not_drawn(home):
    app = ScratchOnly(home)
    async with app.run_test(size=(120, 30)) as pilot:
        pane = app.query_one(CountingScratchPane)
        for done in (1, 2, 3):  # queued together, as a fast pass posts them while the UI is busy
            pane.post_message(ScratchPane.PruneProgress(done, 3, done * 1024, f"entry-{done}"))
        label = pane.query_one("#scratch-progress-label", Static)
        await wait_until_pilot(pilot, lambda: pane.progress_shown, what="the progress drawn")
        assert pane.progress_shown == [3]
        assert "pruning 3/3" in str(label.render())
