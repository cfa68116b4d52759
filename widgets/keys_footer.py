"""Textual's Footer, made cheaper to keep current.

Textual's Footer rebuilds all its keys after *every* bindings-changed signal, and a
single focus change sends two (the focus itself, then again after the refresh); at
start-up the screen resuming sends another. Each rebuild mounts and styles a FooterKey
per shown binding, so the first screen paid for five rebuilds. This Footer queues one
rebuild per burst, and skips it when the keys it would show are the ones it shows: the
rebuild reads the bindings in effect when it runs, so the keys shown are exactly those
Textual's Footer would end with. The rebuild runs as the next message rather than after
the next refresh, so the first frame already shows the focused pane's keys (instead of
an empty Footer, then one more layout for the keys).
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.screen import Screen
from textual.widgets import Footer

# Textual (pinned <8.3) exports FooterKey from its private module only.
from textual.widgets._footer import FooterKey


class KeysFooter(Footer):
    _rebuild_queued = False
    _shown: tuple | None = None  # what the keys were built from

    def compose(self) -> ComposeResult:
        for widget in super().compose():
            if isinstance(widget, FooterKey):
                # Textual creates each key compact, then its data binding un-compacts it
                # on mount: two restyles per key per rebuild. Start it with the value
                # the binding would set (set_reactive runs no watcher).
                widget.set_reactive(FooterKey.compact, self.compact)
            yield widget

    def bindings_changed(self, screen: Screen) -> None:
        self._bindings_ready = True
        if not screen.app.app_focus or not self.is_attached or screen is not self.screen:
            return
        if not self._rebuild_queued:
            self._rebuild_queued = True
            self.call_later(self._rebuild)

    async def _rebuild(self) -> None:
        self._rebuild_queued = False
        if not self.is_attached:
            return
        shown = self._what_compose_reads()
        if shown != self._shown:
            self._shown = shown
            await self.recompose()

    def _what_compose_reads(self) -> tuple:
        """Everything Footer.compose builds the keys from (bindings, their state, display)."""
        app = self.app
        return (
            self.show_command_palette,
            app.ENABLE_COMMAND_PALETTE,
            tuple(
                (binding, enabled, tooltip, app.get_key_display(binding) if binding.show else None)
                for _node, binding, enabled, tooltip in self.screen.active_bindings.values()
            ),
        )
