"""App benchmark (issue 12): hermes-tui against a bare Textual app, in the same run.

    python tests/bench/bench_app.py [--runs N] [--key-runs N] [--idle-seconds 60] [--only frame|keys|idle|homes]
        [--homes empty,demo,sessions,scratch] [--home-key-runs N]

The reference is tests/bench/bare_app.py: a Header, a Footer and a DataTable, with
``n``/``enter``/``?`` opening a modal screen and ``z`` hiding part of the layout.

(frame) First frame, in a real terminal: each app is started as a user starts it, as a
    whole process on a pseudo-terminal of 160x48 (``hermes-tui --home EMPTY``,
    ``hermes-tui --demo``, ``hermes-tui --home DEMO`` on a demo home built beforehand,
    ``python bare_app.py``); the figure is the time from the start
    until one full screen of cells (160*48 bytes) has been written after the switch to
    the alternate screen. Rounds alternate which app goes first.
(keys) Key to visible change on the demo home, for ``n``, ``enter`` (modal open, and
    its details loaded), ``?``, ``z`` and a resize: each app runs under Textual's Pilot in
    its own process (tests/bench/app_keys_driver.py), both alive at once; each round asks
    one then the other (alternating) and times the press until the change is in the app
    and one refresh has run.
(board) A big board (issue 22): homes of 10,000 and 100,000 ready cards, built by the
    bench itself (outside the timing). Idle CPU as in (idle), hermes-tui on that home
    beside the bare app, measured once the board is loaded and the app has settled;
    key-to-frame for moving the selection, switching column and opening the card's
    details, against the bare app's row move, column move and modal (see
    app_keys_driver.py: timed from the key event to the change and one screen update).
(idle) Idle CPU: both apps on pseudo-terminals at once (hermes-tui on the demo home),
    after their first frame and a settling pause, for --idle-seconds (60 by default; use
    10 for a quick run); the figure is user+system CPU of the app process as a share of
    one core. Both sides see the same seconds of the same machine.
(homes) Issue 22: each home built by the bench (tests/bench/homes.py: empty, the demo's,
    10/100/1,000 running sessions, 1,000/10,000/100,000 scratch entries), hermes-tui on it
    and the bare app with its clock ticking (``--clock``) on their own terminals at once:
    idle CPU over the same --idle-seconds once both have settled (on the demo home a second
    time once none of its sessions is in its first minute: its worker has ended and the
    runtimes show minutes; two sessions still print), RSS, key to frame (the
    key written to the terminal until the burst of output it caused has been written;
    each round alternates with the bare app's z), and q to exit (on a scratch home right
    after r started a survey). Under the table, how each cost grew from the smallest to
    the largest home of a kind, against the growth of the size.
"""

from __future__ import annotations

import argparse
import fcntl
import os
import pty
import signal
import statistics
import struct
import subprocess
import sys
import tempfile
import termios
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import REPO, JsonChild, Table, compare, interleave, loadavg, row_from, user_env  # noqa: E402

HERE = Path(__file__).resolve().parent
COLS, ROWS = 160, 48
ALT_SCREEN = b"\x1b[?1049h"
CLI = str(Path(sys.executable).with_name("hermes-tui"))
BARE = [sys.executable, str(HERE / "bare_app.py")]
TICKS = os.sysconf("SC_CLK_TCK")


