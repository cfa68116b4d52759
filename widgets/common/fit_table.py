"""A table whose columns fit the width it is given, and a line that shows a row in full.

Textual's DataTable sizes each column to its widest cell and scrolls sideways when the
total is wider than the table: inside a pane the rightmost columns are then cut at the
border, mid-word, with no sign. :class:`FitTable` instead plans its columns for the width
it has: short columns (ids, states, numbers) get their full width; the columns marked
``flex`` (a command, a path, a reason) share what is left, and a value longer than its
column ends in ``…``; when even that does not fit, the least important columns are hidden
first, so the main column never drops below its ``min_width``.

Nothing is lost: :class:`DetailLine` under the table shows the selected row in full (every
pane's table has one), so the whole of any cut value is one cursor move away.

It is also the one keyed-diff table of the app: a pane hands :meth:`FitTable.update_rows`
all its rows by key, each with a value cheap to compare (plain strings, say), and the table
drops the rows whose key is gone, builds the cells of new and changed rows only, and
:meth:`FitTable.sync` then touches only those on screen (``update_cell`` for a changed
cell, ``add_row``, ``remove_row``). No pane keeps a diff of its own.

The table owns its rows' full cells and their order; the DataTable only ever holds
the cut copies. A change of plan (a resize, a longer value) redraws the rows it holds.

Long lists page: the DataTable holds at most ``page_rows`` rows (the page), a window on
the table's order around the cursor; moving the cursor past either end of the page
(arrows, page keys, ctrl+home/end) moves the page. The columns are fitted to the rows of
the page. :meth:`FitTable.set_rows` takes a pane's rows as cheap values and builds the
cells of a row only when its page is shown, so 100,000 rows cost 100,000 values, not
600,000 ``Text`` cells.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from rich.text import Text
from textual import events
from textual.widgets import Static

from widgets.common.partial_repaint import CellTable

_ABSENT = object()


@dataclass(frozen=True)
class Col:
    """One column: its key, its header, and how it gives way when space is short."""

    key: str
    label: str
    flex: bool = False  # shares the width left by the others; cut with … when short
    min_width: int = 0  # a flex column never narrower than this while shown
    hide_rank: int = 0  # 0: always shown; when space is short, the highest rank hides first


@dataclass(frozen=True)
class Plan:
    """The columns shown and their content widths, in column order."""

    widths: tuple[tuple[str, int], ...]

    @property
    def keys(self) -> tuple[str, ...]:
        return tuple(key for key, _ in self.widths)


def plan_columns(cols: Sequence[Col], natural: dict[str, int], available: int, padding: int) -> Plan:
    """Fit ``cols`` into ``available`` cells (``padding`` is added to each column twice).

    Fixed columns take their natural width; flex columns share the rest in column order
    (the first one is the row's main value), the last one taking what is left; columns
    hide, highest ``hide_rank`` first, while even the flex minimums do not fit.
    """
    shown = list(cols)

    def need(columns: list[Col]) -> int:
        return sum((c.min_width if c.flex else natural[c.key]) + 2 * padding for c in columns)

    while need(shown) > available:
        hideable = [c for c in shown if c.hide_rank]
        if not hideable:
            break
        shown.remove(max(hideable, key=lambda c: c.hide_rank))
    widths = {c.key: natural[c.key] for c in shown if not c.flex}
    room = available - sum(w + 2 * padding for w in widths.values())
    flex = [c for c in shown if c.flex]
    for i, c in enumerate(flex):
        # In column order: each flex column takes its natural width if the ones after it
        # still get their minimum; the last one takes whatever is left.
        reserve = sum(later.min_width + 2 * padding for later in flex[i + 1:])
        left = room - reserve - 2 * padding
        width = max(c.min_width, left if i == len(flex) - 1 else min(natural[c.key], left))
        widths[c.key] = width
        room -= width + 2 * padding
    return Plan(tuple((c.key, widths[c.key]) for c in shown))


def cut(cell: Text, width: int) -> Text:
    """``cell`` as it fits ``width`` cells: itself when it fits, else ending in …."""
    if cell.cell_len <= width:
        return cell
    short = cell.copy()
    short.truncate(max(1, width), overflow="ellipsis")
    return short


@dataclass(frozen=True)
class RowChanges:
    """What :meth:`FitTable.update_rows` changed: the keys added and removed, and the
    changed ones with the value each had before."""

    added: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    changed: dict[str, Any] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.added or self.removed or self.changed)


class FitTable(CellTable):  # a changed cell repaints its row only
    """A row-cursor DataTable that plans its columns for its width, and the app's keyed-diff
    table (see the module doc).

    A pane gives all its rows at once to ``update_rows``; rows may also be put by key with
    all their cells (``put``, an append-only log) and removed with ``drop``. ``order``
    orders them; ``sync`` brings the screen up to date after a batch of changes.
    """

    DEFAULT_CSS = """
    FitTable { overflow-x: hidden; }
    """

    PAGE_ROWS = 200

    def __init__(self, cols: Sequence[Col], *, page_rows: int | None = None, **kwargs) -> None:
        kwargs.setdefault("cursor_type", "row")
        super().__init__(**kwargs)
        self.cols = tuple(cols)
        self.page_rows = max(2, page_rows or self.PAGE_ROWS)
        self.full: dict[str, tuple[Text, ...]] = {}  # row key -> every cell, uncut (put, update_rows)
        self.values: dict[str, Any] = {}  # row key -> the value update_rows (or set_rows) last got for it
        self._order: list[str] = []
        self._start = 0  # index in _order of the page's first row
        self._cells_of: Callable[[str, Any], Sequence[Text]] | None = None  # set_rows' rows: built when shown
        self._built: dict[str, tuple[Text, ...]] = {}  # those built so far (the page's, about)
        self._shown: dict[str, tuple[Text, ...]] = {}  # row key -> cells as put in the DataTable
        self._leaving = False  # go_to is moving the page away from the selected row
        self.plan: Plan | None = None
        self._cursor_key: str | None = None  # select_key() of a row not drawn yet
        # Per row, what was worked out from its full cells last time, kept while those very
        # cells (the same tuple) stand: their widths, and their cut copy under a plan. A sync
        # of a page of unchanged rows then measures and cuts nothing again.
        self._widths: dict[str, tuple[tuple[Text, ...], tuple[int, ...]]] = {}
        self._cut: dict[str, tuple[tuple[Text, ...], Plan, tuple[Text, ...]]] = {}

    # -- rows ------------------------------------------------------------------------------

    def update_rows(self, rows: Mapping[str, Any], cells_of: Callable[[str, Any], Sequence[Text]]) -> RowChanges:
        """Make the rows these (the keyed diff): drop the keys not in ``rows``; for a new
        key, or one whose value differs (``!=``) from the value last given, put the cells
        ``cells_of(key, value)`` builds; leave the others alone. ``values`` keeps each key's
        value in the order the keys came (new keys last). Call ``sync`` (or ``order`` and
        ``sync``) to show the result."""
        removed = tuple(key for key in self.values if key not in rows)
        for key in removed:
            self.drop(key)
        added: list[str] = []
        changed: dict[str, Any] = {}
        for key, value in rows.items():
            old = self.values.get(key, _ABSENT)
            if old is _ABSENT:
                added.append(key)
            elif old == value:
                continue
            else:
                changed[key] = old
            self.put(key, cells_of(key, value))
            self.values[key] = value
        return RowChanges(tuple(added), removed, changed)

    def set_rows(self, rows: dict[str, Any], cells_of: Callable[[str, Any], Sequence[Text]],
                 order: list[str] | None = None) -> None:
        """Make these the rows, all at once and without a diff: ``rows`` (key -> a cheap
        value, kept as given: the caller hands it over) in ``order`` (the keys; default the
        mapping's). A row's cells are ``cells_of(key, value)``, built only when its page is
        shown; ``sync`` then touches only the cells of the page that changed. Replaces
        every row ``put`` or ``update_rows`` gave."""
        self.values = rows
        self.full.clear()
        self._built.clear()
        self._cells_of = cells_of
        self._order = list(rows) if order is None else order

    def set_order(self, keys: list[str]) -> None:
        """The rows' order, given whole (the same keys as now, e.g. sorted elsewhere)."""
        self._order = keys

    def put(self, key: str, cells: Sequence[Text]) -> None:
        if key not in self.full:
            self._order.append(key)
        self.full[key] = tuple(cells)

    def drop(self, key: str) -> None:
        self.values.pop(key, None)
        if self._cursor_key == key:
            self._cursor_key = None
        if self.full.pop(key, None) is not None:
            self._order.remove(key)

    def drop_all(self) -> None:
        self.values.clear()
        self.full.clear()
        self._built.clear()
        self._order.clear()

    def order(self, sort_key: Callable[[str], object], reverse: bool = False) -> None:
        self._order.sort(key=sort_key, reverse=reverse)

    @property
    def keys(self) -> list[str]:
        return list(self._order)

    @property
    def row_total(self) -> int:
        """Every row of the table, shown on this page or not."""
        return len(self._order)

    @property
    def page_keys(self) -> list[str]:
        """The keys of the rows the page holds."""
        return list(self._shown)

    def keys_in_view(self, margin: int = 0) -> list[str]:
        """The keys of the rows on screen now (the scroll position and height of the
        table), and ``margin`` rows either side; the whole page before the first layout."""
        keys = list(self._shown)
        height = self.scrollable_content_region.height
        if height <= 0:
            return keys
        top = max(0, round(self.scroll_y) - margin)
        return keys[top:top + height + 2 * margin]

    @property
    def page_start(self) -> int:
        """The index (in the table's order) of the first row of the page shown."""
        return self._start

    @property
    def selected_key(self) -> str | None:
        if self._cursor_key is not None:
            return self._cursor_key
        if not self._shown or not 0 <= self.cursor_row < self.row_count:
            return None
        return self.coordinate_to_cell_key((self.cursor_row, 0)).row_key.value

    @property
    def selected_index(self) -> int:
        """The cursor's row in the table's whole order (not just the page)."""
        return self._start + self.cursor_row

    def page_text(self) -> str:
        """Which rows the page holds, e.g. ``rows 201-400 of 100,000`` ("" when one page holds all)."""
        total = len(self._order)
        if total <= self.page_rows:
            return ""
        return f"rows {self._start + 1:,}-{self._start + self.row_count:,} of {total:,}"

    def row_cells(self, key: str) -> tuple[Text, ...]:
        """Every cell of row ``key``, uncut (built now if its page was never shown)."""
        cells = self.full.get(key)
        if cells is None:
            cells = self._built.get(key)
            if cells is None:
                assert self._cells_of is not None, f"row {key!r} has no cells"
                cells = self._built[key] = tuple(self._cells_of(key, self.values[key]))
        return cells

    def _page(self) -> list[str]:
        """The keys of the page, the start kept inside the rows."""
        total = len(self._order)
        self._start = max(0, min(self._start, total - self.page_rows))
        return self._order[self._start:self._start + self.page_rows]

    # -- moving past the page's ends ---------------------------------------------------------

    def go_to(self, index: int) -> None:
        """Put the cursor on row ``index`` of the whole order, moving the page if it is not on it."""
        total = len(self._order)
        if total == 0:
            return
        index = max(0, min(index, total - 1))
        if not self._start <= index < self._start + self.row_count:
            self._start = max(0, min(index - self.page_rows // 2, total - self.page_rows))
            self._leaving = True  # the cursor goes to the new page, not the page to the cursor
            try:
                self.sync()
            finally:
                self._leaving = False
        self.move_cursor(row=index - self._start, animate=False)

    def select_key(self, key: str) -> None:
        """Put the cursor on the row ``key`` (the page moves to it if needed). A row the
        table holds but cannot draw yet (a hidden tab is not laid out, so it draws
        nothing) gets the cursor when ``sync`` draws it; until then it is the
        ``selected_key``."""
        if key in self._shown:
            self._cursor_key = None
            self.move_cursor(row=self.get_row_index(key), animate=False)
        elif key in self.full:
            if self._available() <= 0:
                self._cursor_key = key
                return
            self._cursor_key = None
            self.go_to(self._order.index(key))

    def _off_page(self, step: int) -> bool:
        """Whether moving the cursor by ``step`` rows leaves the page (then it moved there)."""
        target = self.selected_index + step
        if self._start <= target < self._start + self.row_count or not 0 <= target < len(self._order):
            return False
        self.go_to(target)
        return True

    def _visible_rows(self) -> int:
        return max(1, self.scrollable_content_region.height - (self.header_height if self.show_header else 0))

    def action_cursor_down(self) -> None:
        if not self._off_page(1):
            super().action_cursor_down()

    def action_cursor_up(self) -> None:
        if not self._off_page(-1):
            super().action_cursor_up()

    def action_page_down(self) -> None:
        if not self._off_page(self._visible_rows()):
            super().action_page_down()

    def action_page_up(self) -> None:
        if not self._off_page(-self._visible_rows()):
            super().action_page_up()

    def action_scroll_top(self) -> None:
        self.go_to(0)

    def action_scroll_bottom(self) -> None:
        self.go_to(len(self._order) - 1)

    def column_of(self, key: str) -> int:
        return next(i for i, c in enumerate(self.cols) if c.key == key)

    # -- fitting -----------------------------------------------------------------------------

    def _available(self) -> int:
        width = self.size.width or (self.parent.size.width if self.parent is not None else 0)
        return max(0, width - self.styles.scrollbar_size_vertical)

    def _natural(self, page: list[str]) -> dict[str, int]:
        natural = [len(c.label) for c in self.cols]
        for key in page:
            for i, width in enumerate(self._row_widths(key)):
                if width > natural[i]:
                    natural[i] = width
        return {c.key: width for c, width in zip(self.cols, natural, strict=True)}

    def _row_widths(self, key: str) -> tuple[int, ...]:
        """The cell widths of row ``key``, one per column (0 for a cell it lacks)."""
        cells = self.row_cells(key)
        known = self._widths.get(key)
        if known is not None and known[0] is cells:
            return known[1]
        widths = tuple(cell.cell_len for cell in cells[:len(self.cols)])
        widths += (0,) * (len(self.cols) - len(widths))
        if len(self._widths) > 4 * self.page_rows:  # only the page's are worth keeping
            self._widths.clear()
        self._widths[key] = (cells, widths)
        return widths

    def _cells_for(self, plan: Plan, key: str) -> tuple[Text, ...]:
        cells = self.row_cells(key)
        known = self._cut.get(key)
        if known is not None and known[0] is cells and known[1] == plan:
            return known[2]
        index = {c.key: i for i, c in enumerate(self.cols)}
        shown = tuple(cut(cells[index[k]], width) for k, width in plan.widths)
        if len(self._cut) > 4 * self.page_rows:
            self._cut.clear()
        self._cut[key] = (cells, plan, shown)
        return shown

    def sync(self) -> None:
        """Show the page as it now is: redraw all when the plan or the order of the
        rows already shown changed, else add, remove and update only what changed."""
        available = self._available()
        if available <= 0:
            return  # not laid out yet: on_resize syncs once it is
        selected = self.selected_key
        page = self._follow(selected)
        plan = plan_columns(self.cols, self._natural(page), available, self.cell_padding)
        if plan != self.plan or not self._only_appended(page):
            self._redraw(plan, page, selected)
            return
        on_page = set(page)
        for key in [k for k in self._shown if k not in on_page]:
            self.remove_row(key)
            del self._shown[key]
        for key in page:
            cells = self._cells_for(plan, key)
            old = self._shown.get(key)
            if old is None:
                self.add_row(*cells, key=key)
            elif old != cells:
                for (col, _w), before, after in zip(plan.widths, old, cells, strict=True):
                    if before.plain != after.plain or before.style != after.style or before.spans != after.spans:
                        self.update_cell(key, col, after)
            self._shown[key] = cells
        if self._cursor_key is not None:
            self.select_key(self._cursor_key)
        elif selected in self._shown and self.selected_key != selected:
            self.move_cursor(row=page.index(selected), animate=False)

    def _follow(self, selected: str | None) -> list[str]:
        """The page to show: the one holding the selected row when that row is still in
        the table (after a sort, say), unless ``go_to`` is moving the cursor elsewhere."""
        page = self._page()
        if self._leaving or selected is None or selected in page:
            return page
        if selected not in self.full and selected not in self.values:
            return page  # the row is gone: the cursor stays where it was
        index = self._order.index(selected)
        self._start = max(0, min(index - self.page_rows // 2, len(self._order) - self.page_rows))
        return self._page()

    def _only_appended(self, page: list[str]) -> bool:
        """True when the rows on screen keep their order and new rows come after them,
        and most of them stay: a row removed is a DataTable change of its own (a layout
        request and a repaint each), so a page that leaves more than half its rows (a
        jump to the last page: ~35 ms of removals at 200 rows) is drawn again whole."""
        on_page = set(page)
        kept = [k for k in self._shown if k in on_page]
        if len(kept) * 2 < len(self._shown):
            return False
        return page[: len(kept)] == kept

    def _redraw(self, plan: Plan, page: list[str], selected: str | None) -> None:
        """Rebuild the DataTable from the page's rows; the cursor stays on its row."""
        self._built = {k: self._built[k] for k in page if k in self._built}  # only the page's cells are kept
        columns_changed = self.plan is None or plan.keys != self.plan.keys
        self.clear(columns=columns_changed)
        if columns_changed:
            labels = {c.key: c.label for c in self.cols}
            for key, width in plan.widths:
                self.add_column(Text(labels[key]), key=key, width=width)
        else:
            for key, width in plan.widths:
                column = self.columns[key]  # type: ignore[index]
                column.width = width
        self._shown = {}
        for key in page:
            cells = self._cells_for(plan, key)
            self.add_row(*cells, key=key)
            self._shown[key] = cells
        self.plan = plan
        self._cursor_key = None
        if selected is not None and selected in self._shown:
            self.move_cursor(row=page.index(selected), animate=False)

    def on_resize(self, event: events.Resize) -> None:
        self.sync()


class DetailLine(Static):
    """The selected row of the table above, in full (wrapped, never cut)."""

    DEFAULT_CSS = """
    DetailLine { height: auto; max-height: 3; color: $text-muted; }
    """

    def __init__(self, **kwargs) -> None:
        super().__init__("", markup=False, **kwargs)
        self._shown_text = ""
        self._text = Text()
        self._fitted_width = 0  # the width the height was fitted at
        self._tallest = 1  # the most lines a text has needed at that width

    def show(self, text: Text | str) -> None:
        plain = text.plain if isinstance(text, Text) else text
        if plain != self._shown_text:
            self._shown_text = plain
            self._text = text if isinstance(text, Text) else Text(text)
            # No layout pass for a new text (a selection moved on a big board, a running
            # session's age once a second): the width is the container's and the height is
            # set by _fit_height, which lays out again only when the number of lines changes.
            self.update(text, layout=False)
            self._fit_height()

    def on_resize(self, event: events.Resize) -> None:
        self._fit_height()

    def _fit_height(self) -> None:
        """As many lines as the longest text shown since the width last changed wraps to
        (the stylesheet's max-height still caps it). Set explicitly: an automatic height
        was seen to stay at the one line of an earlier, shorter text, cutting the text it
        exists to show. It grows but does not shrink while the width stands: moving the
        selection between a long and a short row resized the table above at each step,
        a layout of the screen and three more frames for its scroll bars (~65 ms for a
        cursor move in the scratch pane)."""
        width = self.content_size.width
        if width <= 0 or not self.is_attached:
            return
        if width != self._fitted_width:
            self._fitted_width, self._tallest = width, 1
        lines = len(self._text.wrap(self.app.console, width)) if self._shown_text else 1
        self._tallest = max(self._tallest, lines)
        if self.styles.height is None or self.styles.height.value != self._tallest:
            self.styles.height = self._tallest

    @property
    def shown_text(self) -> str:
        return self._shown_text

