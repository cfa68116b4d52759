"""The output view: one session's output, followed live by byte offset.

A worker thread reads only the new bytes of the session's ``output.log`` (holding an
incomplete UTF-8 character back), masks secrets, and posts whole lines to the view
(an ``OutputView.NewLines`` message) at most ten times a second, waiting for each to be
drawn before reading on. When output arrives faster than anyone can read (more than
16 KiB per tick), only the newest lines are drawn and a note says how much was not,
so a process printing megabytes per second never floods the event loop (or holds
the GIL for long). The view keeps a bounded number of lines; all output stays on disk.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from pathlib import Path

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.css.query import NoMatches
from textual.message import Message
from textual.widgets import Input, RichLog, Static
from textual.worker import get_current_worker

from engine.processes.follower import OutputFollower
from engine.processes.redact import keep_colours_only, maybe_redact
from engine.text import human_bytes
from widgets.common.growing_log import GrowingLog

FLUSH_INTERVAL = 0.1
# While a file stays quiet the follower looks less often, up to this; new output brings
# it back to FLUSH_INTERVAL at once (a finished or silent session costs ~2 wakes a second).
QUIET_INTERVAL = 0.5
PARTIAL_LINE_AFTER = 0.5  # a line without its newline is shown after this long (prompts)
DRAW_BYTES_PER_FLUSH = 16 * 1024  # at most this much new output is drawn per flush


def _render(lines: list[str], term: str | None) -> Text:
    text = Text()
    for i, line in enumerate(lines):
        line = keep_colours_only(line)  # colours render; no other sequence reaches the terminal
        part = Text.from_ansi(line) if "\x1b" in line else Text(line)
        if term:
            part.highlight_words([term], style="reverse", case_sensitive=False)
        if i:
            text.append("\n")
        text.append_text(part)
    return text


def _as_terminal_shows(line: str) -> str:
    """A carriage return redraws the line (progress bars): keep what a terminal would show."""
    if "\r" not in line:
        return line
    line = line.rstrip("\r")  # CRLF line ends
    return line.rsplit("\r", 1)[-1]


class OutputView(Vertical):
    """Follows one output file at a time; ``show`` switches to another."""

    DEFAULT_CSS = """
    OutputView { height: 1fr; }
    OutputView > #output-title { height: 1; color: $text-muted; text-wrap: nowrap; text-overflow: ellipsis; }
    OutputView > RichLog { height: 1fr; background: $surface; }
    OutputView > #output-search { display: none; height: 3; }
    OutputView.-searching > #output-search { display: block; }
    """

    class SearchClosed(Message):
        """The search box closed (Enter or Escape): the owner puts focus back where the
        user came from (the processes pane: its list), so the arrow keys move the list."""

    class NewLines(Message, bubble=False):
        """Posted by the follower thread to the view itself: the next whole lines of the
        output shown (secrets masked), for the ``show`` numbered ``generation``, and how
        many bytes before them were read but not drawn (``skipped_bytes``). Every batch
        must arrive, so none replaces another. ``drawn`` is set once the view has handled
        it: the follower waits for that before it reads on, so batches never queue up."""

        def __init__(self, lines: list[str], generation: int, skipped_bytes: int) -> None:
            super().__init__()
            self.lines = lines
            self.generation = generation
            self.skipped_bytes = skipped_bytes
            self.drawn = threading.Event()

    class Restarted(Message, bubble=False):
        """Posted by the follower thread to the view itself when the file was truncated
        or replaced: the view of ``show`` number ``generation`` starts over, empty."""

        def __init__(self, generation: int) -> None:
            super().__init__()
            self.generation = generation

    def __init__(self, *, max_lines: int = 10_000, tail_chars: int = 256 * 1024, redact: bool = True,
                 **kwargs) -> None:
        super().__init__(**kwargs)
        self.max_lines = max_lines
        self.tail_chars = tail_chars  # the in-memory tail is bounded by lines and by size
        self.redact = redact
        self.lines: deque[str] = deque(maxlen=max_lines)
        self._chars = 0
        self.session_id: str | None = None
        self.path: Path | None = None
        self.follow = True
        self._follow_of: dict[str, bool] = {}  # session id -> follow, as the user left it
        self.wrap = False
        self.search_term: str | None = None
        self._matches: list[int] = []
        self._match_index = -1
        self._generation = 0
        self._title = "no session selected"
        self.skipped_bytes = 0
        self._state = ""

    def compose(self) -> ComposeResult:
        yield Static(self.title_text(), id="output-title", markup=False)
        yield GrowingLog(id="output-log", max_lines=self.max_lines, wrap=False, markup=False, auto_scroll=True)
        yield Input(placeholder="search the output (Enter: find, Escape: cancel)", id="output-search")

    @property
    def log(self) -> RichLog:
        return self.query_one("#output-log", RichLog)

    # -- following ----------------------------------------------------------------------

    def show(self, session_id: str, path: Path, title: str, offset: int = 0) -> None:
        """Follow ``path`` from ``offset``. Showing the session already shown is a no-op."""
        if session_id == self.session_id and self.path == path:
            self.set_title(title)
            return
        self._generation += 1
        self.session_id = session_id
        self.path = Path(path)
        self.follow = self._follow_of.get(session_id, True)  # "follow" belongs to each session
        self.log.auto_scroll = self.follow
        self.lines.clear()
        self._chars = 0
        # A search belongs to the output it was typed for: another session starts without one.
        self.search_term = None
        self._matches = []
        self._match_index = -1
        self.log.clear()
        self.set_title(title)
        self._follow(self.path, offset, self._generation)

    def set_title(self, title: str) -> None:
        self._title = title
        self._refresh_title()

    def set_state(self, state: str) -> None:
        """A short suffix such as 'exit 0' shown after the title."""
        self._state = state
        self._refresh_title()

    @property
    def state(self) -> str:
        """The suffix last given by ``set_state``."""
        return self._state

    def title_text(self) -> Text:
        """The title line: the state and the view's flags first (they are short and must
        never be cut), then which output this is, ending in … when the line is too short."""
        text = Text(no_wrap=True, overflow="ellipsis")
        if self._state:
            text.append(self._state, style="bold")
            text.append(" · ")
        text.append("following" if self.follow else "follow off", style="" if self.follow else "bold yellow")
        if self.wrap:
            text.append(" · wrap")
        if self.search_term:
            count = len(self._matches)
            if self._match_index >= 0:  # "3 of 12": where the view is, among all there are now
                text.append(f" · /{self.search_term}: {self._match_index + 1} of {count}")
            else:
                text.append(f" · /{self.search_term}: {count} match{'es' if count != 1 else ''}")
        text.append(" · ")
        text.append(self._title)
        return text

    def _refresh_title(self) -> None:
        try:
            self.query_one("#output-title", Static).update(self.title_text(), layout=False)
        except NoMatches:  # not composed yet, or already torn down
            pass

    @work(thread=True, exclusive=True, group="output-follow", description="follow the output")
    def _follow(self, path: Path, offset: int, generation: int) -> None:
        worker = get_current_worker()
        follower = OutputFollower(path, offset)
        partial = b""
        partial_since = 0.0
        pause = FLUSH_INTERVAL
        try:
            while not worker.is_cancelled and generation == self._generation:
                pieces, reset, skipped = self._read_newest(follower, generation)
                pause = FLUSH_INTERVAL if pieces or reset or partial else min(QUIET_INTERVAL, pause * 1.5)
                if reset or skipped:
                    skipped += 0 if reset else len(partial)  # that line began in the skipped part
                    partial = b""
                data = b""
                if pieces:
                    data = partial + b"".join(pieces)
                    cut = data.rfind(b"\n")
                    had_partial = bool(partial)
                    data, partial = data[: cut + 1], data[cut + 1 :]
                    if partial and (cut >= 0 or not had_partial):
                        partial_since = time.monotonic()  # a new unfinished line starts now
                    if skipped or len(data) > DRAW_BYTES_PER_FLUSH:
                        # Faster than anyone reads: draw only the newest whole lines and say
                        # how much was not drawn. Bounded work per flush keeps the UI responsive.
                        start = data.find(b"\n", max(0, len(data) - DRAW_BYTES_PER_FLUSH)) + 1
                        if skipped and start == 0:
                            start = data.find(b"\n") + 1
                        skipped += start
                        data = data[start:]
                if partial and (len(partial) > DRAW_BYTES_PER_FLUSH
                                or time.monotonic() - partial_since > PARTIAL_LINE_AFTER):
                    # A prompt, or a progress bar redrawn with \r: show it rather than wait.
                    if len(partial) > DRAW_BYTES_PER_FLUSH:
                        skipped += len(partial) - DRAW_BYTES_PER_FLUSH
                        partial = partial[-DRAW_BYTES_PER_FLUSH:]
                    data, partial = data + partial + b"\n", b""
                if data:
                    text = maybe_redact(data.decode("utf-8", errors="replace"), self.redact)
                    lines = [_as_terminal_shows(line) for line in text.split("\n")]
                    if lines and lines[-1] == "":
                        lines.pop()
                    if not self._hand_over(self.NewLines(lines, generation, skipped), worker):
                        return
                time.sleep(pause)
        finally:
            follower.close()

    def _read_newest(self, follower: OutputFollower, generation: int) -> tuple[list[bytes], bool, int]:
        """Everything new, keeping only about the newest DRAW_BYTES_PER_FLUSH of it
        (the follower's ``read_newest``): (kept bytes, whether the file was reset, bytes
        skipped). Every byte is read once; what is skipped is only not drawn."""
        chunk = follower.read_newest(DRAW_BYTES_PER_FLUSH)
        if chunk.reset:
            self.post_message(self.Restarted(generation))
        return ([chunk.data] if chunk.data else []), chunk.reset, chunk.skipped

    def _hand_over(self, batch: NewLines, worker) -> bool:
        """Thread side: post ``batch`` and wait until the view has drawn it. False when
        the follower should stop: the view is closing (Textual then refuses the message),
        the worker was cancelled, or another session is shown."""
        if not self.post_message(batch):
            return False
        while not batch.drawn.wait(QUIET_INTERVAL):
            if worker.is_cancelled or batch.generation != self._generation:
                return False
        return True

    def on_output_view_restarted(self, message: Restarted) -> None:
        if message.generation != self._generation:
            return
        self.lines.clear()
        self._chars = 0
        self.log.clear()

    def on_output_view_new_lines(self, message: NewLines) -> None:
        try:
            self._append(message.lines, message.generation, message.skipped_bytes)
        finally:
            message.drawn.set()  # the follower reads on

    def _append(self, lines: list[str], generation: int, skipped_bytes: int = 0) -> None:
        if generation != self._generation or not lines or not self.is_attached:
            return
        if skipped_bytes:
            self.skipped_bytes += skipped_bytes
            self.append_note(f"… {human_bytes(skipped_bytes)} of fast output not drawn here "
                             "(all of it is on disk: e opens it in $EDITOR)")
        self._keep(lines)
        self.log.write(_render(lines, self.search_term), scroll_end=self.follow)

    def _keep(self, lines: list[str]) -> None:
        dropped = 0
        for line in lines:
            if len(self.lines) == self.max_lines:
                self._chars -= len(self.lines[0]) + 1
                dropped += 1
            self.lines.append(line)
            self._chars += len(line) + 1
        while self._chars > self.tail_chars and len(self.lines) > 1:
            self._chars -= len(self.lines.popleft()) + 1
            dropped += 1
        if self.search_term:
            self._track_matches(min(len(lines), len(self.lines)), dropped)

    def _track_matches(self, added: int, dropped: int) -> None:
        """Keep the search's matches current as output comes: the lines that left the
        front are no longer matches (the others move up), the new ones are searched."""
        needle = (self.search_term or "").lower()
        kept = [i - dropped for i in self._matches if i >= dropped]
        gone = len(self._matches) - len(kept)
        start = len(self.lines) - added
        newest = (self.lines[-k] for k in range(added, 0, -1))  # a deque's ends are cheap to index
        kept += [start + j for j, line in enumerate(newest) if needle in line.lower()]
        if self._match_index >= 0:
            self._match_index = max(-1, self._match_index - gone)
        self._matches = kept
        self._refresh_title()

    def append_note(self, note: str) -> None:
        """A line of our own (e.g. the exit of a foreground run), styled apart from output."""
        self.log.write(Text(note, style="italic dim"), scroll_end=self.follow)

    def _rerender(self) -> None:
        self.log.clear()
        if self.lines:
            self.log.write(_render(list(self.lines), self.search_term), scroll_end=self.follow)

    # -- toggles --------------------------------------------------------------------------

    def toggle_follow(self) -> bool:
        self.follow = not self.follow
        if self.session_id is not None:
            self._follow_of[self.session_id] = self.follow
        self.log.auto_scroll = self.follow
        if self.follow:
            self.log.scroll_end(animate=False)
        self._refresh_title()
        return self.follow

    def toggle_wrap(self) -> bool:
        self.wrap = not self.wrap
        self.log.wrap = self.wrap
        self._rerender()
        self._refresh_title()
        return self.wrap

    # -- search ----------------------------------------------------------------------------

    def start_search(self) -> None:
        self.add_class("-searching")
        box = self.query_one("#output-search", Input)
        box.value = self.search_term or ""
        box.focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id != "output-search":
            return
        event.stop()
        self.remove_class("-searching")
        self.search(event.value)
        self.post_message(self.SearchClosed())

    def on_key(self, event) -> None:
        if event.key == "escape" and self.has_class("-searching"):
            event.stop()
            self.remove_class("-searching")
            self.post_message(self.SearchClosed())

    def search(self, term: str) -> int:
        term = term.strip()
        self.search_term = term or None
        needle = term.lower()
        self._matches = [i for i, line in enumerate(self.lines) if needle and needle in line.lower()]
        self._match_index = -1
        if self._matches and self.follow:
            self.toggle_follow()  # before redrawing: a followed redraw would end at the bottom
        self._rerender()
        if self._matches:
            self.next_match()
        self._refresh_title()
        return len(self._matches)

    @property
    def matches(self) -> tuple[int, ...]:
        """The indexes in ``lines`` of the lines the last search found."""
        return tuple(self._matches)

    def next_match(self, step: int = 1) -> int | None:
        if not self._matches:
            return None
        self._match_index = (self._match_index + step) % len(self._matches)
        line = self._matches[self._match_index]
        if self.follow:
            self.toggle_follow()  # jumping to a match stops following, or the view runs away
        y = max(0, line - 2)
        self.log.scroll_to(y=y, animate=False)
        # The lines just written are laid out on the next refresh: scroll again then, so the
        # first Enter lands on the first match even when the log was redrawn for it.
        self.log.call_after_refresh(self.log.scroll_to, y=y, animate=False)
        self._refresh_title()  # "k of n" moves with every step, not only with a new search
        return line

    # -- copying --------------------------------------------------------------------------

    def text(self) -> str:
        return "\n".join(self.lines)
