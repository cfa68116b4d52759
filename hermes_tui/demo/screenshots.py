"""Render the real app on a fresh demo home into ``screenshots/*.svg``.

    python -m hermes_tui.demo.screenshots            # writes into ./screenshots
    python -m hermes_tui.demo.screenshots --out DIR

Nothing is drawn by hand: each picture is the app itself (``App.run_test`` +
``save_screenshot``) after the demo home's real processes, board and scratch
entries have had a moment to show up.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

from engine.config import load_config

# (file name, terminal size, keys pressed before the shot)
SHOTS: list[tuple[str, tuple[int, int], tuple[str, ...]]] = [
    ("hermes-160x48.svg", (160, 48), ()),
    ("hermes-120x36.svg", (120, 36), ()),
    ("hermes-80x24.svg", (80, 24), ()),
    ("board.svg", (160, 48), ("1", "z")),
    ("processes.svg", (160, 48), ("2", "z")),
    ("scratch.svg", (160, 48), ("3", "z")),
    ("prune-log.svg", (160, 48), ("4", "z")),
    ("help.svg", (120, 40), ("question_mark",)),
]

SETTLE_SECONDS = 2.5


async def _shoot(home, out: Path, name: str, size: tuple[int, int], keys: tuple[str, ...]) -> Path:
    from hermes_tui.app import HermesApp

    settings = load_config(home.config_file)
    app = HermesApp(home, settings, demo=True, home_label="/tmp/hermes-demo")
    async with app.run_test(size=size) as pilot:
        await pilot.pause(SETTLE_SECONDS)
        for key in keys:
            await pilot.press(key)
            await pilot.pause(0.3)
        await pilot.pause(0.5)
        path = out / name
        app.save_screenshot(filename=name, path=str(out))
    return path


async def render_all(out: Path, only: list[str] | None = None) -> list[Path]:
    from hermes_tui.demo.home import build_demo_home, cleanup_demo_home

    out.mkdir(parents=True, exist_ok=True)
    home = build_demo_home()
    written = []
    try:
        for name, size, keys in SHOTS:
            if only and name not in only:
                continue
            written.append(await _shoot(home, out, name, size, keys))
    finally:
        cleanup_demo_home(home)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hermes_tui.demo.screenshots", description=__doc__.split("\n")[0])
    parser.add_argument("--out", default="screenshots", help="output folder (default: ./screenshots)")
    parser.add_argument("names", nargs="*", help="only these files (default: all)")
    args = parser.parse_args(argv)
    for path in asyncio.run(render_all(Path(args.out), args.names or None)):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
