"""Foundation benchmark: start-up costs, side by side in one run.

    python tests/bench/bench_foundation.py [--runs N]

(1) `hermes-tui --help` vs `python -c pass`, whole processes (aim: within 3x).
(2) the app reaching its first screen vs a bare Textual App that only shows a Footer
    (aim: within 1.5x). Both run headless in a fresh interpreter, imports included, and
    exit as soon as the first screen has been composed and refreshed; the figure is
    from the launch to that moment (shutting down is not part of it).
(3) `hermes-tui kanban create` on a home whose board exists (aim: within 4x) and, to say
    what of it is the floor no code of ours can go under, the standard library each
    command needs: `import argparse, json, pathlib, dataclasses` with one parser built
    (what `ps` loads) and `import asyncio, sqlite3` (what a board command adds), each
    against `python -c pass`.
(4) `hermes-tui ps --json` on a home of 300 sessions that finished an hour ago (aim: within
    3x `python -c pass`; its floor is the first of (3)). The home is built as in
    bench_processes.py (c); the untimed warm-up round builds the index of finished sessions.
With ``--against DIR`` (a checkout of another commit, e.g. ``git worktree add DIR HEAD~3``),
each command of (3) and (4) is also run from that tree, interleaved with this one's, as
the console script would run it: the before and after of a change, in the same rounds.
Rounds are interleaved and alternate which side goes first (tests/bench/harness.py).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import REPO, Table, compare, run_process, user_env  # noqa: E402

# Each app prints the wall-clock time at which its first screen has been composed and
# refreshed; the parent subtracts the time it launched the interpreter.
FIRST_SCREEN = """
import sys, time
async def first_screen(pilot):
    await pilot.pause()
    print(repr(time.time()), flush=True)
    pilot.app.exit()
"""

BARE_APP = FIRST_SCREEN + """
from textual.app import App
from textual.widgets import Footer
class Bare(App):
    def compose(self):
        yield Footer()
Bare().run(headless=True, size=(160, 48), auto_pilot=first_screen)
"""

HERMES_APP = FIRST_SCREEN + """
from engine.config import load_config
from engine.home import HomeLayout
from hermes_tui.app import HermesApp
home = HomeLayout(__import__("pathlib").Path(sys.argv[1])).ensure()
HermesApp(home, load_config(home.config_file)).run(headless=True, size=(160, 48), auto_pilot=first_screen)
"""


PS_FLOOR = "import argparse, json, pathlib, dataclasses; argparse.ArgumentParser().parse_args([])"


# The console script the installed package gets (pip's), pointed at another tree.
CONSOLE_SCRIPT = """import re
import sys
sys.path.insert(0, {tree!r})
from hermes_tui.cli import main
if __name__ == '__main__':
    sys.argv[0] = re.sub(r'(-script\\.pyw|\\.exe)?$', '', sys.argv[0])
    sys.exit(main())
"""


def finished_sessions_home(root: Path, sessions: int) -> Path:
    """A home of ``sessions`` sessions that finished an hour ago (settled: a session that
    ended in the last 10 s may still get its kill record, so it is not indexed yet)."""
    from dataclasses import replace

    sys.path.insert(0, str(REPO))
    from engine.config import ProcessSettings, Settings
    from engine.home import HomeLayout
    from engine.processes import ProcessRegistry

    reg = ProcessRegistry(HomeLayout(root).ensure(),
                          replace(Settings(), processes=ProcessSettings(max_finished=10_000)))
    ids = [reg.wait(reg.spawn(["true"]).id).id for _ in range(sessions)]
    long_ago = time.time() - 3600
    for sid in ids:
        os.utime(reg.session_dir(sid) / "exit", (long_ago, long_ago))
    assert len(reg.list(include_finished=True)) == sessions
    return root


def first_screen(script: str, *args: str) -> float:
    """Seconds from launching the interpreter until the app printed its first screen."""
    t0 = time.time()
    out = subprocess.run([sys.executable, "-c", script, *args], check=True, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, cwd=REPO, env=user_env(), text=True).stdout
    return float(out.strip().splitlines()[-1]) - t0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--sessions", type=int, default=300, help="finished sessions in the home of (4)")
    parser.add_argument("--against", metavar="DIR", type=Path,
                        help="also run (3) and (4) from this checkout, interleaved with this tree's")
    parser.add_argument("--cli-only", action="store_true", help="skip (1) and (2)")
    args = parser.parse_args()
    py = sys.executable
    # The installed console script, as a user runs it (not `python -m`, which adds runpy).
    script = str(Path(py).with_name("hermes-tui"))
    table = Table("Foundation: start-up", "reference")
    python_pass = lambda: run_process([py, "-c", "pass"])  # noqa: E731
    if not args.cli_only:
        table.add(compare("(1) hermes-tui --help vs python -c pass", lambda: run_process([script, "--help"]),
                          python_pass, args.runs, aim="<= 3.0x"))
    with tempfile.TemporaryDirectory() as tmp:
        if not args.cli_only:
            table.add(compare("(2) first screen, headless 160x48: app on an empty home vs bare App + Footer",
                              lambda: first_screen(HERMES_APP, tmp), lambda: first_screen(BARE_APP),
                              max(5, args.runs // 2), aim="<= 1.5x"))
        board_env = {**user_env(), "HERMES_AUTO_PRUNE": "0"}
        sessions_home = str(finished_sessions_home(Path(tmp) / "sessions-home", args.sessions))
        # Each tree's command line, and the board home its creates go to.
        trees = {"this tree": ([script], str(Path(tmp) / "board-home"))}
        if args.against is not None:
            other = Path(tmp) / "hermes-tui"
            other.write_text(CONSOLE_SCRIPT.format(tree=str(args.against.resolve())))
            trees[str(args.against)] = ([py, str(other)], str(Path(tmp) / "board-home-against"))
        for cli, home in trees.values():
            run_process([*cli, "--home", home, "kanban", "create", "the first card"], env=board_env)

        def create(tree: str):
            cli, home = trees[tree]
            return lambda: run_process([*cli, "--home", home, "kanban", "create", "one more card"], env=board_env)

        def ps(tree: str):
            cli, _home = trees[tree]
            return lambda: run_process([*cli, "--home", sessions_home, "ps", "--json"])

        table.add(compare("(3) kanban create, a board of a few cards vs python -c pass", create("this tree"),
                          python_pass, args.runs, aim="<= 4.0x"))
        table.add(compare(f"(4) ps --json, {args.sessions} finished sessions vs python -c pass", ps("this tree"),
                          python_pass, args.runs, aim="<= 3.0x"))
        if args.against is not None:
            table.add(compare(f"(3) kanban create: this tree vs {args.against}", create("this tree"),
                              create(str(args.against)), args.runs))
            table.add(compare(f"(4) ps --json: this tree vs {args.against}", ps("this tree"),
                              ps(str(args.against)), args.runs))
    table.add(compare("(3) floor of ps: argparse (one parser), json, pathlib, dataclasses vs python -c pass",
                      lambda: run_process([py, "-c", PS_FLOOR]), python_pass, args.runs))
    table.add(compare("(3) floor of a board command: that and asyncio, sqlite3 vs python -c pass",
                      lambda: run_process([py, "-c", PS_FLOOR + "; import asyncio, sqlite3"]), python_pass, args.runs))
    table.print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
