"""A widget whose small updates repaint what changed, not the whole widget.

CellTable: a DataTable whose cell updates repaint one row, not the whole table.

Textual's ``DataTable.update_cell`` bumps the table's update counter, which is part of
every render cache key: one changed cell (a running session's age, once a second)
re-renders every visible cell of every row. On the demo home that full repaint was the
largest part of the idle app's CPU. Here a cell update drops only the cached renders of
its own row and repaints that row; anything that changes the table's shape (rows added,
removed or sorted, a column's width) still goes through Textual's own path.

It relies on private caches of Textual's DataTable (Textual is pinned below 8.3 in
pyproject.toml); tests/test_app_drawing.py checks what it draws against the plain widget.
(The board's columns are widgets/board/card_list.py's CardList, which draws only the cards in
view.)
"""

from __future__ import annotations

from textual.widgets import DataTable
from textual.widgets.data_table import CellDoesNotExist, ColumnKey, RowKey


class CellTable(DataTable):
    def update_cell(self, row_key: RowKey | str, column_key: ColumnKey | str, value, *,
                    update_width: bool = False) -> None:
        if update_width:
            super().update_cell(row_key, column_key, value, update_width=True)
            return
        row_key = RowKey(row_key) if isinstance(row_key, str) else row_key
        column_key = ColumnKey(column_key) if isinstance(column_key, str) else column_key
        if row_key not in self._row_locations or column_key not in self._column_locations:
            raise CellDoesNotExist(f"No cell exists for row_key={row_key!r}, column_key={column_key!r}.")
        self._data[row_key][column_key] = value
        row_index = self._row_locations.get(row_key)
        self._forget_row(row_key, row_index)
        self.refresh_row(row_index)

    def _forget_row(self, row_key: RowKey, row_index: int) -> None:
        """Drop what was rendered from this row's old values (nothing of other rows)."""
        self._row_renderable_cache.discard((self._update_count, row_index))
        for cache in (self._cell_render_cache, self._row_render_cache):
            for key in [k for k in cache.keys() if k[0] == row_key]:  # noqa: SIM118 (LRUCache has no __iter__)
                cache.discard(key)
        self._line_cache.clear()  # keyed by screen line, not row: cheap to rebuild from the row caches
