"""Child process of bench_app.py: runs one app under Textual's Pilot and answers
key-to-visible-change requests from its parent, one per stdin line, so two such
children (hermes-tui on the demo home, and the bare reference app) can be measured
round by round, alternating, while both are alive under the same load.

    python app_keys_driver.py ours|bare

Each request is a key name (``n``, ``enter``, ``question_mark``, ``z``) or ``resize``;
the answer is one JSON line ``{"seconds": ...}``: from the key press until the change
is in the app (the modal screen is active, the zoom class toggled, the new size
applied) and one refresh has been processed. Modal screens are closed again (untimed).
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

SIZES = ((160, 48), (120, 36))
MODAL_KEYS = ("n", "enter", "question_mark")
FILLED = "+filled"  # e.g. "enter+filled": also wait until the modal's own loading work is done


def make_app(which: str):
    """(app, clean-up) for ``ours`` (hermes-tui on a fresh demo home) or ``bare``."""
    if which == "bare":
        from bare_app import BareApp

        return BareApp(), lambda: None
    from engine.config import load_config
    from hermes_tui.app import HermesApp
    from hermes_tui.demo import build_demo_home, cleanup_demo_home

    home = build_demo_home()
    return HermesApp(home, load_config(home.config_file), demo=True), lambda: cleanup_demo_home(home)


async def until(pilot, condition, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError("the change never showed")
        await pilot.pause(0)


def loading(app) -> bool:
    """Work started by the active screen is still pending or running."""
    return any(w.node is app.screen and not w.is_finished for w in app.workers)


def zoomed(app) -> bool:
    return app.query_one("#panes").has_class("-zoomed")


async def measure(app, pilot, request: str, state: dict) -> float:
    main_screen = state["main_screen"]
    if request == "resize":
        state["size"] = 1 - state["size"]
        size = SIZES[state["size"]]
        start = time.perf_counter()
        await pilot.resize_terminal(*size)
        await until(pilot, lambda: tuple(app.size) == size)
    elif request == "z":
        before = zoomed(app)
        start = time.perf_counter()
        await pilot.press("z")
        await until(pilot, lambda: zoomed(app) != before)
    elif request.removesuffix(FILLED) in MODAL_KEYS:
        start = time.perf_counter()
        await pilot.press(request.removesuffix(FILLED))
        await until(pilot, lambda: app.screen is not main_screen)
        if request.endswith(FILLED):
            await until(pilot, lambda: not loading(app))
    else:
        raise ValueError(f"unknown request {request!r}")
    await pilot.pause()  # the refresh that shows it
    seconds = time.perf_counter() - start
    if app.screen is not main_screen:
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is main_screen)
    return seconds


async def serve(which: str) -> None:
    app, clean_up = make_app(which)
    try:
        async with app.run_test(size=SIZES[0]) as pilot:
            await pilot.pause(1.0)  # let the first data arrive
            if which == "ours":
                await pilot.press("1")  # the board, where n and enter act
            state = {"main_screen": app.screen, "size": 0}
            print(json.dumps({"ready": True}), flush=True)
            while True:
                line = await asyncio.to_thread(sys.stdin.readline)
                if not line.strip():
                    break
                try:
                    answer = {"seconds": await measure(app, pilot, line.strip(), state)}
                except Exception as exc:  # reported to the parent, which prints it
                    answer = {"error": f"{type(exc).__name__}: {exc}"}
                print(json.dumps(answer), flush=True)
    finally:
        clean_up()


if __name__ == "__main__":
    asyncio.run(serve(sys.argv[1]))
