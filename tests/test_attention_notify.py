"""Notices of new attention items: grouped by the rate limit, sent once per home
whoever has it open, through a real webhook receiver on 127.0.0.1, and the terminal
sequences as a real pty receives them."""

from __future__ import annotations

import dataclasses
import json
import os
import pty
import select
import signal
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from engine.attention.collect import Attention
from engine.attention.model import Item, Kind
from engine.attention.notify import Notifier, notice_for, osc_sequence, terminal_flavour
from engine.config import NotifySettings, Settings
from tests.support import run_cli, wait_until

NO_BUS = {"PATH": os.environ.get("PATH", "")}  # no DBUS_SESSION_BUS_ADDRESS, no XDG_RUNTIME_DIR


class Receiver:
    """A webhook receiver on 127.0.0.1: every POST body, in order."""

    def __init__(self) -> None:
        self.bodies: list[bytes] = []
        received = self.bodies

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 (http.server's name)
                received.append(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/hook"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver():
    r = Receiver()
    yield r
    r.close()


def curl_to(url: str) -> str:
    return f"curl -sS --fail -X POST -H 'Content-Type: application/json' --data-binary @- {url}"


def write_config(home, **notify) -> None:
    lines = ["notify:"] + [f"  {k}: {json.dumps(v)}" for k, v in notify.items()]
    home.config_file.write_text("\n".join(lines) + "\n")


def blocked(n: int) -> Item:
    return Item(f"blocked:t_{n}:1", Kind.BLOCKED, f"t_{n}", float(n), f"card {n}: blocked by its worker", "unblock")


def attention_of(*items: Item) -> Attention:
    return Attention(tuple(items), (), frozenset({Kind.BLOCKED}))


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def notifier(home, clock, written, **notify) -> Notifier:
    settings = dataclasses.replace(Settings(), notify=NotifySettings(**{"desktop": False, "terminal": "osc9",
                                                                        **notify}))
    return Notifier(home, settings, terminal=written.append, clock=clock, environ=NO_BUS)


def on_a_pty(home, *args: str) -> tuple[int, int]:
    """``hermes-tui --home HOME ARGS`` with a real terminal (a pty) as its stdin and
    stdout, no session bus, outside tmux: (pid, the terminal's other end)."""
    pid, fd = pty.fork()
    if pid == 0:
        for name in ("HERMES_HOME", "DBUS_SESSION_BUS_ADDRESS", "XDG_RUNTIME_DIR", "TMUX"):
            os.environ.pop(name, None)
        os.environ["TERM"] = "xterm-256color"
        os.execv(sys.executable, [sys.executable, "-m", "hermes_tui", "--home", str(home.root), *args])
    return pid, fd


def read_until(fd: int, got: bytearray, marker: bytes, what: str) -> None:
    """Read the terminal into ``got`` until ``marker`` has arrived with its closing BEL."""
    def seen() -> bool:
        ready, _, _ = select.select([fd], [], [], 0.1)
        if ready:
            try:
                got.extend(os.read(fd, 65536))
            except OSError:  # the child has gone: what it wrote is all there is
                pass
        return marker in got and b"\x07" in got[got.find(marker):]

    wait_until(seen, what=what)


def quit_and_wait(pid: int, fd: int, got: bytearray, key: bytes = b"q") -> int:
    """Press ``key`` and read the terminal until the app has exited: its exit status. The
    terminal is drained all along: an app whose output nobody reads blocks in its write
    once the terminal's buffer is full, and never gets to exit (seen once in CI: a test
    that waited without reading hung to its 300 s limit)."""
    os.write(fd, key)
    status: list[int] = []

    def exited() -> bool:
        ready, _, _ = select.select([fd], [], [], 0.1)
        if ready:
            try:
                got.extend(os.read(fd, 65536))
            except OSError:  # every holder of the terminal has gone
                pass
        done, code = os.waitpid(pid, os.WNOHANG)
        if done:
            status.append(code)
        return bool(status)

    wait_until(exited, what="the app exited")
    return status[0]


# -- grouping and claims (in process) ---------------------------------------------------------


def test_a_burst_is_one_notice_and_what_comes_within_the_rate_limit_waits_for_it(home):
    clock, written = Clock(), []
    n = notifier(home, clock, written, rate_limit_seconds=30)
    assert [i.key for i in n.offer(attention_of(*map(blocked, range(5))))] == [blocked(i).key for i in range(5)]
    assert [x.title for x in n.sent] == ["hermes-tui: 5 cards blocked"]
    assert written == ["\a", "\x1b]9;hermes-tui: 5 cards blocked: " + n.sent[0].body + "\x07"]
    clock.now += 5
    n.offer(attention_of(*map(blocked, range(7))))  # two new ones, inside the window
    assert len(n.sent) == 1 and n.due_at() == 1030.0
    assert n.flush() is None
    clock.now = 1030.0
    assert n.flush().title == "hermes-tui: 2 cards blocked"
    n.offer(attention_of(*map(blocked, range(7))))  # nothing new: nothing sent, nothing written
    assert len(n.sent) == 2


def test_an_item_is_claimed_by_one_notifier_of_a_home_only(home):
    clock = Clock()
    first, second = notifier(home, clock, []), notifier(home, clock, [])
    assert len(first.offer(attention_of(blocked(1)))) == 1
    assert second.offer(attention_of(blocked(1), blocked(2))) == [blocked(2)]
    assert first.offer(attention_of(blocked(1), blocked(2))) == []


def test_only_the_kinds_of_notify_kinds_notify(home):
    clock, written = Clock(), []
    n = notifier(home, clock, written, kinds=("session_failed",))
    assert n.offer(attention_of(blocked(1))) == [] and written == []
    assert not (home.own_dir / "attention-notified.json").exists()  # nothing to claim: nothing written


def test_the_terminal_sequences_escape_outside_text_and_pick_their_flavour():
    item = Item("blocked:t_1:1", Kind.BLOCKED, "t_1", 1.0, "title \x1b]0;pwned\x07 here", "unblock")
    notice = notice_for([item])
    seq = osc_sequence(notice, "osc9")
    assert seq.startswith("\x1b]9;hermes-tui: card blocked: t_1: ") and seq.endswith("\x07")
    assert seq.count("\x1b") == 1 and seq.count("\x07") == 1  # the title's own ESC and BEL are shown, not sent
    assert osc_sequence(notice, "osc777").startswith("\x1b]777;notify;hermes-tui: card blocked: t_1;")
    assert osc_sequence(notice, "osc9", tmux=True).startswith("\x1bPtmux;\x1b\x1b]9;")
    assert terminal_flavour("auto", {}, desktop_sent=True) is None
    assert terminal_flavour("auto", {"VTE_VERSION": "7600"}) == "osc777"
    assert terminal_flavour("auto", {}) == "osc9" and terminal_flavour("off", {}) is None


def test_a_command_that_fails_or_overruns_is_logged_and_never_raised(home):
    clock = Clock()
    lines = []
    settings = dataclasses.replace(Settings(), notify=NotifySettings(
        desktop=False, bell=False, terminal="off", command="cat >/dev/null; exec sleep 600",
        command_timeout_seconds=0.5))
    n = Notifier(home, settings, clock=clock, environ=NO_BUS, on_failure=lines.append)
    n.offer(attention_of(blocked(1)))
    assert n.wait_idle(timeout=60)
    assert lines == ["notify.command timed out after 0.5s for blocked:t_1:1"]
    assert "timed out after 0.5s" in (home.own_dir / "notify.log").read_text()
    settings = dataclasses.replace(settings, notify=dataclasses.replace(settings.notify, command_timeout_seconds=60,
                                                                       command="echo nope >&2; exit 4"))
    n = Notifier(home, settings, clock=clock, environ=NO_BUS, on_failure=lines.append)
    n.offer(attention_of(blocked(2)))
    assert n.wait_idle(timeout=60)
    assert lines[-1] == "notify.command exited 4 for blocked:t_2:1: nope"


# -- watch: real processes ------------------------------------------------------------------------


def start_watch(home, children, *args):
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    env.pop("HERMES_HOME", None)
    for name in ("DBUS_SESSION_BUS_ADDRESS", "XDG_RUNTIME_DIR"):
        env.pop(name, None)
    return children([sys.executable, "-m", "hermes_tui", "--home", str(home.root), "watch", *args],
                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)


class Lines:
    """A process's stdout lines as they come (a reader thread)."""

    def __init__(self, proc, stream: str = "stdout") -> None:
        self.lines: list[str] = []
        self.thread = threading.Thread(target=self._read, args=(getattr(proc, stream),), daemon=True)
        self.thread.start()

    def _read(self, stream) -> None:
        for raw in stream:
            self.lines.append(raw.decode("utf-8", "replace").rstrip("\n"))

    def having(self, text: str) -> list[str]:
        return [line for line in self.lines if text in line]


def new_card(home, title="Deploy") -> str:
    done = run_cli("--home", str(home.root), "kanban", "create", title, "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)["id"]


def test_a_card_blocked_from_another_shell_reaches_the_webhook_once_with_two_watches_open(home, children, receiver):
    write_config(home, command=curl_to(receiver.url), poll_seconds=0.2, desktop=False)
    card = new_card(home)
    watches = [start_watch(home, children, "--json") for _ in range(2)]
    outs = [Lines(w) for w in watches]
    assert run_cli("--home", str(home.root), "kanban", "block", card, "--reason", "needs ops").returncode == 0
    for out in outs:  # each has seen it (and so has claimed it, or found it claimed)
        wait_until(lambda out=out: out.having(card), what="the watch printing the blocked card")
    wait_until(lambda: receiver.bodies, what="the webhook's POST")
    for w in watches:
        w.send_signal(signal.SIGTERM)
    assert [w.wait(timeout=60) for w in watches] == [0, 0]  # and every command it started has ended
    assert len(receiver.bodies) == 1
    posted = json.loads(receiver.bodies[0])
    assert posted["kind"] == "blocked" and posted["subject"] == card and "needs ops" in posted["why"]
    assert json.loads(outs[0].having(card)[0]) == {**posted}


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_watch_stops_cleanly_on_int_and_term(home, children, sig):
    write_config(home, poll_seconds=0.2)
    w = start_watch(home, children)
    err = Lines(w, stream="stderr")
    wait_until(lambda: err.having("Watching"), what="watch to start")
    w.send_signal(sig)
    assert w.wait(timeout=60) == 0
    err.thread.join(timeout=60)
    assert err.having("Stopped.")


def test_watch_on_a_real_terminal_rings_and_writes_the_osc_notice(home, children):
    write_config(home, poll_seconds=0.2, desktop=False, terminal="osc9")
    card = new_card(home, "Title with \x1b]2;evil\x07 inside")
    assert run_cli("--home", str(home.root), "kanban", "block", card, "--reason", "needs ops").returncode == 0
    pid, fd = on_a_pty(home, "watch")
    got = bytearray()
    try:
        read_until(fd, got, b"\x1b]9;", "the OSC 9 notice on the terminal")
    finally:
        os.kill(pid, signal.SIGTERM)
        _, status = os.waitpid(pid, 0)
        os.close(fd)
    assert os.waitstatus_to_exitcode(status) == 0
    start = got.find(b"\x1b]9;")
    osc = bytes(got[start:got.find(b"\x07", start) + 1])
    assert osc.startswith(f"\x1b]9;hermes-tui: card blocked: {card}: ".encode())
    assert osc.count(b"\x1b") == 1 and b"\\x1b]2;evil\\x07" in osc  # the title's sequence shown, not sent
    assert b"\a" in got[:start]  # the bell before the notice
    line = got[: start].decode("utf-8", "replace")
    assert "\x1b]2;evil" not in line  # the printed line escapes it too


def test_doctor_says_once_that_desktop_notices_are_off_without_a_session_bus(home):
    done = run_cli("--home", str(home.root), "doctor", env={"DBUS_SESSION_BUS_ADDRESS": "", "XDG_RUNTIME_DIR": ""})
    assert done.returncode == 0
    lines = [line for line in done.stdout.splitlines() if "desktop notifications" in line]
    assert lines == ["notices     no desktop session bus (DBUS_SESSION_BUS_ADDRESS unset): desktop notifications "
                     "are off"]
    report = json.loads(run_cli("--home", str(home.root), "doctor", "--json",
                                env={"DBUS_SESSION_BUS_ADDRESS": "", "XDG_RUNTIME_DIR": ""}).stdout)
    assert report["desktop_notices"] is False


def test_notices_claimed_by_a_watch_killed_before_sending_are_sent_by_the_next_one(home, children, tmp_path):
    """Issue 34 case 9, lost notices: a watch claims every new item, then is killed -9
    while its first command waits on a gate file (the rest not yet sent). Its claims name
    a dead owner (pid and start time), so the next watch takes them over and sends every
    item: at least once, each payload carrying its key so a receiver can dedupe (the
    dead watch's one command in flight, left running, may deliver its item too)."""
    out, gate = tmp_path / "out", tmp_path / "gate"
    out.mkdir()
    command = (f'echo "$HERMES_ATTENTION_KEY" >> {out}/started; '
               f"while [ ! -e {gate} ]; do sleep 0.01; done; cat >> {out}/received")
    write_config(home, command=command, poll_seconds=0.2, desktop=False, bell=False, terminal="off")
    cards = [new_card(home, f"card {i}") for i in range(5)]
    for card in cards:
        assert run_cli("--home", str(home.root), "kanban", "block", card, "--reason", "r").returncode == 0
    first = start_watch(home, children)
    wait_until(lambda: (out / "started").exists() and (out / "started").read_text().strip(),
               what="the first watch's first command waiting on the gate")
    claimed = json.loads((home.own_dir / "attention-notified.json").read_text())
    assert len(claimed.get("claims", {})) == 5 and not claimed["keys"]  # claimed, none sent
    first.kill()
    first.wait(timeout=60)
    gate.touch()
    second = start_watch(home, children)

    def received() -> dict[str, int]:
        got: dict[str, int] = {}
        if (out / "received").exists():
            for line in (out / "received").read_text().splitlines():
                key = json.loads(line)["key"]
                got[key] = got.get(key, 0) + 1
        return got

    wait_until(lambda: {k.split(":")[1] for k in received()} == set(cards), what="every card's notice")
    second.send_signal(signal.SIGTERM)
    assert second.wait(timeout=60) == 0
    assert all(n <= 2 for n in received().values()) and sum(received().values()) <= 6
    state = json.loads((home.own_dir / "attention-notified.json").read_text())
    assert len(state["keys"]) == 5 and not state.get("claims")  # all marked sent
