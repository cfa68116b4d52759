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
Rounds are interleaved and alternate which side goes first (tests/bench/harness.py).
"""

from __future__ import annotations

import argparse
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


def first_screen(script: str, *args: str) -> float:
    """Seconds from launching the interpreter until the app printed its first screen."""
    t0 = time.time()
    out = subprocess.run([sys.executable, "-c", script, *args], check=True, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, cwd=REPO, env=user_env(), text=True).stdout
    return float(out.strip().splitlines()[-1]) - t0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    py = sys.executable
    # The installed console script, as a user runs it (not `python -m`, which adds runpy).
    script = str(Path(py).with_name("hermes-tui"))
    table = Table("Foundation: start-up", "reference")
    table.add(compare("(1) hermes-tui --help vs python -c pass", lambda: run_process([script, "--help"]),
                      lambda: run_process([py, "-c", "pass"]), args.runs, aim="<= 3.0x"))
    with tempfile.TemporaryDirectory() as tmp:
        table.add(compare("(2) first screen, headless 160x48: app on an empty home vs bare App + Footer",
                          lambda: first_screen(HERMES_APP, tmp), lambda: first_screen(BARE_APP),
                          max(5, args.runs // 2), aim="<= 1.5x"))
        home = str(Path(tmp) / "board-home")
        run_process([script, "--home", home, "kanban", "create", "the first card"], env=user_env())
        table.add(compare("(3) kanban create, a board of a few cards vs python -c pass",
                          lambda: run_process([script, "--home", home, "kanban", "create", "one more card"],
                                              env={**user_env(), "HERMES_AUTO_PRUNE": "0"}),
                          lambda: run_process([py, "-c", "pass"]), args.runs, aim="<= 4.0x"))
    table.add(compare("(3) floor of ps: argparse (one parser), json, pathlib, dataclasses vs python -c pass",
                      lambda: run_process([py, "-c", PS_FLOOR]), lambda: run_process([py, "-c", "pass"]), args.runs))
    table.add(compare("(3) floor of a board command: that and asyncio, sqlite3 vs python -c pass",
                      lambda: run_process([py, "-c", PS_FLOOR + "; import asyncio, sqlite3"]),
                      lambda: run_process([py, "-c", "pass"]), args.runs))
    table.print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
