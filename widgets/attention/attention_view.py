"""The attention view: what needs a person, newest first, grouped by kind.

A screen of its own (key ``!``): one heading per kind, each item on two lines (when,
subject and why; then what answers it). Enter goes to the item's subject in its pane,
``d`` dismisses the highlighted item, ``D`` every item shown. The app gives it each
new computation (:meth:`AttentionScreen.show`); the list is rebuilt only when its
items changed, keeping the highlighted item.
"""

from __future__ import annotations

import time

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.message import Message
from textual.screen import Screen
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from engine.attention.model import Item, grouped
from engine.text import escape_text


def _when(since: float | None, now: float, localtime=time.localtime) -> str:
    if since is None:
        return "     "
    if now - since < 20 * 3600:
        return time.strftime("%H:%M", localtime(since))
    return time.strftime("%d %b", localtime(since))


def item_prompt(item: Item, now: float, width: int = 200, localtime=time.localtime) -> Text:
    """An item's two lines, each cut to ``width`` (the detail below shows it all);
    outside text as plain Text (never markup)."""
    first = Text()
    first.append(f" {_when(item.since, now, localtime)}  ", style="dim")
    first.append(escape_text(item.subject), style="bold")
    first.append("  ")
    first.append(item.why)
    second = Text("        → ", style="dim")
    second.append(item.action, style="dim italic")
    for line in (first, second):
        line.truncate(max(10, width), overflow="ellipsis")
    return Text("\n").join([first, second])


def item_detail(item: Item) -> Text:
    """The highlighted item in full (the list cuts long lines): why, action, key."""
    text = Text()
    text.append(escape_text(item.subject), style="bold")
    text.append(f" · {item.heading.lower()} · ")
    text.append(item.why)
    text.append("\n→ ", style="dim")
    text.append(item.action)
    text.append(f"\nkey {escape_text(item.key)}", style="dim")
    return text


class AttentionScreen(Screen):
    """The attention list. Posts :class:`GoTo` and :class:`Dismiss`; the app acts."""

    DEFAULT_CSS = """
    AttentionScreen { background: $surface; }
    AttentionScreen #attention-title { height: 1; background: $boost; padding: 0 1; }
    AttentionScreen #attention-list { height: 1fr; border: none; }
    AttentionScreen #attention-list > .option-list--option-disabled { color: $warning; text-style: bold; }
    AttentionScreen #attention-empty { height: 1fr; content-align: center middle; color: $text-muted; }
    AttentionScreen.-empty #attention-list { display: none; }
    AttentionScreen #attention-empty { display: none; }
    AttentionScreen.-empty #attention-empty { display: block; }
    AttentionScreen #attention-keys { height: 1; color: $text-muted; padding: 0 1; }
    AttentionScreen #attention-detail { height: auto; max-height: 5; background: $boost; padding: 0 1; }
    AttentionScreen.-empty #attention-detail { display: none; }
    """

    BINDINGS = [
        Binding("enter", "go", "Go to", id="attention.go", show=False),
        Binding("d", "dismiss_item", "Dismiss", id="attention.dismiss"),
        Binding("D", "dismiss_shown", "Dismiss all shown", id="attention.dismiss_all"),
        Binding("escape,exclamation_mark", "close", "Back", id="attention.close"),
    ]

    # The clock and time zone "when" is shown with (tests pin them for snapshots).
    clock = staticmethod(time.time)
    localtime = staticmethod(time.localtime)

    class GoTo(Message):
        """Go to the item's subject in its pane."""

        def __init__(self, item: Item) -> None:
            super().__init__()
            self.item = item

    class Dismiss(Message):
        """Dismiss these items (kept in the home)."""

        def __init__(self, items: tuple[Item, ...]) -> None:
            super().__init__()
            self.items = items

    def __init__(self, items: tuple[Item, ...] = (), dismissed: int = 0) -> None:
        super().__init__()
        self._items: dict[str, Item] = {}
        self._shown: tuple = ()
        self._dismissed = 0
        self._gone: set[str] = set()
        self._initial = (items, dismissed)

    def compose(self) -> ComposeResult:
        yield Static(id="attention-title")
        yield OptionList(id="attention-list")
        yield Static("Nothing needs you.", id="attention-empty")
        yield Static(id="attention-detail")
        yield Static(Text("Enter go to it · d dismiss · D dismiss all shown · Esc back"), id="attention-keys")

    def on_mount(self) -> None:
        self.show(*self._initial)
        self.query_one(OptionList).focus()

    @property
    def items(self) -> tuple[Item, ...]:
        """The items listed, in the order shown."""
        return tuple(self._items.values())

    @property
    def highlighted(self) -> Item | None:
        option = self.query_one(OptionList).highlighted_option
        return self._items.get(option.id) if option is not None and option.id else None

    def show(self, items: tuple[Item, ...], dismissed: int = 0) -> None:
        """List ``items`` (rebuilt only when they changed; the highlighted one stays)."""
        items = tuple(i for i in items if i.key not in self._gone)  # dismissed here, not yet in the home
        dismissed = max(dismissed, self._dismissed)
        self._dismissed = dismissed
        shape = tuple((i.key, i.why) for i in items), dismissed
        title = Text()
        title.append("Attention", style="bold")
        title.append(f"  {len(items)} item{'s' if len(items) != 1 else ''}")
        if dismissed:
            title.append(f" · {dismissed} dismissed", style="dim")
        self.query_one("#attention-title", Static).update(title)
        self.set_class(not items, "-empty")
        width = max(20, (self.size.width or self.app.size.width) - 4)
        shape = shape, width
        if shape == self._shown:
            return
        self._shown = shape
        listing = self.query_one(OptionList)
        was = listing.highlighted_option.id if listing.highlighted_option is not None else None
        now = self.clock()
        options: list = []
        self._items = {}
        for _kind, group in grouped(items):
            options.append(Option(Text(f"{group[0].heading} ({len(group)})"), disabled=True))
            for item in group:
                self._items[item.key] = item
                options.append(Option(item_prompt(item, now, width, self.localtime), id=item.key))
        listing.set_options(options)
        keys = list(self._items)
        if was in self._items:
            listing.highlighted = listing.get_option_index(was)
        elif keys:
            listing.highlighted = listing.get_option_index(keys[0])
        self._show_detail()

    def on_resize(self) -> None:
        if self._shown:
            self.show(self.items, self._dismissed)

    def on_option_list_option_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        self._show_detail()

    def _show_detail(self) -> None:
        item = self.highlighted
        self.query_one("#attention-detail", Static).update(item_detail(item) if item is not None else "")

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        item = self._items.get(event.option.id or "")
        if item is not None:
            self.post_message(self.GoTo(item))

    def action_go(self) -> None:
        item = self.highlighted
        if item is not None:
            self.post_message(self.GoTo(item))

    def action_dismiss_item(self) -> None:
        item = self.highlighted
        if item is not None:
            self._drop((item,))

    def action_dismiss_shown(self) -> None:
        if self._items:
            self._drop(tuple(self._items.values()))

    def _drop(self, items: tuple[Item, ...]) -> None:
        self._gone |= {i.key for i in items}
        self.post_message(self.Dismiss(items))
        self.show(self.items, len(items) + self._dismissed)

    def action_close(self) -> None:
        self.dismiss()
