"""Child process of bench_app.py: runs one app under Textual's Pilot and answers
key-to-visible-change requests from its parent, one per stdin line, so two such
children (hermes-tui on the demo home, and the bare reference app) can be measured
round by round, alternating, while both are alive under the same load.

    python app_keys_driver.py ours|bare|board:HOME:CARDS

Each request is a key name (``n``, ``enter``, ``question_mark``, ``z``) or ``resize``;
the answer is one JSON line ``{"seconds": ...}``: from the key press until the change
is in the app (the modal screen is active, the zoom class toggled, the new size
applied) and one refresh has been processed. Modal screens are closed again (untimed).

``board:HOME:CARDS`` runs hermes-tui on a home built beforehand (a big board: it is
ready once CARDS cards are on the board pane and its ready column, and the screen
update after has run; the ``loaded`` seconds of the first answer, from creating the
app, are found by looking every 10 ms with the event loop idle in between, never by
a loop on ``pilot.pause``, see ``looking_every``) for the board's keys, which the bare app
answers with its own likes: ``down`` (the selection moves: a card / a table row),
``column`` (the next column: ``l`` / ``right``, back again on the next request) and
``open`` (a dialog: the card's details / the bare app's modal). These are timed from
the key event reaching the app (sent as Pilot sends it, without Pilot's wait for an
idle process, which a board loading in threads would stretch) until the change is in
the app and one screen update has run.
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
    if which.startswith("board:"):
        from engine.config import load_config
        from engine.home import HomeLayout
        from hermes_tui.app import HermesApp

        home = HomeLayout(Path(which.split(":")[1]))
        return HermesApp(home, load_config(home.config_file)), lambda: None
    from engine.config import load_config
    from hermes_tui.app import HermesApp
    from hermes_tui.demo.home import build_demo_home, cleanup_demo_home

    home = build_demo_home()
    return HermesApp(home, load_config(home.config_file), demo=True), lambda: cleanup_demo_home(home)


async def until(pilot, condition, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError("the change never showed")
        await pilot.pause(0)


LOOK_EVERY = 0.01  # seconds between two looks at a long wait's condition


async def looking_every(condition, timeout: float, every: float = LOOK_EVERY) -> None:
    """Wait for ``condition``, sleeping ``every`` seconds between looks: the event loop
    idles in between, as it does in a terminal while a thread works. A loop on
    ``pilot.pause(0)`` never idles (each pause queues a callback on every widget and
    yields at once), so a thread that gives up the GIL often (sqlite3 does around every
    step of a query) waits up to the switch interval, 5 ms, each time it takes it back:
    the whole board was on the pane after 9-25 s at 10,000 cards and 15-117 s at 100,000
    under such a loop, after 0.5-0.6 s and 2.0-2.4 s with this one (py-spy: the board's
    connection thread waiting for the GIL inside fetchall while the main thread ran the
    message pumps)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError("the change never showed")
        await asyncio.sleep(every)


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


async def key_to_frame(app, key: str, changed) -> float:
    """From the key event (as Pilot sends it) until ``changed()`` and one screen update."""
    from textual import events

    start = time.perf_counter()
    event = events.Key(key, key if len(key) == 1 else None)
    event.set_sender(app)
    app._driver.send_message(event)
    deadline = time.monotonic() + 60
    while not changed():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{key}: the change never showed")
        await asyncio.sleep(0)
    app.screen._on_timer_update()
    return time.perf_counter() - start


async def measure_board_key(app, pilot, request: str, state: dict) -> float:
    """``down``, ``column`` or ``open`` (see the module doc) on the board or the bare app."""
    main_screen = state["main_screen"]
    bare = state["bare"]
    focused = app.focused
    if request == "down":
        if bare and focused.cursor_row + 1 >= focused.row_count:
            focused.move_cursor(row=0)
            await pilot.pause()
        elif not bare and focused.highlighted is not None and focused.highlighted + 1 >= focused.option_count:
            await pilot.press("home")
        before = (focused.cursor_row if bare else focused.highlighted)
        seconds = await key_to_frame(app, "down", lambda: (focused.cursor_row if bare else focused.highlighted)
                                     != before)
    elif request == "column":
        state["right"] = not state.get("right", False)
        if bare:
            before = focused.cursor_column
            seconds = await key_to_frame(app, "right" if state["right"] else "left",
                                         lambda: focused.cursor_column != before)
        else:
            seconds = await key_to_frame(app, "l" if state["right"] else "h", lambda: app.focused is not focused)
    elif request == "open":
        seconds = await key_to_frame(app, "enter", lambda: app.screen is not main_screen)
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is main_screen)
    else:
        raise ValueError(f"unknown request {request!r}")
    return seconds


async def board_loaded(app, cards: int) -> None:
    """Until the board pane holds ``cards`` cards and its ready column lists them all,
    then one screen update (the one that draws them; headless, it renders but writes
    nothing). Looked at every LOOK_EVERY seconds, so the figure is late by at most that."""
    from widgets.board.board_pane import BoardPane
    from widgets.board.card_list import CardList

    pane = app.query_one(BoardPane)
    ready = pane.query_one("#cards-ready", CardList)
    await looking_every(lambda: len(pane.cards) >= cards and ready.option_count >= cards, timeout=900)
    app.screen._on_timer_update()


async def focus_ready_column(app, pilot) -> None:
    from widgets.board.card_list import CardList

    ready = app.query_one("#cards-ready", CardList)
    ready.focus()
    await until(pilot, lambda: app.focused is ready)


async def serve(which: str) -> None:
    started = time.perf_counter()
    app, clean_up = make_app(which)
    try:
        async with app.run_test(size=SIZES[0]) as pilot:
            loaded = None
            if which.startswith("board:"):  # how long until the whole board is on the pane
                await board_loaded(app, int(which.split(":")[2]))
                loaded = time.perf_counter() - started
                await focus_ready_column(app, pilot)
            await pilot.pause(1.0)  # let the first data arrive
            if which == "ours":
                await pilot.press("1")  # the board, where n and enter act
            state = {"main_screen": app.screen, "size": 0, "bare": which == "bare"}
            print(json.dumps({"ready": True, "loaded": loaded}), flush=True)
            while True:
                line = await asyncio.to_thread(sys.stdin.readline)
                if not line.strip():
                    break
                request = line.strip()
                try:
                    if request.startswith("board-"):
                        answer = {"seconds": await measure_board_key(app, pilot, request.removeprefix("board-"),
                                                                     state)}
                    else:
                        answer = {"seconds": await measure(app, pilot, request, state)}
                except Exception as exc:  # reported to the parent, which prints it
                    answer = {"error": f"{type(exc).__name__}: {exc}"}
                print(json.dumps(answer), flush=True)
    finally:
        clean_up()


if __name__ == "__main__":
    asyncio.run(serve(sys.argv[1]))
