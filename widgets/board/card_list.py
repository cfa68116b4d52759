"""One board column's cards, drawn so that only the cards in view cost anything.

Why not an OptionList: it measures and caches every option it holds, and a column of
10,000 ready cards is 10,000 options measured again whenever one of them changes (a
card printing its age in seconds changed all of them every second: most of an idle
core). Here every card has the same shape, three lines (id and worker, title, facts),
each cut with ``…`` at the column's width (the selected card is in full on the pane's
detail line and in its details dialog), and a rule under it. The list holds the ids of
the whole column, but builds the lines of the cards in view only, and keeps them per
card: a refresh that changed nothing in view draws nothing; one changed card in view
redraws its column's few lines, never the cards out of view.

When the column holds more cards than its height shows, its last line says so
(``▴▾ 4-7 of 23``: more above and below): a card is never shown cut in half.

The list only shows: what a card says is :class:`CardView`'s, which cards a column
holds is the board pane's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

from rich.text import Text
from textual import events
from textual.binding import Binding
from textual.message import Message
from textual.widget import Widget

from engine.text import human_duration

if TYPE_CHECKING:
    from engine.kanban.models import Task

CARD_LINES = 3  # id and worker, title, facts
SLOT = CARD_LINES + 1  # a card and the rule under it
MARKERS = {True: ("●", "green"), False: ("○", "red"), None: ("◌", "dim")}


def card_age(seconds: float) -> str:
    """A card's age to the minute ('<1m', '5m', '1h 40m', '3d 4h'): a board read at a
    glance needs no seconds, and an age that changes once a minute is redrawn once a minute."""
    s = int(max(0.0, seconds))
    return "<1m" if s < 60 else human_duration(s - s % 60)


@dataclass(frozen=True)
class CardView:
    """What one card shows; compared to decide whether it needs drawing again."""

    task: Task
    live: bool | None  # True verified alive, False gone, None no worker / not ours to check
    reasons: tuple[str, ...] = ()  # hermes-agent's board: why hermes does not spawn it, in words
    short: str = ""  # the same, in a few words for the card (after its facts)

    def head(self) -> Text:
        t = self.task
        text = Text(t.id, style="bold")
        if t.worker_pid:
            marker, style = MARKERS[self.live]
            text.append(f"  {marker} {t.worker_pid}", style=style)
        return text

    def facts(self, age: str) -> Text:
        """Failures and priority first: they are what a cut line must not lose."""
        t = self.task
        text = Text(style="dim")
        if t.consecutive_failures:
            text.append(f"✗{t.consecutive_failures}", style="bold red")
            text.append(" · ")
        if t.priority:
            text.append(f"p{t.priority} · ")
        text.append(f"{t.assignee or 'unassigned'} · {age}")
        if self.short:  # hermes's own reason: on the card in short, in full on the detail line
            text.append(" · ")
            text.append(self.short, style="yellow")
        return text

    def lines(self, now: float) -> tuple[Text, Text, Text]:
        return self.head(), Text(self.task.title), self.facts(card_age(now - self.task.created_at))

    def prompt(self, now: float) -> Text:
        """The card's three lines, uncut."""
        return Text("\n").join(self.lines(now))


class CardOption(NamedTuple):
    """A card as the list holds it (the shape of an OptionList's option, for callers)."""

    id: str
    prompt: Text


