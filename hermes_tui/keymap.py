"""Every key binding of the app in one list: for the help screen, the command palette
and for validating ``keys:`` in config.yaml (an unknown id is an error with its line)."""

from __future__ import annotations

from collections.abc import Mapping

from engine.config import ConfigError, Settings

# Inside a terminal multiplexer ctrl+b may never reach the app: it is tmux's prefix key
# (and a common one for screen). There the background key has a second default.
MULTIPLEXER_BACKGROUND_KEY = "ctrl+g"


def multiplexer(environ: Mapping[str, str]) -> str | None:
    """"tmux" or "screen" when the app runs inside one ($TMUX, $STY), else None."""
    if environ.get("TMUX"):
        return "tmux"
    if environ.get("STY"):
        return "screen"
    return None


def multiplexer_note(name: str | None) -> str:
    """What the help screen adds to the background key inside a multiplexer."""
    if name == "tmux":
        return "ctrl+b is tmux's prefix, so ctrl+g does it here"
    if name == "screen":
        return "ctrl+b may be screen's escape key, so ctrl+g does it here too"
    return ""


def pane_classes() -> list[type]:
    from widgets.board.board_pane import BoardPane
    from widgets.processes.processes_pane import ProcessesPane
    from widgets.prune_log.prune_log_pane import PruneLogPane
    from widgets.scratch.scratch_pane import ScratchPane

    return [BoardPane, ProcessesPane, ScratchPane, PruneLogPane]


def binding_sources(app_class: type | None = None) -> list[tuple[str, str, type]]:
    """(section title, action namespace, class) for every class whose BINDINGS we own.
    ``app_class``: the app whose BINDINGS work everywhere (None: the app's own list,
    for a check made without the app)."""
    if app_class is None:
        from hermes_tui.app_bindings import AppKeys as app_class
    from widgets.common.command_bar import CommandBar
    from widgets.common.confirm import ConfirmModal
    from widgets.common.help_screen import HelpScreen

    sources: list[tuple[str, str, type]] = [("Everywhere", "app", app_class)]
    for cls in pane_classes():
        sources.append((f"{cls.NUMBER} {cls.TITLE}", cls.PANE_ID, cls))
    sources.append(("Command bar", "command-bar", CommandBar))
    # The board's dialogs are imported here, not by the board pane at start-up.
    from widgets.board.board_modals import AssignScreen, CardDetailsScreen, NewCardScreen
    from widgets.board.worker_log import WorkerLogScreen

    for dialog in (NewCardScreen, AssignScreen, CardDetailsScreen, WorkerLogScreen):
        sources.append(("Board dialogs", "modal", dialog))
    from widgets.board.board_switcher import BoardSwitchScreen

    sources.append(("Board dialogs", "modal", BoardSwitchScreen))
    sources.append(("Confirm dialogs", "modal", ConfirmModal))
    from widgets.attention.attention_view import AttentionScreen

    sources.append(("Attention (!)", "modal", AttentionScreen))
    sources.append(("Help", "modal", HelpScreen))
    return sources


def _own_bindings(cls: type):
    from textual.binding import Binding

    for item in cls.__dict__.get("BINDINGS", []):
        if isinstance(item, Binding):
            yield item


def known_binding_ids(app_class: type | None = None) -> list[str]:
    ids: list[str] = []
    for _section, _ns, cls in binding_sources(app_class):
        for b in _own_bindings(cls):
            if b.id and b.id not in ids:
                ids.append(b.id)
    return ids


def _keys_of(binding, keymap) -> list[str]:
    """The keys a binding answers to once ``keys:`` is applied."""
    raw = keymap.get(binding.id, binding.key) if binding.id else binding.key
    return [k.strip() for k in raw.split(",") if k.strip()]


def key_scopes(app_class: type | None = None) -> list[tuple[str, list]]:
    """(scope name, bindings) for each place where one key press can mean one action:
    a pane with the app's own keys (they work in every pane), the command bar, and
    each dialog on its own."""
    app_bindings: list = []
    scopes: dict[str, list] = {}
    for section, namespace, cls in binding_sources(app_class):
        own = list(_own_bindings(cls))
        if namespace == "app":
            app_bindings = own
        elif namespace == "modal":
            scopes.setdefault(f"{section}: {cls.__name__}", []).extend(own)
        else:
            scopes.setdefault(section, list(app_bindings) if namespace != "command-bar" else []).extend(own)
    return list(scopes.items())


