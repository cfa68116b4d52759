"""The board's dialogs: the new-card form and a card's details.

Both only collect or show: the board pane does the engine work (in async workers), so
a dialog never touches the board itself except to load what it shows (through the
board service). Outside text (titles, bodies, names, errors) is plain text, never markup.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.suggester import SuggestFromList
from textual.widgets import Button, Input, Label, Static

from engine.kanban.backend import StoreError
from engine.kanban.describe import Part, describe_task
from engine.kanban.models import NewTask, TaskDetails
from engine.kanban.service import BoardService
from engine.kanban.workers import read_tail
from engine.text import escape_text
from widgets.common.dialog import Dialog

LOG_TAIL_BYTES = 6000
LOG_TAIL_LINES = 30
EVENTS_SHOWN = 20
DETAILS_REFRESH_SECONDS = 2.0


class NewCardScreen(Dialog[NewTask | None]):
    """A form for a new card. Dismisses with the NewTask, or None when cancelled."""

    BINDINGS = [
        Binding("escape", "cancel", "Cancel", id="board.form.cancel"),
        Binding("ctrl+s", "create", "Create", id="board.form.create"),
    ]

    DEFAULT_CSS = """
    NewCardScreen > Vertical { max-width: 90; max-height: 100%; }
    NewCardScreen #form-fields { height: auto; }
    NewCardScreen .title { margin-bottom: 1; }
    NewCardScreen Label { color: $text-muted; margin-top: 1; }
    NewCardScreen .error { color: $error; height: auto; }
    """
    FIRST_FOCUS = "#title"
    # The fields scroll; besides them: the box's border and padding (4), the title and
    # its margin (2), the error line (1), the buttons and their margin (4).
    SCROLLS = "#form-fields"
    CHROME_ROWS = 11

    def __init__(self, profiles: Sequence[str], default_assignee: str | None = None) -> None:
        super().__init__()
        self._profiles = list(profiles)
        self._default = default_assignee or ""

    def dialog_title(self) -> str:
        return "New card"

    def compose_body(self) -> ComposeResult:
        # The fields scroll (a short terminal has no room for all five, and focusing one
        # scrolls it into view); the error line and the buttons stay in sight under them.
        with VerticalScroll(id="form-fields"):
            yield Label("Title")
            yield Input(placeholder="what needs doing", id="title")
            yield Label("Body (reaches the worker as HERMES_KANBAN_BODY)")
            yield Input(placeholder="details, links, acceptance", id="body")
            hint = f" ({', '.join(self._profiles)})" if self._profiles else " (no profiles configured)"
            yield Label(Text("Assignee: a worker profile" + hint))
            yield Input(value=self._default, placeholder="profile name, or empty", id="assignee",
                        suggester=SuggestFromList(self._profiles, case_sensitive=True))
            yield Label("Priority (higher first)")
            yield Input(value="0", id="priority", type="integer")
            yield Label("Parents: card ids it waits for, comma-separated")
            yield Input(placeholder="t_1a2b3c4d, t_5e6f7a8b", id="parents")
        yield Static("", classes="error", id="form-error")
        with Horizontal(classes="buttons"):
            yield Button("Cancel", id="cancel")
            yield Button("Create", id="create", variant="primary")

    def _value(self, field_id: str) -> str:
        return self.query_one(f"#{field_id}", Input).value.strip()

    def action_create(self) -> None:
        title = self._value("title")
        error = self.query_one("#form-error", Static)
        if not title:
            error.update("A card needs a title.")
            self.query_one("#title", Input).focus()
            return
        try:
            priority = int(self._value("priority") or "0")
        except ValueError:
            error.update("Priority must be a whole number.")
            return
        parents = tuple(p.strip() for p in self._value("parents").split(",") if p.strip())
        self.dismiss(NewTask(title=title, body=self.query_one("#body", Input).value,
                             assignee=self._value("assignee") or None, parents=parents, priority=priority))

    @on(Input.Submitted)
    def _submitted(self) -> None:
        self.action_create()

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        event.stop()
        if event.button.id == "create":
            self.action_create()
        else:
            self.dismiss(None)


class AssignScreen(Dialog[str | None]):
    """Ask for a card's new assignee. Dismisses with the name ("" = nobody), or None."""

    BINDINGS = [Binding("escape", "cancel", "Cancel", id="board.assign.cancel")]

    DEFAULT_CSS = """
    AssignScreen > Vertical { width: 70%; max-width: 80; }
    AssignScreen .hint { margin-top: 1; }
    """
    FIRST_FOCUS = "Input"

    def __init__(self, task_id: str, current: str | None, profiles: Sequence[str]) -> None:
        super().__init__()
        self.task_id = task_id
        self._current = current or ""
        self._profiles = list(profiles)

    def dialog_title(self) -> str:
        return f"Assign {self.task_id}"

    def compose_body(self) -> ComposeResult:
        yield Input(value=self._current, placeholder="profile name (empty: nobody)", id="assignee",
                    suggester=SuggestFromList(self._profiles, case_sensitive=True))
        known = ", ".join(self._profiles) or "none configured"
        yield Static(Text(f"Profiles: {known}. A different profile starts with 0 failures. "
                          "Enter assigns, Escape cancels."), classes="hint")

    @on(Input.Submitted)
    def _submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.dismiss(event.value.strip())


