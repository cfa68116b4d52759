"""The kanban part of the demo home: a real board worked by a real demo profile.

The builder appends a ``kanban:`` section to the demo config (a ``demo`` profile whose
worker is a small shell script), creates cards, and runs real dispatch ticks until:

- two cards are done (their workers called ``hermes-tui kanban complete``),
- "Migrate the staging database" crashed twice and is blocked by the breaker
  (``gave_up``) with its worker's last words,
- "Triage incoming bug reports" is held back (unassigned: the "held back" line says so),
- a child card was promoted when its parent finished and was then worked too,
- "Refactor the auth module" is left ready for the app's own dispatcher, which picks it
  up a few seconds after the app opens (its worker runs long enough to be watched).
"""

from __future__ import annotations

import asyncio
import shlex
import sys
import time

from engine.config import load_config
from engine.home import HomeLayout

WORK_SECONDS = 0.3
SLOW_WORK_SECONDS = 12
DEMO_WORKER = (
    'echo "picked up $HERMES_KANBAN_TASK: $HERMES_KANBAN_TITLE"; '
    f'case "$HERMES_KANBAN_BODY" in *SLOW*) sleep {SLOW_WORK_SECONDS};; *) sleep {WORK_SECONDS};; esac; '
    'echo "step 1/2: checked out the work tree"; '
    'case "$HERMES_KANBAN_BODY" in *FAIL*) '
    'echo "connecting to staging-db:5432"; '
    'echo "error: connection refused (is the VPN up?)"; exit 1;; esac; '
    'echo "all steps passed"; '
    '{cli} kanban complete "$HERMES_KANBAN_TASK" --summary "done by the demo worker"'
)


def kanban_config() -> str:
    cli = f"{shlex.quote(sys.executable)} -m hermes_tui"
    command = DEMO_WORKER.format(cli=cli).replace("'", "''")
    return (
        "kanban:\n"
        "  dispatch_interval_seconds: 3\n"
        "  max_in_progress: 3\n"
        "  crash_grace_seconds: 0.5\n"
        "  failure_limit: 2\n"
        "  profiles:\n"
        "    demo:\n"
        f"      command: '{command}'\n"
    )


def append_config(home: HomeLayout) -> None:
    """Add our section to the demo config without touching the other parts' sections."""
    text = home.config_file.read_text(encoding="utf-8") if home.config_file.exists() else ""
    if any(line.startswith("kanban:") for line in text.splitlines()):
        return
    if text and not text.endswith("\n"):
        text += "\n"
    home.config_file.write_text(text + kanban_config(), encoding="utf-8")


async def _build(home: HomeLayout) -> None:
    from engine.kanban.models import NewTask
    from engine.kanban.registry_spawner import RegistrySpawner
    from engine.kanban.service import BoardService

    settings = load_config(home.config_file)
    spawner = RegistrySpawner(home, settings)
    async with await BoardService.open(home, settings, spawner=spawner) as board:
        notes = await board.create(NewTask(
            "Write the release notes", assignee="demo", priority=3,
            body="Summarise the changes since 0.1 for the changelog."))
        await board.create(NewTask(
            "Migrate the staging database", assignee="demo", priority=2,
            body="Apply migrations 41-43 on staging. FAIL: the demo worker cannot reach it."))
        await board.create(NewTask(
            "Update the pinned dependencies", assignee="demo", priority=1,
            body="Bump the lock file and run the tests."))
        await board.create(NewTask(
            "Triage incoming bug reports", body="Nobody is assigned: the dispatcher holds this one back."))
        await board.create(NewTask(
            "Publish the release notes", assignee="demo", parents=(notes.id,),
            body="Waits for the release notes card; promoted when it is done."))
        review = await board.create(NewTask(
            "Review the CLI help texts", assignee="demo", body="Sent to review by hand."))
        await board.review(review.id, "please check the wording")
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            result = await board.tick()
            for spawned in result.spawned:
                if spawned.session_id:
                    await asyncio.to_thread(spawner.registry.wait, spawned.session_id, 15)
            counts = await board.counts()
            if counts.get("blocked") and counts.get("done", 0) >= 2:
                break
            await asyncio.sleep(0.6)  # past the crash grace, so the next tick classifies exits
        # Left for the app's own dispatcher: it spawns this one a few seconds after start.
        await board.create(NewTask(
            "Refactor the auth module", assignee="demo", priority=0,
            body="SLOW: takes a few seconds, so the running column and its live pid can be watched."))


def build(home: HomeLayout) -> None:
    append_config(home)
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        asyncio.run(_build(home))
        return
    # Called from inside an event loop (a test, the screenshot script): the board is
    # built on a loop of its own in a helper thread.
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(1) as pool:
        pool.submit(asyncio.run, _build(home)).result()


def cleanup(home: HomeLayout) -> None:
    """Stop the demo's workers that are still running (verified kills via the registry)."""
    from engine.processes import ProcessRegistry

    registry = ProcessRegistry(home, load_config(home.config_file))
    for session in registry.list(include_finished=False):
        if session.owner.startswith("kanban:"):
            registry.kill(session.id, grace=0.5)
