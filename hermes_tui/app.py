"""The full-screen console: four panes over one home, a command bar, a Footer.

The app only observes and asks: every operation is an engine call (the same ones the
CLI makes), run in a worker thread when it may block.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable, Mapping
from functools import partial
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING

from textual import events
from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding
from textual.containers import Container
from textual.css.query import NoMatches
from textual.message import Message
from textual.reactive import Reactive
from textual.screen import Screen
from textual.widgets import Static, Tab, Tabs

from engine.config import Settings
from engine.home import HomeLayout
from hermes_tui import __version__
from hermes_tui.app_bindings import APP_BINDINGS
from hermes_tui.attention_monitor import AttentionMixin, AttentionMonitor
from hermes_tui.dispatch_loop import DispatchLoop
from hermes_tui.keymap import MULTIPLEXER_BACKGROUND_KEY, display_key, help_rows, multiplexer, pane_classes
from widgets.common.command_bar import CommandBar
from widgets.common.help_screen import HelpScreen
from widgets.common.keys_footer import KeysFooter
from widgets.common.pane import Pane
from widgets.common.textual_fixes import install as install_textual_fixes

if TYPE_CHECKING:
    from textual.widget import Widget

    from widgets.processes.processes_pane import ProcessesPane

install_textual_fixes()  # widgets/common/textual_fixes.py: before any widget is styled

# Below this size one pane is shown at a time (the tabs say which).
WIDE_MIN_WIDTH = 120
WIDE_MIN_HEIGHT = 36


def _home_label(path: Path) -> str:
    home = str(Path.home())
    text = str(path)
    if text == home or text.startswith(home + "/"):
        return "~" + text[len(home) :]
    return text


class MainScreen(Screen):
    """The console's screen. No auto-focus at start: the app focuses the active pane's
    widget once mounted, and letting Textual first focus the first focusable widget (the
    tabs) would be one more focus change, each of which rebuilds the Footer."""

    AUTO_FOCUS = ""
    _resumed = False
    # Textual's Screen repaints itself, the whole terminal, on every focus change. What
    # focus changes is restyled on its own widgets (the one focused and the one left),
    # so the console's screen keeps the focus without a repaint: a pane switch redraws
    # the two panes' borders and tables, not every cell.
    focused: Reactive[Widget | None] = Reactive(None, repaint=False)

    def on_screen_resume(self, event: events.ScreenResume) -> None:
        # Runs before Screen's own handler. On the first resume every widget has just
        # been styled by its mount, so restyling the whole tree again is pure cost.
        # Later resumes (back from a modal) are Textual's usual ones: restyle, and
        # auto-focus (the app's "*") if the widget that had focus is gone.
        if not self._resumed:
            self._resumed = True
            event.refresh_styles = False
        else:
            self.AUTO_FOCUS = None

    def on_mount(self) -> None:
        self.watch(self, "focused", self._focus_changed, init=False)

    def _focus_changed(self, focused) -> None:
        # The focused widget can vanish under the user (a table rebuilt by a refresh, a
        # pane's body swapped): focus would then be nowhere and the pane's keys dead
        # until a number key. Put it back on the active pane instead.
        if focused is None and self.is_current:
            self.call_after_refresh(self._refocus)

    def _refocus(self) -> None:
        if self.focused is None and self.is_current and self.app.is_running:
            self.app.action_focus_pane(self.app.active_pane_id)


class HermesApp(AttentionMixin, App[int]):
    CSS_PATH = "app.tcss"
    TITLE = "hermes-tui"
    BINDINGS = APP_BINDINGS  # hermes_tui/app_bindings.py: the keymap reads them without the app

    class HomeFilled(Message, bubble=False):
        """Posted by the thread that fills the home (the demo's builders) to the app once
        they have ended; ``error`` says what stopped them, if anything did."""

        def __init__(self, error: str | None) -> None:
            super().__init__()
            self.error = error

    def __init__(
        self,
        home: HomeLayout,
        settings: Settings,
        *,
        demo: bool = False,
        home_label: str | None = None,
        fill_home: Callable[[HomeLayout], None] | None = None,
    ) -> None:
        """``fill_home`` (the demo's builders) runs in a thread once the first frame is
        up; the panes fill in as it goes and ``home_filled`` is set when it has ended."""
        super().__init__()
        self.home = home
        self.settings = settings
        self.demo = demo
        self._fill_home = fill_home
        self.home_filled = threading.Event()
        # Set when the fill's thread is started (see wait_for_fill).
        self.home_filling = threading.Event()
        self._fill_gate = threading.Lock()
        if fill_home is None:
            self.home_filled.set()
        self.home_label = home_label or _home_label(home.root)
        self._statuses: dict[str, str] = {}
        self._active_pane = "board"
        # The panes by id, kept at compose: a query walks the whole DOM (hundreds of
        # widgets, each matched against the selector), and a pane switch or a dispatch
        # tick asked for panes several times.
        self._panes: dict[str, Pane] = {}
        # The app, not the board pane, spawns workers: see hermes_tui/dispatch_loop.py.
        self.dispatch_loop = DispatchLoop(self, home, settings)
        self.attention = AttentionMonitor(self, home, settings)
        self.dispatch_loop.on_failure = self.attention.tick_failed
        if settings.ui.theme:
            try:
                self.theme = settings.ui.theme
            except Exception:  # an unknown theme name: keep the default, say so once mounted
                self._bad_theme = settings.ui.theme
        # tmux (or screen) may keep ctrl+b: the background key gets a second default there.
        self.multiplexer = multiplexer(os.environ)
        keys = dict(settings.keys)
        if self.multiplexer and "processes.background" not in keys:
            keys["processes.background"] = f"{MULTIPLEXER_BACKGROUND_KEY},ctrl+b"
        if keys:
            self.set_keymap(keys)

    # -- layout -------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield Static(id="header")
        yield Tabs(*(Tab(f"{cls.NUMBER} {cls.TITLE}", id=f"tab-{cls.PANE_ID}") for cls in pane_classes()),
                   id="pane-tabs")
        with Container(id="panes"):
            for cls in pane_classes():
                pane = cls(home=self.home, settings=self.settings)
                self._panes[cls.PANE_ID] = pane
                # Born active: adding the class once mounted would restyle the pane's subtree.
                pane.mark_active(self._active_pane == cls.PANE_ID, update=False)
                yield pane
        yield CommandBar()
        yield KeysFooter()

    def get_default_screen(self) -> Screen:
        return MainScreen(id="_default")

    def on_mount(self) -> None:
        self._apply_size(self.size.width, self.size.height)
        self._update_header()
        self.action_focus_pane(self._active_pane)
        self.attention.start()
        if self._fill_home is None:
            self.dispatch_loop.start()
        else:
            # After the first frame: the home fills while the app is already on screen.
            self.call_after_refresh(self._start_filling)
        bad = getattr(self, "_bad_theme", None)
        if bad:
            self.notify(f"ui.theme {bad!r} is not a known theme; using the default", severity="warning",
                        markup=False)

    async def on_unmount(self) -> None:
        await self.dispatch_loop.close()  # after the panes: the board's last holder closes it

    # -- a home filled after start (the demo) ---------------------------------------------

    def _start_filling(self) -> None:
        with self._fill_gate:
            if self.home_filled.is_set():  # the clean-up came first: no fill any more
                return
            self.home_filling.set()
        threading.Thread(target=self._fill, name="hermes-demo-fill", daemon=True).start()

    def wait_for_fill(self, timeout: float) -> None:
        """For the clean-up: until a fill that started has ended (a fill still running
        would start processes after it). At once when none started (the app quit before
        its first frame was up: q at once), and then none will."""
        with self._fill_gate:
            if not self.home_filling.is_set():
                self.home_filled.set()
                return
        self.home_filled.wait(timeout)

    def _fill(self) -> None:
        """Thread side: run the builders, then tell the UI (unless it has quit)."""
        error = None
        try:
            self._fill_home(self.home)
        except Exception as exc:  # a demo that half-built still shows what it has
            error = f"{type(exc).__name__}: {exc}"
        finally:
            self.home_filled.set()
        self.post_message(self.HomeFilled(error))  # refused once the app is closing

    def on_hermes_app_home_filled(self, message: HomeFilled) -> None:
        error = message.error
        if not self.is_running:
            return  # quitting: no dispatcher to start, no pane to ask
        self._update_header()
        if error:
            self.notify(f"the demo home was not fully built: {error}", severity="error", markup=False)
        # The board's dispatcher starts only now: the builders tick the board themselves.
        self.dispatch_loop.start()
        # The other panes reread the home on their own timers; the scratch survey's is
        # slow, so it is asked once now.
        self.pane("scratch").refresh_entries()

    def on_resize(self, event) -> None:
        self._apply_size(event.size.width, event.size.height)

    def _apply_size(self, width: int, height: int) -> None:
        narrow = width < WIDE_MIN_WIDTH or height < WIDE_MIN_HEIGHT
        self.screen.set_class(narrow, "-narrow")
        # Below 100 columns the keys lose their padding, so a pane's everyday keys fit.
        for footer in self.query(KeysFooter):
            footer.compact = width < 100
            footer.bindings_changed(self.screen)  # the keys that fit depend on the width

    @property
    def narrow(self) -> bool:
        return self.screen.has_class("-narrow")

    # -- header and status ----------------------------------------------------------------

    def on_pane_status_changed(self, message: Pane.StatusChanged) -> None:
        self._statuses[message.pane_id] = message.text
        self._update_header()

    def _update_header(self) -> None:
        from rich.text import Text

        text = Text()
        text.append(" hermes-tui ", style="bold reverse")
        text.append(f" {__version__}  ", style="dim")
        if self.attention_header():
            text.append(self.attention_header() + "  ", style="bold reverse red")
        if self.demo:
            text.append("DEMO  ", style="bold yellow")
            if not self.home_filled.is_set():
                text.append("starting… filling the demo home  ", style="yellow")
        text.append("home ", style="dim")
        text.append(self.home_label, style="bold")
        for cls in pane_classes():
            status = self._statuses.get(cls.PANE_ID)
            if status:
                # The header gets each pane's headline only; the pane's own subtitle
                # carries the rest (the header is one line, even at 80 columns).
                headline = status.split(" · ")[0]
                text.append("  ·  ", style="dim")
                text.append(f"{cls.TITLE.lower()} ", style="dim")
                text.append(headline)
        try:
            self.query_one("#header", Static).update(text, layout=False)  # one line, always
        except NoMatches:  # not composed yet, or torn down
            pass

    # -- panes, focus, zoom -----------------------------------------------------------------

    def pane(self, pane_id: str) -> Pane:
        pane = self._panes.get(pane_id)
        if pane is not None and pane.is_attached:
            return pane
        return self.query_one(f"#{pane_id}", Pane)  # torn down (or never composed): NoMatches

    def panes(self) -> list[Pane]:
        """The panes that are mounted, in their order."""
        return [p for p in self._panes.values() if p.is_attached]

    @property
    def active_pane_id(self) -> str:
        """The id of the pane the user is in (its border is highlighted)."""
        return self._active_pane

    @property
    def active_pane(self) -> Pane:
        return self.pane(self._active_pane)

    def _set_active(self, pane_id: str) -> None:
        self._active_pane = pane_id
        for p in self.panes():
            active = p.id == pane_id
            if p.has_class("-active") != active:  # the two panes that change, restyled alone
                p.mark_active(active)
        if self.zoomed:
            self._apply_zoom()
        tabs = self.query_one("#pane-tabs", Tabs)
        if tabs.active != f"tab-{pane_id}":
            tabs.active = f"tab-{pane_id}"

    def on_descendant_focus(self, event) -> None:
        if not self.is_running:
            return  # closing: its panes may be gone already (Pilot handles what is queued meanwhile)
        node = event.widget
        while node is not None and not isinstance(node, Pane):
            node = node.parent
        if isinstance(node, Pane) and node.id != self._active_pane:
            self._set_active(node.id)

    def on_tabs_tab_activated(self, event: Tabs.TabActivated) -> None:
        # The tabs report a change a few hops later (tabs, screen, app). By then the tab may
        # be active no longer (the tabs' first activation, arriving after a number key or a
        # focus moved the user on): a stale report moves nobody. (One handled while the app
        # closes, its panes gone, is action_focus_pane's to drop.)
        if event.tabs.active != event.tab.id:
            return
        pane_id = (event.tab.id or "").removeprefix("tab-")
        if pane_id and pane_id != self._active_pane:
            self.action_focus_pane(pane_id)

    def action_focus_pane(self, pane_id: str) -> None:
        if not self.is_running:
            return  # closing: its panes may be gone already (Pilot handles what is queued meanwhile)
        self._set_active(pane_id)
        pane = self.pane(pane_id)
        target = pane.focus_target
        (target or pane).focus()

    def action_zoom(self) -> None:
        panes = self.query_one("#panes")
        # The class only marks the state (no CSS rule reads it): toggling a class that
        # CSS reads restyles every widget of every pane, which was most of the zoom's cost.
        panes.set_class(not panes.has_class("-zoomed"), "-zoomed", update=False)
        self._apply_zoom()

    def _apply_zoom(self) -> None:
        """Zoomed: only the active pane is displayed, the panes stacked. Set as inline
        styles on the few widgets concerned; unzoomed, the rules are cleared and the
        stylesheet's layout (wide grid, or one pane when narrow) is back."""
        panes = self.query_one("#panes")
        zoomed = panes.has_class("-zoomed")
        panes.styles.layout = "vertical" if zoomed else None
        for pane in self.panes():
            pane.styles.display = "none" if zoomed and pane.id != self._active_pane else None

    @property
    def zoomed(self) -> bool:
        return self.query_one("#panes").has_class("-zoomed")

    def action_focus_command_bar(self) -> None:
        self.query_one(CommandBar).focus()

    # -- foreground commands (the processes pane runs them) ---------------------------------

    async def on_command_bar_submitted(self, message: CommandBar.Submitted) -> None:
        await self.pane("processes").run_foreground(message.command)

    async def action_background(self) -> None:
        # The view follows the run just moved: its pane, its row; the command bar is left.
        if await self.pane("processes").move_foreground_to_background() is not None:
            self.action_focus_pane("processes")

    def on_processes_pane_foreground_changed(self, message: ProcessesPane.ForegroundChanged) -> None:
        """The command bar says what runs in the foreground and the key that backgrounds it.
        A change that arrives while the app takes its widgets down (ctrl+b posts it from
        a thread, once the run is moved; `q` may come first) has no bar left to tell."""
        try:
            bar = self.query_one(CommandBar)
        except NoMatches:
            return
        bar.set_running(message.command, self.key_display("processes.background"), message.detail)

    def on_command_bar_left(self, message: CommandBar.Left) -> None:
        self.action_focus_pane(self._active_pane)

    def on_board_pane_dispatch_requested(self, message) -> None:
        self.dispatch_loop.request(message.board)

    def on_dispatch_loop_worker_exited(self, message: DispatchLoop.WorkerExited) -> None:
        self.dispatch_loop.wake(message.session_id)

    def on_board_pane_open_worker_output(self, message) -> None:
        """A card's worker is a process session: its output opens in the processes pane."""
        self.action_focus_pane("processes")
        self.pane("processes").show_session(message.session_id)

    def on_board_pane_open_worker_log(self, message) -> None:
        """A hermes-agent card's worker log (its own file): followed live in the output view."""
        from engine.text import escape_text

        self.action_focus_pane("processes")
        self.pane("processes").show_file(f"hermes-log:{message.task_id}", message.path,
                                         f"{message.task_id} · hermes worker log · {escape_text(str(message.path))}",
                                         "hermes-agent's worker log, followed live (read-only)")

    # -- keys, help and palette -------------------------------------------------------------

    @property
    def keymap(self) -> Mapping[str, str]:
        """The keys that ``keys:`` in config.yaml gave to binding ids, with the background
        key's second default inside tmux or screen (read-only)."""
        return MappingProxyType(self._keymap)

    def key_display(self, binding_id: str) -> str:
        """The first key of one of the app's own bindings as the Footer shows it, after ``keys:``."""
        binding = next(b for b in self.BINDINGS if isinstance(b, Binding) and b.id == binding_id)
        key = self._keymap.get(binding_id, binding.key).split(",")[0].strip()
        return display_key(self, key)

    def action_help(self) -> None:
        self.push_screen(HelpScreen(help_rows(self), title=f"hermes-tui {__version__}: every key"))

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        """Every action of every pane, so nothing is reachable only by a key."""
        seen: set[str] = set()
        for row in help_rows(self):
            if row.binding_id in seen or row.action is None:
                continue
            seen.add(row.binding_id)
            yield SystemCommand(
                f"{row.section}: {row.description}",
                f"key {row.keys}  ·  id {row.binding_id}",
                partial(self._run_palette_action, row.action, row.namespace),
            )
        yield from super().get_system_commands(screen)

    async def _run_palette_action(self, action: str, namespace: str | None) -> None:
        if namespace and namespace != "app":
            pane = self.pane(namespace)
            self.action_focus_pane(namespace)
            await self.run_action(action, pane)
        else:
            await self.run_action(action)
