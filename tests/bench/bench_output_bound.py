"""Output bound benchmark: a session writing a lot of output through its bound (the
output keeper cutting its middle as it grows) against the same session unbounded.

    python tests/bench/bench_output_bound.py [--mb 200] [--bound-mib 1] [--runs 5]

Each round spawns ``yes <64 chars> | head -c MB`` as a session and waits for its exit
record: once with ``max_output_bytes`` = the bound, once with 0 (nothing cut), interleaved,
alternating which goes first, the disks synced before each side. The command writes
straight into its output file either way, so the bound can only cost through the keeper
(its stat once a second, its cuts) competing for the CPU; the keeper's own CPU time over
the bounded rounds is printed too (it is a separate process: its cost does not show in the
session's wall time on an idle second core).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from harness import Table, compare, sync_disks  # noqa: E402

from engine import identity  # noqa: E402
from engine.config import Settings  # noqa: E402
from engine.home import HomeLayout  # noqa: E402
from engine.processes import ProcessRegistry  # noqa: E402
from engine.processes.keeper import keeper_pid  # noqa: E402
from engine.processes.output_bound import stored_bytes  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=int, default=200)
    ap.add_argument("--bound-mib", type=float, default=1.0)
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    nbytes = args.mb * 1_000_000
    bound = int(args.bound_mib * (1 << 20))
    cmd = f"yes {'0123456789abcdef' * 4} | head -c {nbytes}"
    keeper_cpu = [0.0]
    stored: list[int] = []
    with tempfile.TemporaryDirectory(prefix="bench-bound-") as tmp:
        home = HomeLayout(Path(tmp) / "home").ensure()
        base = Settings()

        def registry(b: int) -> ProcessRegistry:
            return ProcessRegistry(home, replace(base, processes=replace(base.processes, max_output_bytes=b)))

        bounded, unbounded = registry(bound), registry(0)

        def run(reg: ProcessRegistry, measure_keeper: bool) -> float:
            start = time.perf_counter()
            s = reg.spawn(cmd)
            pid = keeper_pid(reg.root) if measure_keeper else None
            cpu0 = _cpu(pid)
            reg.wait(s.id)
            took = time.perf_counter() - start
            if measure_keeper:
                settle = time.monotonic() + 5  # the keeper's last cut after the exit (untimed)
                while stored_bytes(os.stat(s.output_path)) > 2.5 * bound and time.monotonic() < settle:
                    time.sleep(0.05)
                keeper_cpu[0] += max(0.0, _cpu(pid) - cpu0)
                stored.append(stored_bytes(os.stat(s.output_path)))
            reg.remove(s.id)
            return took

        table = Table(f"Output bound: {args.mb} MB written by one session, bound {args.bound_mib:g} MiB",
                      reference_name="unbounded")
        table.add(compare("session wall time, bounded vs unbounded", lambda: run(bounded, True),
                          lambda: run(unbounded, False), args.runs, unit="s", between=sync_disks,
                          aim="no more than a few percent"))
        table.print()
        print(f"  keeper CPU over the {args.runs + 1} bounded rounds: {keeper_cpu[0]:.3f} s; "
              f"stored after each: {', '.join(f'{b / (1 << 20):.2f} MiB' for b in stored)} (apparent "
              f"{nbytes / (1 << 20):.0f} MiB)")


def _cpu(pid: int | None) -> float:
    if pid is None:
        return 0.0
    raw = identity.stat_bytes(pid)
    if raw is None:
        return 0.0
    fields = raw[raw.rfind(b")") + 1:].split()  # field N is fields[N - 3]: utime 14, stime 15
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


if __name__ == "__main__":
    main()
