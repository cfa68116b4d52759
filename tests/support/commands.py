"""Shell commands for the tests' real processes, paced by gate files: the command waits
until the test creates a file, so it is still running when the test's next step comes,
however slowly a loaded machine goes (never a sleep that hopes)."""

from __future__ import annotations

from pathlib import Path


def until(gate: Path) -> str:
    """Shell code that waits until the file ``gate`` exists."""
    return f"while [ ! -e '{gate}' ]; do sleep 0.01; done;"


def count_to_400(half: Path, rest: Path) -> str:
    """Shell code printing 1 to 400, a line each 10 ms (a steady stream), that stops after
    line 200 until the gate file ``half`` exists and after line 300 until ``rest`` does."""

    def count(first: int, last: int) -> str:
        return f"for i in $(seq {first} {last}); do echo $i; sleep 0.01; done;"

    return f"{count(1, 200)} {until(half)} {count(201, 300)} {until(rest)} {count(301, 400)}"
