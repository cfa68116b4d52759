"""Helpers shared by the test modules: waiting for a condition (never for a fixed
time) and running the real CLI in a subprocess."""

from tests.support.cli import run_cli
from tests.support.waiting import (
    DEFAULT_TIMEOUT,
    READING_GROUPS,
    wait_settled,
    wait_until,
    wait_until_async,
    wait_until_pilot,
    wait_workers,
)

__all__ = ["DEFAULT_TIMEOUT", "READING_GROUPS", "run_cli", "wait_settled", "wait_until", "wait_until_async", "wait_until_pilot", "wait_workers"]
