"""Notices that reach a person outside the app: the terminal's bell and desktop notice
(OSC 9 / OSC 777), a desktop notification through the session bus (``notify-send``),
and ``notify.command`` (one run per new item, the item as JSON on stdin).

Each item is noticed once per home: :func:`engine.attention.state.claim` hands a key to
one process only, so with the app and ``watch`` (or two apps) open, one of them sends
it. Notices (not commands) are rate limited: what arrives within
``notify.rate_limit_seconds`` of the last notice is held and sent as one ("5 cards
blocked"). Commands and notify-send run in one background thread, each with a time
limit; a failure is logged to ``<home>/hermes-tui/notify.log`` and never raised.
"""

from __future__ import annotations

import json
import os
import queue
import shutil
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from engine.attention import state
from engine.attention.model import Item, Kind
from engine.home import HomeLayout
from engine.text import escape_text

LOG_FILE = "notify.log"
OUTPUT_TAIL_BYTES = 64 * 1024  # of notify.command's stdout and of its stderr, each: the rest is read and dropped
DRAIN_SECONDS = 0.5  # after its shell exits, how long a command's output may stay open before its leftovers stop
LOG_MAX_BYTES = 1024 * 1024
DESKTOP_TIMEOUT_SECONDS = 5.0
NOTICE_CHARS = 200

# How a group of items of one kind is counted in a notice ("5 cards blocked").
_COUNTED: dict[Kind, tuple[str, str]] = {
    Kind.BLOCKED: ("card blocked", "cards blocked"),
    Kind.GAVE_UP: ("card blocked by the breaker", "cards blocked by the breaker"),
    Kind.REVIEW: ("card in review", "cards in review"),
    Kind.HELD_BACK: ("card held back", "cards held back"),
    Kind.STALE_CLAIM: ("stale claim", "stale claims"),
    Kind.DISPATCH_FAILING: ("dispatcher failing", "dispatchers failing"),
    Kind.HOST_LOST: ("host lost", "hosts lost"),
    Kind.SESSION_FAILED: ("session failed", "sessions failed"),
    Kind.WATCH_MATCHED: ("watch matched", "watches matched"),
    Kind.WATCH_DISABLED: ("watch stopped", "watches stopped"),
    Kind.PRUNE_DUE: ("entry due for prune", "entries due for prune"),
    Kind.QUARANTINE_EXPIRING: ("quarantined entry expiring", "quarantined entries expiring"),
    Kind.PASS_FAILED: ("prune pass failed", "prune passes failed"),
    Kind.DISK_NEARLY_FULL: ("scratch disk nearly full", "scratch disks nearly full"),
    Kind.DOCTOR: ("home warning", "home warnings"),
}


