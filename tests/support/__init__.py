"""Helpers shared by the test modules.

- ``waiting``: wait for a condition, never for a fixed time (``wait_until`` and its
  Pilot and async twins, ``wait_workers``, ``wait_settled``);
- ``commands``: shell commands paced by gate files the test creates;
- ``cli``: the real CLI in a subprocess;
- ``drawing``: the screen's layouts, counted (``count_layouts``);
- ``kanban``, ``pg``, ``scratch``: boards, clocks and worker settings; a fresh PostgreSQL
  database; aged scratch entries and processes working in them;
- ``pg_race_driver.py``: one host of the PostgreSQL race test, run as a script.

The fixtures (a fresh home, child processes killed after, boards closed after) are in
``tests/conftest.py``."""

from tests.support.cli import run_cli
from tests.support.waiting import (
    DEFAULT_TIMEOUT,
    READING_GROUPS,
    screen_shown,
    wait_settled,
    wait_until,
    wait_until_async,
    wait_until_pilot,
    wait_workers,
)

__all__ = ["DEFAULT_TIMEOUT", "READING_GROUPS", "run_cli", "screen_shown", "wait_settled", "wait_until", "wait_until_async", "wait_until_pilot", "wait_workers"]