class CardList(Widget, can_focus=True):
    """The cards of one column, by id; ``highlighted`` is the selected card's index."""

    BINDINGS = [
        Binding("up", "cursor(-1)", "Previous card", show=False),
        Binding("down", "cursor(1)", "Next card", show=False),
        Binding("pageup", "page(-1)", "Page up", show=False),
        Binding("pagedown", "page(1)", "Page down", show=False),
        Binding("home", "cursor_to(0)", "First card", show=False),
        Binding("end", "cursor_to(-1)", "Last card", show=False),
    ]

    COMPONENT_CLASSES = {"card-list--highlighted", "card-list--rule", "card-list--more"}

    DEFAULT_CSS = """
    CardList { height: 1fr; padding: 0 1; }
    CardList > .card-list--highlighted { background: $panel-lighten-1; }
    CardList:focus > .card-list--highlighted { background: $accent 60%; color: $text; text-style: bold; }
    CardList > .card-list--rule { color: $panel-lighten-2; }
    CardList > .card-list--more { color: $text-muted; text-style: bold; }
    """

    class Highlighted(Message):
        """The selected card of a column changed (``card_id`` None: the column is empty)."""

        def __init__(self, cards: CardList, card_id: str | None) -> None:
            super().__init__()
            self.cards = cards
            self.card_id = card_id

        @property
        def control(self) -> CardList:
            return self.cards

    def __init__(self, status: str, clock) -> None:
        super().__init__(id=f"cards-{status}")
        self.status = status
        self._clock = clock
        self._ids: Sequence[str] = ()
        self._index: Mapping[str, int] | None = None
        self._views: Mapping[str, CardView] = {}
        self._highlighted: int | None = None
        self._top = 0
        self._lines: dict[str, tuple[CardView, str, tuple[Text, Text, Text]]] = {}  # id -> drawn with
        self._painted: tuple | None = None  # what the last render showed
        self.drawn = 0  # cards whose lines were built (a test and the bench read it)

    # -- what the column holds -------------------------------------------------------------

    def set_cards(self, ids: Sequence[str], views: Mapping[str, CardView],
                  index: Mapping[str, int] | None = None) -> None:
        """The column's cards now (``index``: id -> position, when the caller has it). A
        card whose view is the same object as before keeps its drawn lines; the selected
        card stays selected while it is in the column."""
        before = self.highlighted_id
        same = ids is self._ids or tuple(ids) == tuple(self._ids)
        self._ids, self._views = ids, views
        if not same:
            self._index = index
        if not same and len(self._lines) > 4 * max(1, self._fit()):  # forget what scrolled far away
            self._lines = {i: v for i, v in self._lines.items() if i in self._window_ids()}
        if not ids:
            self._highlighted = None
        elif before is not None and self._position(before) is not None:
            self._highlighted = self._position(before)
        elif self._highlighted is None:
            self._highlighted = 0
        else:
            self._highlighted = min(self._highlighted, len(ids) - 1)
        self._keep_in_view()
        if self.highlighted_id != before:
            self.post_message(self.Highlighted(self, self.highlighted_id))
        self._repaint_if_changed()

    def tick(self) -> None:
        """The clock moved: redraw only when an age in view reads differently."""
        self._repaint_if_changed()

    def _position(self, card_id: str) -> int | None:
        if self._index is None:
            self._index = {i: n for n, i in enumerate(self._ids)}
        return self._index.get(card_id)

    # -- the OptionList-shaped surface the pane and the tests use ---------------------------------

    @property
    def option_count(self) -> int:
        return len(self._ids)

    def get_option_index(self, card_id: str) -> int:
        position = self._position(card_id)
        if position is None:
            raise KeyError(f"no card {card_id!r} in {self.status}")
        return position

    def get_option(self, card_id: str) -> CardOption:
        self.get_option_index(card_id)
        return CardOption(card_id, self._views[card_id].prompt(self._clock()))

    @property
    def highlighted_option(self) -> CardOption | None:
        card_id = self.highlighted_id
        return None if card_id is None else CardOption(card_id, self._views[card_id].prompt(self._clock()))

    @property
    def highlighted_id(self) -> str | None:
        if self._highlighted is None or not 0 <= self._highlighted < len(self._ids):
            return None
        return self._ids[self._highlighted]

    @property
    def highlighted(self) -> int | None:
        return self._highlighted

    @highlighted.setter
    def highlighted(self, index: int | None) -> None:
        if index is not None:
            index = max(0, min(index, len(self._ids) - 1)) if self._ids else None
        before = self.highlighted_id
        self._highlighted = index
        self._keep_in_view()
        if self.highlighted_id != before:
            self.post_message(self.Highlighted(self, self.highlighted_id))
        self._repaint_if_changed()

    # -- keys and the mouse --------------------------------------------------------------------

    def action_cursor(self, step: int) -> None:
        if self._ids:
            self.highlighted = (self._highlighted or 0) + step if self._highlighted is not None else 0

    def action_page(self, step: int) -> None:
        self.action_cursor(step * max(1, self._fit()))

    def action_cursor_to(self, index: int) -> None:
        if self._ids:
            self.highlighted = index % len(self._ids)

    def on_click(self, event: events.Click) -> None:
        slot = event.y // SLOT
        if 0 <= slot < self._fit() and self._top + slot < len(self._ids):
            self.focus()
            self.highlighted = self._top + slot

    def on_mouse_scroll_down(self, event: events.MouseScrollDown) -> None:
        event.stop()
        self.action_cursor(1)

    def on_mouse_scroll_up(self, event: events.MouseScrollUp) -> None:
        event.stop()
        self.action_cursor(-1)

    def on_resize(self) -> None:
        self._keep_in_view()
        self._painted = None
        self.refresh()

    def on_focus(self) -> None:
        self._painted = None
        self.refresh()

    def on_blur(self) -> None:
        self._painted = None
        self.refresh()

    # -- drawing ----------------------------------------------------------------------------------

    def _fit(self) -> int:
        """How many whole cards the height shows (the last line says how many there are
        when they do not all fit)."""
        height = self.content_size.height
        if len(self._ids) * SLOT - 1 <= height:
            return max(1, len(self._ids))
        return max(1, height // SLOT)

    def _keep_in_view(self) -> None:
        fit = self._fit()
        if self._highlighted is not None:
            if self._highlighted < self._top:
                self._top = self._highlighted
            elif self._highlighted >= self._top + fit:
                self._top = self._highlighted - fit + 1
        self._top = max(0, min(self._top, len(self._ids) - fit))

    def _window_ids(self) -> Sequence[str]:
        return self._ids[self._top:self._top + self._fit()]

    def _card_lines(self, card_id: str, now: float) -> tuple[Text, Text, Text]:
        view = self._views[card_id]
        age = card_age(now - view.task.created_at)
        drawn = self._lines.get(card_id)
        if drawn is not None and drawn[0] is view and drawn[1] == age:
            return drawn[2]
        self.drawn += 1
        lines = view.lines(now)
        self._lines[card_id] = (view, age, lines)
        return lines

    def _repaint_if_changed(self) -> None:
        """A repaint only when what the column shows differs from the last one."""
        shown = self._what_is_shown()
        if shown != self._painted:
            self.refresh()

    def _what_is_shown(self) -> tuple:
        """The cards in view (their views and ages), the selection and the scroll."""
        window = tuple(self._window_ids())
        now = self._clock()
        views = tuple(self._views.get(i) for i in window)
        ages = tuple(card_age(now - v.task.created_at) if v is not None else "" for v in views)
        return window, views, ages, self._highlighted, self._top, len(self._ids)

    def render(self) -> Text:
        width = self.content_size.width
        height = self.content_size.height
        now = self._clock()
        window = self._window_ids()
        out: list[Text] = []
        highlight = self.get_component_rich_style("card-list--highlighted")
        rule = self.get_component_rich_style("card-list--rule")
        for n, card_id in enumerate(window):
            if n:
                out.append(Text("─" * width, style=rule))
            selected = self._top + n == self._highlighted
            for line in self._card_lines(card_id, now):
                line = line.copy()
                line.truncate(width, overflow="ellipsis", pad=True)
                if selected:
                    line.stylize(highlight)
                out.append(line)
        if len(self._ids) > len(window) and window:
            first, last = self._top + 1, self._top + len(window)
            signs = ("▴" if self._top else "") + ("▾" if last < len(self._ids) else "")
            more = Text(f"{signs} {first}-{last} of {len(self._ids)}", style=self.get_component_rich_style(
                "card-list--more"))
            more.truncate(width, overflow="ellipsis")
            out.extend(Text("") for _ in range(max(0, height - len(out) - 1)))
            out.append(more)
        self._painted = self._what_is_shown()
        return Text("\n", no_wrap=True, overflow="ellipsis").join(out) if out else Text("")
