"""Corrections to Textual (pinned <8.3) where it does work that changes nothing, each
found costing frames; ``install()`` puts them in place, once, before the app starts.

- A scroll bar colour rule set to the value it has already repaints the widget's scroll
  bars. Textual's stylesheet sets every rule of a widget each time it restyles it (on
  each focus change, for the widget gaining and the one losing focus), so a table taking
  focus repainted its scroll bar, and that repaint reached the screen through the scroll
  bar's own message queue a frame later: a pane switch into a table ended ~20-40 ms
  after its first frame. The scroll bars are repainted when a colour really changes.
"""

from __future__ import annotations

from textual.css._style_properties import ColorProperty, ScrollbarColorProperty

_installed = False
TEXTUAL_SETTER = ScrollbarColorProperty.__set__  # Textual's own (tests compare the two)


def _set_scrollbar_color(self: ScrollbarColorProperty, obj, color) -> None:
    before = obj.get_rule(self.name)
    ColorProperty.__set__(self, obj, color)  # the rule, and a repaint of the widget if it changed
    node = obj.node
    if node is None or obj.get_rule(self.name) == before:
        return
    from textual.widget import Widget

    if isinstance(node, Widget):
        if node.show_horizontal_scrollbar:
            node.horizontal_scrollbar.refresh()
        if node.show_vertical_scrollbar:
            node.vertical_scrollbar.refresh()


def install() -> None:
    global _installed
    if not _installed:
        ScrollbarColorProperty.__set__ = _set_scrollbar_color
        _installed = True