def _key_error(settings: Settings, bid: str, message: str) -> ConfigError:
    return ConfigError(settings.source or "config.yaml", settings.key_lines.get(bid), message)


def _check_clashes(settings: Settings, scope: str, bindings: list, keymap: dict[str, str]) -> None:
    """Two actions of one scope on one key, where ``keys:`` made them meet: refused."""
    owner: dict[str, object] = {}
    for b in bindings:
        for key in _keys_of(b, keymap):
            other = owner.setdefault(key, b)
            if other is b or other.id == b.id:
                continue
            if b.id in keymap or other.id in keymap:
                moved = b.id if b.id in keymap else other.id
                raise _key_error(settings, moved, f"keys: '{other.id}' and '{b.id}' would both be "
                                 f"'{key}' in {scope}; give one of them another key")


def _check_quit(settings: Settings, scope: str, bindings: list, keymap: dict[str, str]) -> None:
    """Some key must still quit in every pane: a pane's own binding on the quit key wins."""
    quit_binding = next((b for b in bindings if b.id == "app.quit"), None)
    if quit_binding is None:
        return
    taken = {key: b for b in bindings if b.id != "app.quit" for key in _keys_of(b, keymap)}
    quit_keys = _keys_of(quit_binding, keymap)
    if quit_keys and all(key in taken for key in quit_keys):
        thief = taken[quit_keys[0]]
        bid = "app.quit" if "app.quit" in keymap else thief.id
        raise _key_error(settings, bid, f"keys: 'app.quit' ({', '.join(quit_keys)}) is taken by "
                         f"'{thief.id}' in {scope}: no key would quit there")


def validate_keys(settings: Settings, app_class: type | None = None) -> None:
    """Raise ConfigError (file:line) for a ``keys:`` entry that names no binding, that
    puts two actions of one pane on one key, or that leaves a pane with no key to quit.
    The app and ``doctor`` both call this, so both say the same line."""
    if not settings.keys:
        return
    known = known_binding_ids(app_class)
    for bid in settings.keys:
        if bid not in known:
            raise _key_error(settings, bid, f"unknown key '{bid}' in 'keys' (known: {', '.join(known)})")
    keymap = dict(settings.keys)
    for scope, bindings in key_scopes(app_class):
        _check_quit(settings, scope, bindings, keymap)
        _check_clashes(settings, scope, bindings, keymap)


def help_rows(app) -> list:
    """Rows for the help screen and the palette, with the keys currently in effect."""
    from widgets.common.help_screen import HelpRow

    keymap = app.keymap
    rows: list[HelpRow] = []
    for section, namespace, cls in binding_sources(type(app)):
        for b in _own_bindings(cls):
            keys = keymap.get(b.id, b.key) if b.id else b.key
            shown = ", ".join(display_key(app, k.strip()) for k in keys.split(","))
            if b.key_display and b.id not in keymap:
                shown = b.key_display
            action = b.action if namespace not in ("modal", "command-bar") else None
            description = b.description or b.action
            note = multiplexer_note(getattr(app, "multiplexer", None))
            if b.id == "processes.background" and note and b.id not in app.settings.keys:
                description = f"{description} ({note})"
            rows.append(HelpRow(section, shown, description, b.id or "", action, namespace))
        if namespace == "app":
            palette = display_key(app, getattr(app, "COMMAND_PALETTE_BINDING", "ctrl+p"))
            rows.append(HelpRow(section, palette, "Command palette: every action by name", "", None, namespace))
    return rows


def display_key(app, key: str) -> str:
    """``key`` as the app's Footer shows it (``^b`` for ctrl+b); the key as written when
    Textual cannot say."""
    try:
        from textual.binding import Binding

        return app.get_key_display(Binding(key, "noop"))
    except Exception:
        return key
