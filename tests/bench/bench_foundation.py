"""Foundation benchmark: start-up costs, side by side in one run.

    python tests/bench/bench_foundation.py [--runs N]

(1) `hermes-tui --help` vs `python -c pass`   (aim: within 3x)
(2) the app reaching its first screen vs a bare Textual App that only shows a Footer
    (aim: within 1.5x). Both run headless in a fresh interpreter, imports included, and
    exit as soon as the first screen has been composed and refreshed.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

# Each app prints the wall-clock time at which its first screen has been composed and
# refreshed; the parent subtracts the time it launched the interpreter. Shutting down
# is not part of "reaching the first screen" and is measured separately.
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


# As on a user's machine: Python may cache bytecode (this sandbox sets PYTHONDONTWRITEBYTECODE,
# which would make every run recompile our sources and measure the compiler instead).
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def timed(argv: list[str]) -> float:
    """Wall time of a command; for the app scripts, until they print their first screen."""
    t0 = time.time()
    out = subprocess.run(argv, check=True, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=REPO, env=ENV,
                         text=True).stdout
    end = time.time()
    if argv[1] == "-c" and "first_screen" in argv[2]:
        return float(out.strip().splitlines()[-1]) - t0
    return end - t0


def compare(name_a: str, argv_a: list[str], name_b: str, argv_b: list[str], runs: int) -> tuple[float, float]:
    a, b = [], []
    timed(argv_a), timed(argv_b)  # warm the page cache
    for _ in range(runs):  # interleaved, so machine noise hits both alike
        a.append(timed(argv_a))
        b.append(timed(argv_b))
    ma, mb = statistics.median(a), statistics.median(b)
    print(f"  {name_a:<38} median {ma * 1000:7.1f} ms   (min {min(a) * 1000:.1f})")
    print(f"  {name_b:<38} median {mb * 1000:7.1f} ms   (min {min(b) * 1000:.1f})")
    print(f"  ratio {ma / mb:.2f}x")
    return ma, mb


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    py = sys.executable
    print("(1) --help start-up")
    # The installed console script, as a user runs it (not `python -m`, which adds runpy).
    script = str(Path(py).with_name("hermes-tui"))
    compare("hermes-tui --help", [script, "--help"], "python -c pass", [py, "-c", "pass"], args.runs)
    print("(2) first screen, headless 160x48")
    with tempfile.TemporaryDirectory() as tmp:
        compare("hermes-tui app (empty home)", [py, "-c", HERMES_APP, tmp],
                "bare Textual App + Footer", [py, "-c", BARE_APP], max(5, args.runs // 2))


if __name__ == "__main__":
    main()
