"""The keys footer: the focused pane's keys on the bottom line, drawn as one widget.

Textual's Footer is a container with one widget per key. Every change of focus changes
its keys, so a pane switch mounted or resized key widgets, and each of those is a layout
of the whole screen and one more frame (mounting, then the new sizes' second layout):
the switch's last frame came 50-70 ms after the key, where the panes had changed after
one. This footer is one line of one widget: a new set of keys is a repaint of that line,
in the frame that shows the switch, and nothing else moves.

It looks and acts like Textual's Footer (the same colours, key and description
paddings, compact style below 100 columns, the command palette key on the right after a
thin rule, a disabled key dimmed and answered with a bell, a click presses the key, a
key's tooltip on hover), with two differences: it shows only whole keys (Textual's cut
the last one mid-word, ``? He`` at 80 columns), leaving out, when the width is short,
the palette key first, then the keys at the end of the row, never the ones named in
KEEP (help lists every key, quit ends the app); and bindings of one group are shown as
their own keys (the console defines no group).
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.cells import cell_len
from rich.style import Style
from rich.text import Text
from textual import events
from textual.reactive import reactive
from textual.screen import Screen
from textual.widget import Widget

# Actions whose keys are never left out of the Footer.
KEEP = ("help", "quit")
PALETTE_RULE = "▏"  # Textual's "vkey" border, left of the palette key


@dataclass(frozen=True)
class FooterEntry:
    """One key as the footer shows it."""

    key: str  # the key pressed by a click
    key_display: str
    description: str
    action: str
    disabled: bool = False
    tooltip: str = ""
    palette: bool = False  # the command palette key, on the right


def entry_parts(entry: FooterEntry, compact: bool) -> list[tuple[str, str]]:
    """A key's cells as (text, role), role one of "rule", "key", "description", "gap",
    with Textual's Footer's paddings: `` q Quit `` (compact ``q Quit`` and a gap after),
    the palette key after a thin rule and with one more space on its right."""
    pad = "" if compact else " "
    if not entry.description:
        parts = [(entry.key_display, "key")]
    else:
        parts = [(pad + entry.key_display + pad, "key"),
                 ((" " + entry.description) if compact else (entry.description + " "), "description")]
    if entry.palette:
        parts.insert(0, (PALETTE_RULE, "rule"))
        if not compact:
            parts.append((" ", "gap"))
    if compact:
        parts.append((" ", "gap"))  # the margin after each key
    return parts


def entry_width(entry: FooterEntry, compact: bool) -> int:
    """The cells one key takes (its text, its paddings, the margin after it; the palette
    key's rule before it)."""
    return sum(cell_len(text) for text, _role in entry_parts(entry, compact))


def fitting(entries: list[FooterEntry], width: int, compact: bool) -> list[FooterEntry]:
    """The keys that fit ``width`` whole: the palette key goes first, then the keys at
    the end of the row, never a key in KEEP."""

    def used(es: list[FooterEntry]) -> int:
        return sum(entry_width(e, compact) for e in es)

    if used(entries) <= width:
        return entries
    kept = [e for e in entries if not e.palette]
    while kept and used(kept) > width:
        droppable = [e for e in kept if e.action not in KEEP]
        if not droppable:
            break
        kept.remove(droppable[-1])
    return kept


class KeysFooter(Widget, can_focus=False):
    ALLOW_SELECT = False
    COMPONENT_CLASSES = {"footer-key--key", "footer-key--description", "footer-key--hover", "footer-key--rule"}
    DEFAULT_CSS = """
    KeysFooter {
        dock: bottom;
        height: 1;
        width: 1fr;
        color: $footer-foreground;
        background: $footer-background;
        .footer-key--key {
            color: $footer-key-foreground;
            background: $footer-key-background;
            text-style: bold;
        }
        .footer-key--description {
            color: $footer-description-foreground;
            background: $footer-description-background;
        }
        .footer-key--hover {
            color: $footer-key-foreground;
            background: $block-hover-background;
        }
        .footer-key--rule {
            color: $foreground 20%;
        }
    }
    """

    compact = reactive(False)
    """Display in compact style (no padding around the keys)."""
    show_command_palette = reactive(True)
    """Show the key to invoke the command palette, on the right."""

    def __init__(self, *, show_command_palette: bool = True, compact: bool = False, id: str | None = None) -> None:
        super().__init__(id=id)
        self.set_reactive(KeysFooter.show_command_palette, show_command_palette)
        self.set_reactive(KeysFooter.compact, compact)
        self._read: tuple | None = None  # what the keys were built from
        self._entries: tuple[FooterEntry, ...] = ()  # every key, before fitting
        # Where each key that fits is drawn, (key, x, cells), and the width that was for;
        # worked out again when the keys, the style or the width change.
        self._placed: tuple[tuple[FooterEntry, int, int], ...] = ()
        self._placed_for: int | None = None
        self._hover: FooterEntry | None = None

    # -- what it shows --------------------------------------------------------------------

    @property
    def entries(self) -> tuple[FooterEntry, ...]:
        """The keys shown now, left to right (the palette key last)."""
        return tuple(entry for entry, _x, _w in self._placement())

    def on_mount(self) -> None:
        self.screen.bindings_updated_signal.subscribe(self, self.bindings_changed)
        self.bindings_changed(self.screen)

    def on_unmount(self) -> None:
        self.screen.bindings_updated_signal.unsubscribe(self)

    def bindings_changed(self, screen: Screen) -> None:
        """Read the bindings in effect now; when they differ from what the keys were built
        from, the line is drawn again (in the same frame as whatever changed them)."""
        if not screen.app.app_focus or not self.is_attached or screen is not self.screen:
            return
        read = self._what_is_read()
        if read != self._read:
            self._read = read
            self._entries = tuple(self._build())
            self._placed_for = None
            self.refresh()

    def _watch_compact(self) -> None:
        self._placed_for = None
        self.refresh()

    def _watch_show_command_palette(self) -> None:
        self._read = None
        if self.is_attached:
            self.bindings_changed(self.screen)

    def _what_is_read(self) -> tuple:
        """Everything the keys are built from (bindings, their state, how they display)."""
        app = self.app
        return (
            self.show_command_palette,
            app.ENABLE_COMMAND_PALETTE,
            tuple(
                (binding, enabled, tooltip, app.get_key_display(binding) if binding.show else None)
                for _node, binding, enabled, tooltip in self.screen.active_bindings.values()
            ),
        )

    def _build(self):
        """The keys as Textual's Footer would show them: one per action, in binding order;
        then the palette key."""
        app = self.app
        active = self.screen.active_bindings
        actions: set[str] = set()
        for _node, binding, enabled, tooltip in active.values():
            if not binding.show or binding.action in actions:
                continue
            actions.add(binding.action)
            yield FooterEntry(binding.key, app.get_key_display(binding), binding.description, binding.action,
                              disabled=not enabled, tooltip=tooltip)
        if self.show_command_palette and app.ENABLE_COMMAND_PALETTE:
            found = active.get(app.COMMAND_PALETTE_BINDING)
            if found is not None:
                _node, binding, enabled, tooltip = found
                yield FooterEntry(binding.key, app.get_key_display(binding), binding.description, binding.action,
                                  disabled=not enabled, tooltip=binding.tooltip or binding.description,
                                  palette=True)

    def _placement(self) -> tuple[tuple[FooterEntry, int, int], ...]:
        """Where each key that fits is drawn at the footer's width now: (key, x, cells)."""
        width = self.size.width
        if width != self._placed_for:
            self._placed, self._placed_for = self._layout(width), width
        return self._placed

    def _layout(self, width: int) -> tuple[tuple[FooterEntry, int, int], ...]:
        shown = fitting(list(self._entries), width, self.compact)
        placed, x = [], 0
        for entry in shown:
            if not entry.palette:
                w = entry_width(entry, self.compact)
                placed.append((entry, x, w))
                x += w
        for entry in shown:
            if entry.palette:
                w = entry_width(entry, self.compact)
                placed.append((entry, max(x, width - w), w))
        return tuple(placed)

    # -- drawing --------------------------------------------------------------------------

    def render(self) -> Text:
        width = self.size.width
        base = self.rich_style
        styles = {"key": base + self.get_component_rich_style("footer-key--key"),
                  "description": base + self.get_component_rich_style("footer-key--description"),
                  "rule": base + self.get_component_rich_style("footer-key--rule"), "gap": base}
        hover = Style(bgcolor=self.get_component_rich_style("footer-key--hover").bgcolor)
        line = Text(no_wrap=True, end="")
        x = 0
        for entry, at, _w in self._placement():
            if at > x:
                line.append(" " * (at - x), base)
            line.append_text(self._key_text(entry, styles, hover))
            x = line.cell_len
        if x < width:
            line.append(" " * (width - x), base)
        return line

    def _key_text(self, entry: FooterEntry, styles: dict[str, Style], hover: Style) -> Text:
        text = Text(no_wrap=True, end="")
        for words, role in entry_parts(entry, self.compact):
            style = styles[role]
            if entry is self._hover and role != "rule":
                style = style + hover
            if entry.disabled and role != "gap":
                style = style + Style(dim=True)
            text.append(words, style)
        return text

    # -- the mouse ------------------------------------------------------------------------

    def entry_at(self, x: int) -> FooterEntry | None:
        """The key drawn at column ``x`` of the footer, if any."""
        for entry, at, w in self._placement():
            if at <= x < at + w:
                return entry
        return None

    def on_mouse_down(self, event: events.MouseDown) -> None:
        entry = self.entry_at(event.x)
        if entry is None:
            return
        if entry.disabled:
            self.app.bell()
        else:
            self.app.simulate_key(entry.key)

    def on_mouse_move(self, event: events.MouseMove) -> None:
        self._hover_on(self.entry_at(event.x))

    def on_leave(self, _event: events.Leave) -> None:
        self._hover_on(None)

    def _hover_on(self, entry: FooterEntry | None) -> None:
        if entry is not self._hover:
            self._hover = entry
            self.tooltip = (entry.tooltip or None) if entry is not None else None
            self.refresh()