def plain(text: str, limit: int = NOTICE_CHARS) -> str:
    """Text for a notice: no control character at all (a terminal sequence carries it),
    one line, at most ``limit`` characters."""
    text = " ".join(escape_text(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"


@dataclass(frozen=True)
class Notice:
    title: str
    body: str
    items: tuple[Item, ...]


def notice_for(items: list[Item] | tuple[Item, ...]) -> Notice:
    """One notice for ``items``: an item's own words, or the burst counted by kind."""
    items = tuple(items)
    if len(items) == 1:
        item = items[0]
        one, _many = _COUNTED[item.kind]
        return Notice(plain(f"hermes-tui: {one}: {item.subject}", 80), plain(item.why), items)
    counts: dict[Kind, int] = {}
    for item in items:
        counts[item.kind] = counts.get(item.kind, 0) + 1
    parts = [f"{n} {_COUNTED[k][0] if n == 1 else _COUNTED[k][1]}" for k, n in counts.items()]
    return Notice(plain("hermes-tui: " + ", ".join(parts), 80), plain("; ".join(i.why for i in items)), items)


# -- through the terminal ------------------------------------------------------------------

def osc_sequence(notice: Notice, flavour: str, *, tmux: bool = False) -> str:
    """The desktop notice as a terminal sequence: ``osc9`` (iTerm2, WezTerm, Windows
    Terminal, kitty, ghostty, ...) or ``osc777`` (VTE terminals, foot, urxvt). Inside tmux
    it is wrapped for passthrough (tmux's ``allow-passthrough`` must be on)."""
    if flavour == "osc777":
        seq = f"\x1b]777;notify;{notice.title.replace(';', ',')};{notice.body}\x07"
    else:
        seq = f"\x1b]9;{notice.title}: {notice.body}\x07"
    if tmux:
        seq = "\x1bPtmux;" + seq.replace("\x1b", "\x1b\x1b") + "\x1b\\"
    return seq


def terminal_flavour(setting: str, environ: dict[str, str] | None = None, desktop_sent: bool = False) -> str | None:
    """Which OSC notice to write: ``notify.terminal`` (auto, osc9, osc777, off). Auto
    writes one only when no desktop notification went out through the session bus (over
    SSH, in a container), as OSC 777 on VTE terminals and OSC 9 elsewhere."""
    env = os.environ if environ is None else environ
    if setting == "off":
        return None
    if setting in ("osc9", "osc777"):
        return setting
    if desktop_sent:
        return None
    return "osc777" if env.get("VTE_VERSION") else "osc9"


# -- the session bus -------------------------------------------------------------------------

def session_bus(environ: dict[str, str] | None = None) -> bool:
    """Is there a desktop session bus to send a notification through?"""
    env = os.environ if environ is None else environ
    address = env.get("DBUS_SESSION_BUS_ADDRESS", "")
    if address:
        if address.startswith("unix:path="):
            return os.path.exists(address[len("unix:path="):].split(",")[0])
        return True
    runtime = env.get("XDG_RUNTIME_DIR")
    return bool(runtime) and os.path.exists(os.path.join(runtime, "bus"))


def desktop_status(environ: dict[str, str] | None = None) -> tuple[bool, str]:
    """(can notify the desktop, why not): for doctor's one line."""
    if not session_bus(environ):
        return False, "no desktop session bus (DBUS_SESSION_BUS_ADDRESS unset): desktop notifications are off"
    if shutil.which("notify-send") is None:
        return False, "notify-send is not installed: desktop notifications are off (install libnotify-bin)"
    return True, "notify-send on the session bus"


# -- the notifier ------------------------------------------------------------------------------

class Notifier:
    """Claims new items of the notifying kinds and sends them. ``terminal`` writes a
    sequence to the terminal (the app's driver, ``watch``'s own tty), None: no terminal.
    Never blocks: commands and notify-send run in one background thread."""

    def __init__(self, home: HomeLayout, settings, *, terminal: Callable[[str], None] | None = None,
                 clock: Callable[[], float] = time.time, environ: dict[str, str] | None = None,
                 on_failure: Callable[[str], None] | None = None) -> None:
        self.home = home
        self.n = settings.notify
        self.terminal = terminal
        self.clock = clock
        self.env = dict(os.environ if environ is None else environ)
        self.on_failure = on_failure
        self.kinds = frozenset(Kind(k) for k in self.n.kinds)
        self.desktop = self.n.desktop and desktop_status(self.env)[0]
        self._pending: list[Item] = []
        self._outstanding: dict[str, int] = {}  # claimed key -> sends left before it is marked sent
        self._lock = threading.Lock()
        self._next_notice = 0.0
        self._jobs: queue.Queue = queue.Queue()
        self._thread: threading.Thread | None = None
        self.sent: list[Notice] = []  # what went out, newest last (tests and the app's count read it)
        self.claimed: list[Item] = []

    @property
    def active(self) -> bool:
        """Does any channel send anything?"""
        return bool(self.kinds) and (bool(self.n.command) or self.desktop or self.n.bell
                                     or (self.terminal is not None and self.n.terminal != "off"))

    def offer(self, attention) -> list[Item]:
        """Claim and send the new items of ``attention`` (an engine.attention.collect.Attention);
        returns the items this process claimed."""
        if not self.active:
            return []
        known = state.taken(self.home)  # a read: nothing new, nothing written
        wanted = [i for i in attention.items if i.kind in self.kinds and i.key not in known]
        if not wanted:
            return []
        now = self.clock()
        try:
            keys = state.claim(self.home, [i.key for i in wanted], present=attention.keys,
                               covered=attention.covered, now=now)
        except state.StateError as exc:
            self._failed_once(f"notices: {exc}")
            return []
        self._said_state = None
        mine = [i for i in wanted if i.key in set(keys)]
        self.claimed.extend(mine)
        with self._lock:  # each item: its command run (if any) and its notice, then marked sent
            for item in mine:
                self._outstanding[item.key] = 2 if self.n.command else 1
        if self.n.command:
            for item in mine:
                self._submit(self._run_command, item)
        self._pending.extend(mine)
        self.flush(now)
        return mine

    def due_at(self) -> float | None:
        """When held notices are due (None: nothing held)."""
        return self._next_notice if self._pending else None

    def flush(self, now: float | None = None) -> Notice | None:
        """Send the held items as one notice if the rate limit allows it now."""
        now = self.clock() if now is None else now
        if not self._pending or now < self._next_notice:
            return None
        notice = notice_for(self._pending)
        self._pending = []
        self._done([i.key for i in notice.items])
        self._next_notice = now + self.n.rate_limit_seconds
        self.sent.append(notice)
        if self.n.bell and self.terminal is not None:
            self._write("\a")
        if self.desktop:
            self._submit(self._run_desktop, notice)
        flavour = terminal_flavour(self.n.terminal, self.env, desktop_sent=self.desktop)
        if flavour is not None and self.terminal is not None:
            self._write(osc_sequence(notice, flavour, tmux=bool(self.env.get("TMUX"))))
        return notice

    def _write(self, seq: str) -> None:
        try:
            self.terminal(seq)
        except Exception as exc:  # a closed terminal: the notice is lost, the app goes on
            self._failed(f"terminal notice: {exc}")

    # -- the background thread ------------------------------------------------------------

    def _submit(self, job, arg) -> None:
        self._jobs.put((job, arg))
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(target=self._work, name="hermes-notify", daemon=True)
            self._thread.start()

    def _work(self) -> None:
        while True:
            try:
                job, arg = self._jobs.get(timeout=1.0)
            except queue.Empty:
                return
            try:
                job(arg)
            except Exception as exc:  # a notice must never take its sender down
                self._failed(f"{type(exc).__name__}: {exc}")
            finally:
                self._jobs.task_done()

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Wait until every queued command and notification has run (``watch`` on exit)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while self._jobs.unfinished_tasks:
            if deadline is not None and time.monotonic() > deadline:
                return False
            time.sleep(0.02)
        return True

    def _done(self, keys: list[str]) -> None:
        """One send of each of ``keys`` is over; those with none left are marked sent."""
        finished = []
        with self._lock:
            for k in keys:
                left = self._outstanding.get(k, 1) - 1
                if left <= 0:
                    self._outstanding.pop(k, None)
                    finished.append(k)
                else:
                    self._outstanding[k] = left
        if finished:
            try:
                state.mark_sent(self.home, finished, self.clock())
            except state.StateError as exc:
                self._failed(f"notices: {exc}")

    def _run_command(self, item: Item) -> None:
        try:
            self._run_command_once(item)
        finally:
            self._done([item.key])

    def _run_command_once(self, item: Item) -> None:
        data = (json.dumps(item.to_json(), sort_keys=False) + "\n").encode()
        env = dict(self.env, HERMES_HOME=str(self.home.root), HERMES_ATTENTION_KIND=item.kind.value,
                   HERMES_ATTENTION_KEY=item.key, HERMES_ATTENTION_BOARD=item.board or "")
        try:
            run = run_bounded(["/bin/sh", "-c", self.n.command], data, self.n.command_timeout_seconds,
                              env=env, cwd=str(self.home.root))
        except OSError as exc:
            self._failed(f"notify.command could not start: {exc.strerror or exc}")
            return
        left = f"; stopped {plural_processes(run.stopped)} it left running" if run.stopped else ""
        if run.survivors:
            left += f"; {plural_processes(run.survivors)} would not stop"
        if run.timed_out:
            self._failed(f"notify.command timed out after {self.n.command_timeout_seconds:g}s for {item.key}"
                         + left)
            return
        if run.returncode != 0:
            err = run.stderr.decode("utf-8", "replace").strip().splitlines()
            self._failed(f"notify.command exited {run.returncode} for {item.key}"
                         + (f": {err[-1]}" if err else "") + left)
        elif left:
            self._failed(f"notify.command for {item.key}{left[1:]}")

    def _run_desktop(self, notice: Notice) -> None:
        try:
            done = subprocess.run(["notify-send", "--app-name=hermes-tui", "--", notice.title, notice.body],
                                  capture_output=True, timeout=DESKTOP_TIMEOUT_SECONDS, env=self.env)
        except (OSError, subprocess.TimeoutExpired) as exc:
            self._failed(f"notify-send: {exc}")
            return
        if done.returncode != 0:
            self._failed(f"notify-send exited {done.returncode}: "
                         f"{done.stderr.decode('utf-8', 'replace').strip()[:200]}")

    def _failed_once(self, line: str) -> None:
        """A state write failure is said once, not on every poll, until it works again."""
        if line != getattr(self, "_said_state", None):
            self._said_state = line
            self._failed(line)

    def _failed(self, line: str) -> None:
        line = escape_text(line)
        log_line(self.home, line)
        if self.on_failure is not None:
            try:
                self.on_failure(line)
            except Exception:
                pass


def log_line(home: HomeLayout, line: str) -> None:
    """One line in ``<home>/hermes-tui/notify.log`` (a guest home's: in its state folder
    outside it, engine.attention.state.state_dir), started again past LOG_MAX_BYTES."""
    path: Path = state.state_dir(home) / LOG_FILE
    try:
        state.ensure_state_dir(home)
        if path.exists() and path.stat().st_size > LOG_MAX_BYTES:
            os.replace(path, path.with_name(LOG_FILE + ".1"))
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(f"{time.strftime('%Y-%m-%d %H:%M:%S')} {escape_text(line)}\n")
    except Exception:
        pass


# -- notify.command: bounded output, its whole session stopped ------------------------------------

def plural_processes(n: int) -> str:
    return f"{n} process{'es' if n != 1 else ''}"


@dataclass
class BoundedRun:
    returncode: int | None
    stdout: bytes  # the last OUTPUT_TAIL_BYTES of it
    stderr: bytes
    timed_out: bool
    stopped: int = 0  # processes of its session stopped when the run ended
    survivors: int = 0  # ... and those that would not stop


def _tail(buf: bytearray, chunk: bytes, cap: int) -> None:
    buf += chunk
    if len(buf) > cap:
        del buf[: len(buf) - cap]


def run_bounded(argv: list[str], data: bytes, timeout: float, *, env: dict[str, str], cwd: str,
                tail_bytes: int = OUTPUT_TAIL_BYTES) -> BoundedRun:
    """Run ``argv`` in a new session with ``data`` on stdin. Its output is read as it comes
    and only the last ``tail_bytes`` of each stream are kept (``yes`` fills no memory).
    The run ends when its shell has exited (its output then has DRAIN_SECONDS to close)
    or at ``timeout``; then every process left in its session (``sleep 302 &``) is
    stopped: TERM, a second, KILL, each verified by its fingerprint first."""
    import selectors

    from engine import identity

    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=env, cwd=cwd, start_new_session=True, close_fds=True)
    leader = identity.read_stat(proc.pid)  # alive or its zombie: not reaped before this
    deadline = time.monotonic() + timeout
    out, err = bytearray(), bytearray()
    sel = selectors.DefaultSelector()
    for stream, buf in ((proc.stdout, out), (proc.stderr, err)):
        os.set_blocking(stream.fileno(), False)
        sel.register(stream, selectors.EVENT_READ, buf)
    os.set_blocking(proc.stdin.fileno(), False)
    pending = memoryview(data)
    if pending:
        sel.register(proc.stdin, selectors.EVENT_WRITE, None)
    else:
        proc.stdin.close()
    timed_out = False
    exited_at: float | None = None
    try:
        while sel.get_map():
            now = time.monotonic()
            if proc.poll() is not None and exited_at is None:
                exited_at = now
            if now >= deadline:
                timed_out = proc.poll() is None
                break
            if exited_at is not None and now - exited_at >= DRAIN_SECONDS:
                break
            for key, _ in sel.select(min(0.1, deadline - now)):
                if key.data is None:  # stdin
                    try:
                        n = os.write(key.fd, pending[:65536])
                    except BlockingIOError:
                        continue
                    except OSError:  # it does not read its stdin (EPIPE): fine
                        n = len(pending)
                    pending = pending[n:]
                    if not pending:
                        sel.unregister(key.fileobj)
                        key.fileobj.close()
                    continue
                try:
                    chunk = os.read(key.fd, 65536)
                except BlockingIOError:
                    continue
                if chunk:
                    _tail(key.data, chunk, tail_bytes)
                else:
                    sel.unregister(key.fileobj)
        if proc.poll() is None and time.monotonic() >= deadline:
            timed_out = True
    finally:
        sel.close()
        stopped, survivors = stop_session(proc.pid, leader)
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            try:
                stream.close()
            except OSError:
                pass
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
    return BoundedRun(proc.returncode, bytes(out), bytes(err), timed_out, stopped, survivors)


def session_members(sid: int, leader) -> dict[int, str]:
    """The live processes of the session ``sid`` that its leader (``leader``, the
    ProcStat read when it started) began: started no earlier than it, on this boot. When
    ``sid`` leads another process now (the number was used again after the session
    emptied), none: nothing is ours there."""
    from engine import identity

    if leader is None:
        return {}
    members = {}
    for stat in identity._live_stats():
        if stat.session != sid:
            continue
        if stat.pid == sid and stat.start_ticks != leader.start_ticks:
            return {}
        if stat.start_ticks >= leader.start_ticks:
            members[stat.pid] = identity.fingerprint_of(stat)
    return members


def stop_session(sid: int, leader, grace: float = 1.0) -> tuple[int, int]:
    """Stop what is left of the command's session: (stopped besides its shell, survivors)."""
    import signal

    from engine import identity

    members = session_members(sid, leader)
    if not members:
        return 0, 0
    for pid, fp in members.items():
        identity.send_signal(pid, fp, signal.SIGTERM)
    living = identity.wait_gone(members, time.monotonic() + grace)
    for pid, fp in living.items():
        identity.send_signal(pid, fp, signal.SIGKILL)
    living = identity.wait_gone(living, time.monotonic() + 1.0)
    return len(members) - (sid in members), len(living)  # the shell itself is not "left behind"