# How the details dialog styles each part of the card's description.
PART_STYLES = {Part.TITLE: "bold", Part.LABEL: "dim", Part.NAME: "bold", Part.ERROR: "red", Part.EMPTY: "dim",
               Part.GOOD: "green", Part.BAD: "yellow", Part.NOTE: "dim"}


def render_details(details: TaskDetails, log_tail: Sequence[str], now: float,
                   event_limit: int | None = None, usage: Sequence[str] | None = None,
                   redact: bool = True) -> Text:
    """The card's description (:func:`describe_task`, what ``kanban show`` prints) with
    the tail of its worker log, styled, as one Rich Text (also what the tests read);
    secrets masked as ``kanban show`` and the processes pane mask them."""
    out = Text()
    for line in describe_task(details, now, event_limit=event_limit, log_tail=log_tail, usage=usage,
                              redact=redact):
        for text, part in line:
            out.append(escape_text(text, keep_lines=True), style=PART_STYLES.get(part, ""))  # outside text: shown, never acted on
        out.append("\n")
    return out


class CardDetailsScreen(Dialog[str | None]):
    """A card's body, runs, last events, last failure and the tail of its worker log.
    Dismisses with ``"output"`` when the user asks for the worker's output."""

    BINDINGS = [
        Binding("escape,q", "dismiss(None)", "Close", id="board.details.close"),
        Binding("o", "dismiss('output')", "Worker output", id="board.details.output"),
    ]

    DEFAULT_CSS = """
    CardDetailsScreen > Vertical { width: 90%; max-width: 120; height: 90%; padding: 0 1; }
    CardDetailsScreen .hint { height: 1; }
    """

    def __init__(self, service: BoardService, task_id: str, log_path, clock, redact: bool = True) -> None:
        super().__init__()
        self._redact = redact
        self._service = service
        self.task_id = task_id
        self._log_path = log_path
        self._clock = clock
        self._shown = ""

    def compose_body(self) -> ComposeResult:
        with VerticalScroll():
            yield Static(Text(f"Loading {self.task_id}…"), id="details-body")
        yield Static("escape close · o worker output in the processes pane", classes="hint")

    def on_mount(self) -> None:
        self.load()
        self.set_interval(DETAILS_REFRESH_SECONDS, self.load)  # a running card keeps changing

    @work(exclusive=True, group="card-details")
    async def load(self) -> None:
        body = self.query_one("#details-body", Static)
        try:
            details = await self._service.details(self.task_id, event_limit=EVENTS_SHOWN)
        except StoreError as exc:
            body.update(Text(str(exc)))
            return
        raw = await asyncio.to_thread(read_tail, self._log_path, LOG_TAIL_BYTES)
        lines = raw.decode("utf-8", errors="replace").splitlines()[-LOG_TAIL_LINES:]
        from engine.kanban.usage import usage_lines

        try:  # tokens and cost per run (a run without a report or a session link: "not linked")
            usage = usage_lines(await self._service.usage(self.task_id))
        except StoreError:
            usage = None
        text = render_details(details, lines, self._clock(), EVENTS_SHOWN, usage, self._redact)
        if text.plain != self._shown:
            self._shown = text.plain
            body.update(text)
