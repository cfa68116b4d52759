"""Textual's Footer, made cheaper to keep current.

Textual's Footer rebuilds all its keys after *every* bindings-changed signal, and a
single focus change sends two (the focus itself, then again after the refresh); at
start-up the screen resuming sends another. Each rebuild mounts and styles a FooterKey
per shown binding, so the first screen paid for five rebuilds. This Footer queues one
rebuild per burst, and skips it when the keys it would show are the ones it shows: the
rebuild reads the bindings in effect when it runs, so the keys shown are exactly those
Textual's Footer would end with. The rebuild runs as the next message rather than after
the next refresh, so the first frame already shows the focused pane's keys (instead of
an empty Footer, then one more layout for the keys). A rebuild changes the keys mounted
in place where it can (a pane switch changes a few words), instead of mounting and
styling every key again.

It also shows only whole keys: Textual's Footer lays its keys side by side and the
terminal cuts the last one mid-word (``? He`` at 80 columns). This one measures each key
and leaves out, when the width is short, the command palette key first, then the keys at
the end of the row, never the ones named in KEEP (help lists every key, quit ends the app).
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.compose import compose
from textual.screen import Screen
from textual.widgets import Footer

# Textual (pinned <8.3) exports FooterKey from its private module only.
from textual.widgets._footer import FooterKey

# Actions whose keys are never left out of the Footer.
KEEP = ("help", "quit")


def key_width(key: FooterKey, compact: bool) -> int:
    """The cells one key takes in the Footer (its text, its paddings, its margin)."""
    if compact:  # key, space, description, margin
        return len(key.key_display) + 1 + len(key.description) + 1
    return len(key.key_display) + 2 + len(key.description) + 1


def fitting(keys: list[FooterKey], width: int, compact: bool) -> list[FooterKey]:
    """The keys that fit ``width`` whole: the palette key goes first, then the keys at
    the end of the row, never a key in KEEP."""
    palette = [k for k in keys if k.has_class("-command-palette")]
    kept = [k for k in keys if not k.has_class("-command-palette")]

    def used(ks: list[FooterKey]) -> int:
        return sum(key_width(k, compact) + (2 if k.has_class("-command-palette") else 0) for k in ks)

    if used(kept + palette) <= width:
        return keys
    while kept and used(kept) > width:
        droppable = [k for k in kept if k.action not in KEEP]
        if not droppable:
            break
        kept.remove(droppable[-1])
    return kept


def _kind(key: FooterKey) -> frozenset[str]:
    """A key's classes but the ones a patch sets (a key of another kind is mounted anew)."""
    return frozenset(key.classes - {"-disabled", "-compact"})


def _split(keys: list[FooterKey]) -> tuple[list[FooterKey] | None, list[FooterKey]]:
    """The plain keys, then the others (the palette key), or None when one of the others
    is not at the end."""
    plain = [k for k in keys if not _kind(k)]
    tail = keys[len(plain):]
    return (plain, tail) if all(_kind(k) for k in tail) else (None, tail)


def _copy_key(old: FooterKey, new: FooterKey) -> None:
    """Make a mounted key show what ``new`` (not mounted) would; nothing when it does."""
    if (old.key, old.key_display, old.description, old.action, old._disabled, old.tooltip) == \
            (new.key, new.key_display, new.description, new.action, new._disabled, new.tooltip):
        return
    old.key, old.key_display, old.description, old.action = new.key, new.key_display, new.description, new.action
    old._disabled = new._disabled
    old.tooltip = new.tooltip
    old.set_class(new._disabled, "-disabled")
    old.refresh(layout=True)


class KeysFooter(Footer):
    _rebuild_queued = False
    _shown: tuple | None = None  # what the keys were built from

    def compose(self) -> ComposeResult:
        widgets = list(super().compose())
        keys = [w for w in widgets if isinstance(w, FooterKey)]
        shown = set(map(id, fitting(keys, self.app.size.width, self.compact)))
        for widget in widgets:
            if isinstance(widget, FooterKey):
                if id(widget) not in shown:
                    continue
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
            if not await self._patch(compose(self)):
                await self.recompose()

    async def _patch(self, fresh: list) -> bool:
        """Show ``fresh`` (the keys a rebuild would mount) by changing the keys mounted
        now in place, adding or removing only the difference: a pane switch changes a few
        keys' words, where mounting and styling every key again was most of its cost.
        False (nothing done) when the keys differ in kind (a group, the palette key)."""
        mounted = list(self.children)
        if not all(type(w) is FooterKey for w in (*mounted, *fresh)):
            return False
        old_plain, old_tail = _split(mounted)
        new_plain, new_tail = _split(fresh)
        if old_plain is None or new_plain is None or [_kind(w) for w in old_tail] != [_kind(w) for w in new_tail]:
            return False
        for old, new in (*zip(old_plain, new_plain, strict=False), *zip(old_tail, new_tail, strict=True)):
            _copy_key(old, new)
        if len(old_plain) > len(new_plain):
            await self.remove_children(old_plain[len(new_plain):])
        elif len(new_plain) > len(old_plain):
            extra = new_plain[len(old_plain):]
            await (self.mount_all(extra, before=old_tail[0]) if old_tail else self.mount_all(extra))
        return True

    def _what_compose_reads(self) -> tuple:
        """Everything Footer.compose builds the keys from (bindings, their state, display)."""
        app = self.app
        return (
            app.size.width,
            self.compact,
            self.show_command_palette,
            app.ENABLE_COMMAND_PALETTE,
            tuple(
                (binding, enabled, tooltip, app.get_key_display(binding) if binding.show else None)
                for _node, binding, enabled, tooltip in self.screen.active_bindings.values()
            ),
        )
