"""The shared way every benchmark in tests/bench/ compares two things.

A comparison is fair here when both sides run in the same process run, on the same data,
doing the same amount of work, interleaved round by round (A B, then B A, ...) so that
whatever else the machine is doing lands on both alike, and neither side always goes
first (first after a pause, or second after the other's disk flush). Each row reports
the median of its rounds with min and max, and the machine's load average read just
before and just after the rounds: a figure taken under load says so.

Nothing here is a figure to compare against: a reference is always measured again.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

#: One side of a comparison: does the work once and returns the seconds it took.
Side = Callable[[], float]


def user_env(**extra: str) -> dict[str, str]:
    """The environment a user's shell would give a child: Python may cache bytecode
    (a sandbox may set PYTHONDONTWRITEBYTECODE, which would make every start-up
    recompile our sources and measure the compiler instead)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env.update(extra)
    return env


def loadavg() -> float:
    """The 1-minute load average (how many runnable tasks the machine had)."""
    try:
        with open("/proc/loadavg") as fh:
            return float(fh.read().split()[0])
    except (OSError, ValueError, IndexError):
        return float("nan")


def timed(fn: Callable[[], object]) -> float:
    """Seconds one call of ``fn`` took."""
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def run_process(argv: Sequence[str], *, env: dict[str, str] | None = None, cwd: Path | str | None = None,
                stdin: bytes | None = None) -> float:
    """Seconds for a whole child process, from fork to exit (interpreter start included);
    it must succeed, so a broken side cannot look fast."""
    start = time.perf_counter()
    subprocess.run(list(argv), check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   env=env or user_env(), cwd=cwd or REPO, input=stdin)
    return time.perf_counter() - start


class JsonChild:
    """A long-lived helper process answering one JSON line per request line, so a
    side's figures can be measured inside another interpreter (another virtual
    environment, another app) without paying its start-up in every round. Its stderr
    goes to ``log`` and is quoted when the child dies."""

    def __init__(self, argv: Sequence[str], *, log: Path, env: dict[str, str] | None = None,
                 cwd: Path | str | None = None) -> None:
        self.log = log
        with open(log, "w") as err:
            self.proc = subprocess.Popen(list(argv), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err,
                                         text=True, env=env or user_env(), cwd=cwd or REPO)

    def answer(self) -> dict:
        """The next answer; a dead child or an ``error`` answer raises with the reason."""
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"{self.proc.args[1:]} exited: {self.log.read_text()[-2000:]}")
        answer = json.loads(line)
        if "error" in answer:
            raise RuntimeError(answer["error"])
        return answer

    def ask(self, request: str) -> dict:
        assert self.proc.stdin is not None
        self.proc.stdin.write(request + "\n")
        self.proc.stdin.flush()
        return self.answer()

    def close(self) -> None:
        """An empty line (or end of input) tells the child to finish."""
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        self.proc.wait(timeout=60)


def sync_disks() -> None:
    """Flush dirty pages now, so the side measured next does not pay for the last one's."""
    os.sync()


@dataclass(frozen=True)
class Samples:
    """The per-round figures of one side, in seconds (or whatever the side returns)."""

    values: tuple[float, ...]

    @property
    def median(self) -> float:
        return statistics.median(self.values)

    def show(self, scale: float, digits: int) -> str:
        lo, hi = min(self.values) * scale, max(self.values) * scale
        if digits and self.median * scale < 10:  # small figures keep two significant decimals
            digits = 2
        return f"{self.median * scale:.{digits}f} ({lo:.{digits}f}-{hi:.{digits}f})"


@dataclass(frozen=True)
class Row:
    """One line of a table: ours against a reference measured in the same rounds."""

    name: str
    ours: Samples
    reference: Samples | None
    load_before: float
    load_after: float
    unit: str = "ms"
    aim: str = ""
    note: str = ""

    @property
    def ratio(self) -> float | None:
        """ours / reference, as time: below 1 ours is faster."""
        if self.reference is None or self.reference.median == 0:
            return None
        return self.ours.median / self.reference.median

    @property
    def runs(self) -> int:
        return len(self.ours.values)


UNITS = {"s": (1.0, 3), "ms": (1000.0, 1), "us": (1e6, 0), "%": (100.0, 2), "MB": (1.0, 1)}


def interleave(ours: Side, reference: Side | None, runs: int, *, between: Callable[[], None] | None = None,
               warmup: int = 1) -> tuple[list[float], list[float]]:
    """Run both sides ``runs`` times, alternating which goes first each round.

    ``between`` runs (untimed) before every side, e.g. :func:`sync_disks` where the
    work is disk-bound. ``warmup`` rounds are run and thrown away (page cache,
    bytecode cache, lazy imports)."""
    a: list[float] = []
    b: list[float] = []
    for i in range(warmup + runs):
        order = [(ours, a), (reference, b)] if i % 2 == 0 else [(reference, b), (ours, a)]
        for side, into in order:
            if side is None:
                continue
            if between is not None:
                between()
            value = side()
            if i >= warmup:
                into.append(value)
    return a, b


def compare(name: str, ours: Side, reference: Side | None, runs: int, *, unit: str = "ms", aim: str = "",
            note: str = "", between: Callable[[], None] | None = None, warmup: int = 1) -> Row:
    """Measure both sides interleaved and return the row (reference None: ours only)."""
    before = loadavg()
    a, b = interleave(ours, reference, runs, between=between, warmup=warmup)
    after = loadavg()
    return Row(name, Samples(tuple(a)), Samples(tuple(b)) if b else None, before, after, unit, aim, note)


def row_from(name: str, ours: Sequence[float], reference: Sequence[float] | None, load_before: float, *,
             unit: str = "ms", aim: str = "", note: str = "") -> Row:
    """A row from figures a side measured itself (e.g. inside a child process that
    ran both sides interleaved)."""
    return Row(name, Samples(tuple(ours)), Samples(tuple(reference)) if reference else None, load_before,
               loadavg(), unit, aim, note)


@dataclass
class Table:
    """Rows printed as: what | ours | reference | ratio | runs | load (| aim)."""

    title: str
    reference_name: str = "reference"
    rows: list[Row] = field(default_factory=list)
    growth: list[str] = field(default_factory=list)  # how a cost grew with the size of a home

    def add(self, row: Row) -> Row:
        self.rows.append(row)
        print(f"  measured: {row.name}", file=sys.stderr, flush=True)
        return row

    def render(self) -> str:
        header = ("what", "ours median (min-max)", f"{self.reference_name} median (min-max)", "ratio", "runs",
                  "load", "aim")
        lines = [header]
        for r in self.rows:
            scale, digits = UNITS[r.unit]
            ratio = "-" if r.ratio is None else f"{r.ratio:.2f}x" if r.ratio >= 0.01 else f"{r.ratio:.5f}x"
            ref = "not measured" if r.reference is None else f"{r.reference.show(scale, digits)} {r.unit}"
            lines.append((r.name, f"{r.ours.show(scale, digits)} {r.unit}", ref, ratio, str(r.runs),
                          f"{r.load_before:.2f}->{r.load_after:.2f}", r.aim))
        widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
        out = [f"\n{self.title}",
               f"(ratio = ours / {self.reference_name} time, below 1 = ours faster; load = 1-min load average "
               f"before->after on {os.cpu_count()} cores)"]
        for n, line in enumerate(lines):
            out.append("  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)).rstrip())
            if n == 0:
                out.append("  ".join("-" * w for w in widths))
        out.extend(f"  note: {r.name}: {r.note}" for r in self.rows if r.note)
        return "\n".join(out)

    def print(self) -> None:
        print(self.render(), flush=True)