class PtyApp:
    """An app started as a user would, on its own pseudo-terminal; a thread drains
    the terminal and notes when the first full frame has been written."""

    def __init__(self, argv: list[str], env: dict[str, str]) -> None:
        self.master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, COLS, 0, 0))
        self.started = time.perf_counter()
        self.proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, env=env, cwd=REPO,
                                     start_new_session=True, close_fds=True)
        os.close(slave)
        self.first_frame = threading.Event()
        self.first_frame_at = 0.0
        self.output = threading.Condition()
        self.output_at = 0.0  # when the last chunk of output arrived (perf_counter)
        self._reader = threading.Thread(target=self._drain, daemon=True)
        self._reader.start()

    def _drain(self) -> None:
        seen = b""
        after_alt = -1
        while True:
            try:
                data = os.read(self.master, 65536)
            except OSError:
                return
            if not data:
                return
            with self.output:
                self.output_at = time.perf_counter()
                self.output.notify_all()
            if self.first_frame.is_set():
                continue
            seen += data
            if after_alt < 0 and ALT_SCREEN in seen:
                after_alt = seen.index(ALT_SCREEN) + len(ALT_SCREEN)
            if after_alt >= 0 and len(seen) - after_alt >= COLS * ROWS:
                self.first_frame_at = time.perf_counter()
                self.first_frame.set()

    def wait_first_frame(self, timeout: float = 120.0) -> float:
        if not self.first_frame.wait(timeout):
            raise TimeoutError(f"no first frame from {self.proc.args}")
        return self.first_frame_at - self.started

    def cpu_seconds(self) -> float:
        with open(f"/proc/{self.proc.pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / TICKS  # utime + stime

    def rss_mb(self) -> float:
        with open(f"/proc/{self.proc.pid}/status") as fh:
            kb = next(int(line.split()[1]) for line in fh if line.startswith("VmRSS:"))
        return kb / 1024

    def press(self, key: bytes, timeout: float = 30.0) -> float:
        """Seconds from writing ``key`` until the frame that answers it has been written
        (the last chunk of the burst of output it caused: output then quiet for 0.1 s)."""
        with self.output:
            start = time.perf_counter()
            os.write(self.master, key)
            if not self.output.wait_for(lambda: self.output_at > start, timeout):
                raise TimeoutError(f"no frame after {key!r} from {self.proc.args}")
        self.quiet(0.1)
        answered = self.output_at - start
        self.quiet(0.3)
        return answered

    def quiet(self, seconds: float = 0.2, timeout: float = 30.0) -> None:
        deadline = time.perf_counter() + timeout
        while time.perf_counter() < deadline and time.perf_counter() - self.output_at < seconds:
            time.sleep(seconds / 4)

    def settle(self, share: float = 0.03, window: float = 2.0, timeout: float = 240.0) -> None:
        """Wait until the app's CPU over ``window`` seconds is under ``share`` of a core."""
        deadline = time.perf_counter() + timeout
        while time.perf_counter() < deadline:
            before = self.cpu_seconds()
            time.sleep(window)
            if (self.cpu_seconds() - before) / window < share:
                return

    def timed_quit(self, before: bytes = b"") -> float:
        """Seconds from ``q`` (after ``before``, e.g. ``r`` to start a walk) to the exit."""
        if before:
            os.write(self.master, before)
            time.sleep(0.5)
        start = time.perf_counter()
        os.write(self.master, b"q")
        try:
            self.proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            self.quit()
            return float("inf")
        took = time.perf_counter() - start
        self.quit()
        return took

    def quit(self) -> None:
        """``q``, then (if it does not go) SIGTERM and SIGKILL to the group we started."""
        try:
            os.write(self.master, b"q")
            self.proc.wait(timeout=20)
        except (OSError, subprocess.TimeoutExpired):
            for sig in (signal.SIGTERM, signal.SIGKILL):
                try:
                    os.killpg(self.proc.pid, sig)
                    self.proc.wait(timeout=10)
                    break
                except (ProcessLookupError, subprocess.TimeoutExpired):
                    continue
        os.close(self.master)
        self._reader.join(timeout=5)


def app_env() -> dict[str, str]:
    return user_env(TERM="xterm-256color", COLUMNS=str(COLS), LINES=str(ROWS))


def first_frame(argv: list[str], env: dict[str, str] | None = None) -> float:
    app = PtyApp(argv, env or app_env())
    try:
        return app.wait_first_frame()
    finally:
        app.quit()


def bench_frame(table: Table, runs: int) -> None:
    with tempfile.TemporaryDirectory(prefix="hermes-bench-app-") as tmp:
        empty = Path(tmp) / "home"
        table.add(compare("first frame: hermes-tui, empty home vs bare app", lambda: first_frame(
            [CLI, "--home", str(empty)]), lambda: first_frame(BARE), runs, aim="<= 1.5x"))
    table.add(compare("first frame: hermes-tui --demo (fills its home after) vs bare app",
                      lambda: first_frame([CLI, "--demo"]), lambda: first_frame(BARE), runs, aim="<= 1.5x"))
    sys.path.insert(0, str(REPO))
    from hermes_tui.demo.home import build_demo_home, cleanup_demo_home

    demo = build_demo_home()  # built once, outside the timing; no automatic pass rearranges it
    try:
        table.add(compare("first frame: hermes-tui on a built demo home vs bare app", lambda: first_frame(
            [CLI, "--home", str(demo.root)], {**app_env(), "HERMES_AUTO_PRUNE": "0"}),
            lambda: first_frame(BARE), runs, aim="<= 1.5x"))
    finally:
        cleanup_demo_home(demo)


class KeysDriver:
    """One app under Pilot in its own process (app_keys_driver.py), timing keys on request."""

    def __init__(self, which: str, log_dir: Path) -> None:
        self.child = JsonChild([sys.executable, str(HERE / "app_keys_driver.py"), which],
                               log=log_dir / f"keys-{which.split(':')[0]}.log")
        self.loaded = self.child.answer().get("loaded")  # ready (a big board: after this many seconds)

    def ask(self, request: str) -> float:
        return self.child.ask(request)["seconds"]

    def close(self) -> None:
        self.child.close()


KEY_ROWS = (
    ("n", "key n: new-card dialog shown"),
    ("enter", "key enter: details dialog shown"),
    ("enter+filled", "key enter: details shown and loaded"),
    ("question_mark", "key ?: help shown"),
    ("z", "key z: zoom toggled"),
    ("resize", "resize 160x48 <-> 120x36"),
)


def bench_keys(table: Table, runs: int) -> None:
    with tempfile.TemporaryDirectory(prefix="hermes-bench-keys-") as logs:
        ours, bare = KeysDriver("ours", Path(logs)), KeysDriver("bare", Path(logs))
        try:
            for request, name in KEY_ROWS:
                table.add(compare(f"{name} (demo home)", lambda r=request: ours.ask(r),
                                  lambda r=request: bare.ask(r), runs, aim="< 100 ms median"))
        finally:
            ours.close()
            bare.close()


def build_board_home(root: Path, cards: int, dispatch: bool = True) -> Path:
    """A home whose board holds ``cards`` ready cards (made through the board service,
    5,000 a transaction; a batch whose random id collided is made again)."""
    import asyncio

    sys.path.insert(0, str(REPO))
    from engine.config import load_config
    from engine.home import HomeLayout
    from engine.kanban.models import NewTask
    from engine.kanban.service import BoardService
    from engine.kanban.transitions import TransitionRefused

    home = HomeLayout(root).ensure()
    if not dispatch:
        home.config_file.write_text("kanban:\n  dispatch: false\n")

    async def fill() -> None:
        async with await BoardService.open(home, load_config(home.config_file), create=True) as service:
            for start in range(0, cards, 5000):
                batch = [NewTask(f"card {n}: one of the big board's ready cards") for n in
                         range(start, min(cards, start + 5000))]
                while True:
                    try:
                        await service.create_many(batch, actor="bench")
                        break
                    except TransitionRefused:
                        continue

    asyncio.run(fill())
    return home.root


def settled_cpu(apps: dict[str, PtyApp], quiet_share: float = 0.05, window: float = 2.0,
                timeout: float = 300.0) -> None:
    """Wait until each app used less than ``quiet_share`` of a core over ``window``
    seconds (a big board's first read is not idling)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        before = {k: a.cpu_seconds() for k, a in apps.items()}
        time.sleep(window)
        if all((a.cpu_seconds() - before[k]) / window < quiet_share for k, a in apps.items()):
            return
    raise TimeoutError("the apps never settled")


def idle_shares(apps: dict[str, PtyApp], seconds: float, settle) -> dict[str, float]:
    """Each app's CPU over the same ``seconds`` as a share of one core, after their first
    frames and ``settle(apps)``; the apps are quit after."""
    try:
        for app in apps.values():
            app.wait_first_frame()
        settle(apps)
        start = {k: a.cpu_seconds() for k, a in apps.items()}
        t0 = time.perf_counter()
        time.sleep(seconds)
        wall = time.perf_counter() - t0
        return {k: (a.cpu_seconds() - start[k]) / wall for k, a in apps.items()}
    finally:
        for app in apps.values():
            app.quit()


BOARD_KEY_ROWS = (
    ("board-down", "key down: selection moved"),
    ("board-column", "key l/h: column switched"),
    ("board-open", "key enter: details dialog shown"),
)


def bench_board(table: Table, sizes: tuple[int, ...], seconds: float, runs: int, dispatch: bool = True) -> None:
    env = {**app_env(), "HERMES_AUTO_PRUNE": "0"}
    for cards in sizes:
        label = f"{cards:,} ready cards" + ("" if dispatch else ", dispatch off")
        with tempfile.TemporaryDirectory(prefix="hermes-bench-board-") as tmp:
            root = build_board_home(Path(tmp) / "home", cards, dispatch)
            before = loadavg()
            share = idle_shares({"ours": PtyApp([CLI, "--home", str(root)], env), "bare": PtyApp(BARE, app_env())},
                                seconds, settled_cpu)
            table.add(row_from(f"idle CPU over {seconds:g} s, {label} (share of one core)", [share["ours"]],
                               [share["bare"]], before, unit="%", aim="< 2% of a core",
                               note="after the board is read and the app settled; "
                               + ("the app's dispatcher on (its default)" if dispatch else "kanban.dispatch: false")))
            logs = Path(tmp) / "logs"
            logs.mkdir()
            before = loadavg()
            ours = KeysDriver(f"board:{root}:{cards}", logs)
            table.add(row_from(f"whole board on the pane after start, {label}", [ours.loaded], None, before,
                               unit="s", note="under Pilot, from creating the app until every card is in the pane and its "
                               "ready column and the screen update after has run (looked at every 10 ms, "
                               "the loop idle in between)"))
            board_keys(table, ours, KeysDriver("bare", logs), label, runs)


def board_keys(table: Table, ours: KeysDriver, bare: KeysDriver, label: str, runs: int) -> None:
    try:
        for request, name in BOARD_KEY_ROWS:
            table.add(compare(f"{name} ({label})", lambda r=request: ours.ask(r), lambda r=request: bare.ask(r),
                              runs, aim="< 100 ms median"))
    finally:
        ours.close()
        bare.close()


def bench_idle(table: Table, seconds: float) -> None:
    before = loadavg()
    # settle: the demo's first refreshes and data loads are not idling
    share = idle_shares({"ours": PtyApp([CLI, "--demo"], app_env()), "bare": PtyApp(BARE, app_env())}, seconds,
                        lambda _apps: time.sleep(5.0))
    table.add(row_from(f"idle CPU over {seconds:g} s, demo home (share of one core)", [share["ours"]],
                       [share["bare"]], before, unit="%", aim="< 1% of a core",
                       note="both apps on their own terminal over the same seconds; CPU of the app process only"))


BARE_CLOCK = [*BARE, "--clock"]
# What each home's keys are: (bytes, name, the key that undoes it, pressed untimed after
# each round, so every timed press changes something). The bare app's reference key is z
# (a zoom: part of its layout hidden or shown again), pressed in the same rounds.
DOWN, UP, CTRL_END, CTRL_HOME = b"\x1b[B", b"\x1b[A", b"\x1b[1;5F", b"\x1b[1;5H"
HOME_KEYS = {
    "any": ((b"3", "key 3: to the scratch pane", b"1"), (b"2", "key 2: to the processes pane", b"1"),
            (b"1", "key 1: to the board", b"3")),
    "scratch": ((b"3", "key 3: to the scratch pane", b"1"), (b"1", "key 1: to the board", b"3"),
                (b"s", "key s: sort the scratch table", b""), (DOWN, "key down: next row", UP),
                (CTRL_END, "key ctrl+end: last row", CTRL_HOME)),
    "sessions": ((b"2", "key 2: to the processes pane", b"1"), (b"1", "key 1: to the board", b"2"),
                 (DOWN, "key down: next session", UP)),
}
# Pressed (untimed) before a family's keys: the pane they act on.
HOME_FIRST = {"scratch": b"3", "sessions": b"2"}
SIZES = {"sessions": (10, 100, 1000), "scratch": (1000, 10000, 100000)}


def _homes(which: set[str]):
    """(family, size, label, builder) for each home asked for."""
    import homes

    if "empty" in which:
        yield "empty", 0, "empty home", homes.empty_home
    if "demo" in which:
        yield "demo", 0, "demo home", homes.demo_home
    for n in SIZES["sessions"] if "sessions" in which else ():
        yield "sessions", n, f"{n:,} running sessions", lambda n=n: homes.sessions_home(n)
    for n in SIZES["scratch"] if "scratch" in which else ():
        yield "scratch", n, f"{n:,} scratch entries", lambda n=n: homes.scratch_home(n)


def bench_home(table: Table, family: str, label: str, root: Path, seconds: float, key_runs: int) -> dict:
    """One home against the bare app with a clock, both on their own terminal at once:
    idle CPU over the same seconds, RSS, key to frame (alternating with the bare app's z),
    and the quit time (on a scratch home, right after r started a survey's walk)."""
    env = {**app_env(), "HERMES_AUTO_PRUNE": "0"}
    before = loadavg()
    ours, bare = PtyApp([CLI, "--home", str(root)], env), PtyApp(BARE_CLOCK, app_env())
    figures: dict[str, float] = {}
    try:
        for app in (ours, bare):
            app.wait_first_frame(timeout=300)
        ours.settle()  # the first survey and samples done: what follows is idling
        bare.settle()
        share = idle_window(ours, bare, seconds)
        figures["idle"] = share[ours]
        table.add(row_from(f"{label}: idle CPU over {seconds:g} s (share of one core)", [share[ours]],
                           [share[bare]], before, unit="%",
                           aim="< 1% demo, < 0.5% empty" if family in ("demo", "empty") else "< 2%"))
        if family == "demo":
            # Right after it settles the demo is still at work: the app's dispatcher runs
            # a card's worker (12 s) and records its end, and every session is in its first
            # minute, whose runtime shows seconds (each row changes each second). Measured
            # again once no session is younger than that: what stays is the two sessions
            # printing (one line each 0.5 s, one each few seconds).
            before = loadavg()
            wait_past_first_minute(root)
            share = idle_window(ours, bare, seconds)
            table.add(row_from(f"{label}, past its first minute: idle CPU over {seconds:g} s (share of one core)",
                               [share[ours]], [share[bare]], before, unit="%", aim="< 1% demo",
                               note="output still arrives: two sessions print, one twice a second"))
        rss = ours.rss_mb()
        figures["rss"] = rss
        table.add(row_from(f"{label}: RSS", [rss], [bare.rss_mb()], before, unit="MB",
                           aim="< 200 MB" if family == "scratch" else ""))
        for key, name, undo in HOME_KEYS.get(family, HOME_KEYS["any"]):
            if family in HOME_FIRST and key not in (b"1", b"2", b"3", b"4"):
                os.write(ours.master, HOME_FIRST[family])  # untimed: to the pane the key acts on
                ours.quiet(0.3)

            def timed(k=key, u=undo) -> float:
                took = ours.press(k)
                if u:
                    ours.press(u)
                return took

            try:
                a, b = interleave(timed, lambda: bare.press(b"z"), key_runs)
            except TimeoutError as exc:
                print(f"  {label}: {name}: {exc}", file=sys.stderr, flush=True)
                continue
            figures[name] = statistics.median(a)
            table.add(row_from(f"{label}: {name} (bare: z)", a, b, before,
                               aim="< 50 ms" if family in ("demo", "empty") else "< 100 ms"))
        before = loadavg()
        quit_ours = ours.timed_quit(b"r" if family == "scratch" else b"")
        quit_bare = bare.timed_quit()
        figures["quit"] = quit_ours
        table.add(row_from(f"{label}: q to exit" + (" (r first: a survey walking)" if family == "scratch" else ""),
                           [quit_ours], [quit_bare], before, unit="s", aim="< 1 s"))
    finally:
        for app in (ours, bare):
            if app.proc.poll() is None:
                app.quit()
    return figures


def idle_window(ours: PtyApp, bare: PtyApp, seconds: float) -> dict[PtyApp, float]:
    """Each app's share of a core over the same ``seconds``."""
    start = {app: app.cpu_seconds() for app in (ours, bare)}
    t0 = time.perf_counter()
    time.sleep(seconds)
    wall = time.perf_counter() - t0
    return {app: (app.cpu_seconds() - start[app]) / wall for app in (ours, bare)}


def wait_past_first_minute(root: Path, timeout: float = 600.0) -> None:
    """Until no running session of the home is in its first minute (a condition on the
    home's sessions, read as the registry lists them)."""
    from homes import FIRST_MINUTE_SECONDS  # (puts the repository on the path)

    from engine.config import Settings
    from engine.home import HomeLayout
    from engine.processes import ProcessRegistry

    reg = ProcessRegistry(HomeLayout(root), Settings())
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        youngest = min((time.time() - s.started_at for s in reg.list(include_finished=False)), default=None)
        if youngest is None or youngest >= FIRST_MINUTE_SECONDS:
            return
        time.sleep(min(2.0, FIRST_MINUTE_SECONDS - youngest))
    raise TimeoutError(f"a session of {root} stayed in its first minute")


def bench_homes(table: Table, which: set[str], seconds: float, key_runs: int) -> None:
    growth: dict[str, list[tuple[int, dict]]] = {}
    for family, size, label, build in _homes(which):
        print(f"  building: {label}", file=sys.stderr, flush=True)
        root, clean_up = build()
        try:
            figures = bench_home(table, family, label, root, seconds, key_runs)
        except Exception as exc:  # one home that fails leaves the others' rows
            print(f"  {label}: not measured: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
            continue
        finally:
            clean_up()
        growth.setdefault(family, []).append((size, figures))
    for family, points in growth.items():
        if len(points) < 2:
            continue
        (small, first), (big, last) = points[0], points[-1]
        times = big / small
        for what in first:
            if not first[what] or first[what] != first[what]:
                continue
            grew = last[what] / first[what]
            verdict = "no faster than linear" if grew <= times else "FASTER than linear"
            print(f"  growth: {family} {what}: x{grew:.2f} for x{times:g} the size ({verdict})",
                  file=sys.stderr, flush=True)
            table.growth.append(f"{family}, {what}: x{grew:.2f} from {small:,} to {big:,} "
                                f"(x{times:g} the size): {verdict}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=7, help="rounds for the first frame")
    ap.add_argument("--key-runs", type=int, default=11, help="rounds per key")
    ap.add_argument("--idle-seconds", type=float, default=60.0)
    ap.add_argument("--only", choices=("frame", "keys", "idle", "board", "homes"), action="append")
    ap.add_argument("--board-cards", type=int, action="append",
                    help="board sizes for --only board (default 10000 and 100000)")
    ap.add_argument("--board-no-dispatch", action="store_true",
                    help="the big boards' homes with kanban.dispatch: false (the pane's own share)")
    ap.add_argument("--homes", default="empty,demo,sessions,scratch",
                    help="with --only homes: which homes (empty, demo, sessions, scratch), comma-separated")
    ap.add_argument("--home-key-runs", type=int, default=5, help="rounds per key on each home")
    args = ap.parse_args()
    parts = set(args.only or ("frame", "keys", "idle", "board", "homes"))
    table = Table("App: hermes-tui vs a bare Textual app (Header, Footer, DataTable)", "bare app")
    if "frame" in parts:
        bench_frame(table, args.runs)
    if "keys" in parts:
        bench_keys(table, args.key_runs)
    if "idle" in parts:
        bench_idle(table, args.idle_seconds)
    if "board" in parts:
        bench_board(table, tuple(args.board_cards or (10_000, 100_000)), args.idle_seconds, args.key_runs,
                    dispatch=not args.board_no_dispatch)
    if "homes" in parts:
        bench_homes(table, set(args.homes.split(",")), args.idle_seconds, args.home_key_runs)
    table.print()
    for line in table.growth:
        print(f"  growth: {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
