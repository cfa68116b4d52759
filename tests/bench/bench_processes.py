"""Processes benchmark, side by side in one run.

    python tests/bench/bench_processes.py [--mb 200] [--spawns 200] [--sessions 300]

(a) A process writes 200 MB as fast as it can while the byte-offset follower reads it
    live: the follower must read exactly 200 MB (no re-reads). Then, on the same finished
    file (warm cache), the follower's read+decode throughput vs ``cat FILE >/dev/null``
    (aim: at least half of cat's).
(b) spawn+wait of N ``true`` through the registry (wrapper, output file, metadata,
    exit record) vs ``subprocess.run(["true"])`` x N (aim: overhead within 3x).
(c) With 300 sessions (one writing ~5 MB/s and shown in the output view): one refresh
    of the processes pane (sample in the worker thread + keyed diff on the UI thread),
    median and p95 (aim: under 10 ms median); and the Pilot key-press round trip while
    it streams.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from engine.config import ProcessSettings, Settings, UiSettings  # noqa: E402
from engine.home import HomeLayout  # noqa: E402
from engine.processes import ProcessRegistry  # noqa: E402
from engine.processes.follower import OutputFollower  # noqa: E402

MB = 1024 * 1024


def _home() -> HomeLayout:
    return HomeLayout(Path(tempfile.mkdtemp(prefix="hermes-bench-"))).ensure()


def _settings(**ui) -> Settings:
    return replace(Settings(), processes=ProcessSettings(max_finished=10_000),
                   ui=UiSettings(**ui) if ui else UiSettings())


def bench_follow(mb: int) -> list[tuple[str, str]]:
    home = _home()
    reg = ProcessRegistry(home, _settings())
    size = mb * MB
    # Mostly ASCII, like real build and test output, with some multi-byte characters.
    line = "2026-11-29 19:00:01 INFO worker 7: processed batch 0123456789 (ok) é\n"
    s = reg.spawn(f"yes '{line[:-1]}' | head -c {size}")
    follower = OutputFollower(s.output_path)
    chars = 0
    t0 = time.perf_counter()
    while True:
        chars += len(follower.read().text)
        popen = reg.popen_of(s.id)
        if popen is not None and popen.poll() is not None:
            chars += len(follower.read_all_text().text)  # drain what is left
            break
        time.sleep(0.002)
    live = time.perf_counter() - t0
    chars += len(follower.flush())
    on_disk = s.output_path.stat().st_size
    assert on_disk == size, (on_disk, size)
    exact = follower.bytes_read == size

    def follow_all(decode: bool) -> float:
        f = OutputFollower(s.output_path)
        read = f.read if decode else f.read_bytes
        t = time.perf_counter()
        while True:
            chunk = read()
            if not (chunk.text if decode else chunk.data):
                break
        elapsed = time.perf_counter() - t
        assert f.bytes_read == size
        return elapsed

    def cat() -> float:
        t = time.perf_counter()
        subprocess.run(["cat", str(s.output_path)], stdout=subprocess.DEVNULL, check=True)
        return time.perf_counter() - t

    follow_all(False), cat()  # warm the page cache for both
    b_rate = size / statistics.median([follow_all(False) for _ in range(5)]) / MB
    f_rate = size / statistics.median([follow_all(True) for _ in range(5)]) / MB
    c_rate = size / statistics.median([cat() for _ in range(5)]) / MB
    return [
        ("(a) bytes read by the live follower", f"{follower.bytes_read:,} of {size:,} "
         f"({'exact, no re-reads' if exact else 'MISMATCH'}); {live:.2f}s while writing"),
        ("(a) follower read_bytes (warm)", f"{b_rate:,.0f} MB/s (median of 5)"),
        ("(a) follower read + UTF-8 decode (warm)", f"{f_rate:,.0f} MB/s (median of 5)"),
        ("(a) cat FILE >/dev/null (warm)", f"{c_rate:,.0f} MB/s (median of 5)"),
        ("(a) follower / cat", f"{b_rate / c_rate:.2f} bytes, {f_rate / c_rate:.2f} decoded (aim >= 0.5)"),
    ]


def bench_spawn(n: int) -> list[tuple[str, str]]:
    home = _home()
    reg = ProcessRegistry(home, _settings())
    reg.wait(reg.spawn(["true"]).id)  # warm-up (creates the folders)
    subprocess.run(["true"])
    t = time.perf_counter()
    for _ in range(n):
        subprocess.run(["true"])
    base = time.perf_counter() - t
    t = time.perf_counter()
    for _ in range(n):
        s = reg.spawn(["true"])
        done = reg.wait(s.id)
        assert done.exit_code == 0
    ours = time.perf_counter() - t
    return [
        (f"(b) subprocess.run(['true']) x{n}", f"{base * 1000:.0f} ms ({base / n * 1000:.2f} ms each)"),
        (f"(b) registry spawn+wait x{n}", f"{ours * 1000:.0f} ms ({ours / n * 1000:.2f} ms each)"),
        ("(b) registry / subprocess.run", f"{ours / base:.2f}x (aim <= 3x)"),
    ]


WRITER = ("python3 -c \"import sys,time\nline=b'x'*99+b'\\n'\nchunk=line*5243\n"
          "while True:\n sys.stdout.buffer.write(chunk); sys.stdout.flush(); time.sleep(0.1)\"")


def bench_pane(n_sessions: int) -> list[tuple[str, str]]:
    from textual.app import App, ComposeResult

    from widgets.processes_pane import ProcessesPane

    home = _home()
    settings = _settings(refresh_seconds=3600)  # refreshes are driven by the benchmark
    reg = ProcessRegistry(home, settings)
    running = [reg.spawn(["sleep", "600"]) for _ in range(20)]
    finished = [reg.spawn(["true"]) for _ in range(n_sessions - 21)]
    old = time.time() - 3600  # they finished an hour ago (settled: cached, as in a real home)
    for s in finished:
        reg.wait(s.id)
        os.utime(s.dir / "exit", (old, old))
    writer = reg.spawn(WRITER)

    class Host(App):
        def compose(self) -> ComposeResult:
            yield ProcessesPane(home=home, settings=settings)

    results: dict[str, list[float]] = {"thread": [], "ui": [], "total": [], "wall": [], "keys": [],
                                       "handled": []}

    def timed_snapshot(pane):  # measured inside the worker thread: the work, not the hop
        t = time.perf_counter()
        snap = pane.take_snapshot()
        return snap, time.perf_counter() - t

    async def drive() -> None:
        app = Host()
        async with app.run_test(size=(160, 48)) as pilot:
            pane = app.query_one(ProcessesPane)
            handled_at: list[float] = []
            real_toggle = pane.action_toggle_follow

            def probe() -> None:  # when the key's action actually runs
                handled_at.append(time.perf_counter())
                real_toggle()

            pane.action_toggle_follow = probe
            await pilot.pause(0.5)
            snap = await asyncio.to_thread(pane.take_snapshot)
            pane.apply_snapshot(snap)
            pane.output.show(writer.id, writer.output_path, "writer")  # stream 5 MB/s into the view
            await pilot.pause(1.2)  # the first CPU samples become real
            for _ in range(40):
                t0 = time.perf_counter()
                snap, cost = await asyncio.to_thread(timed_snapshot, pane)
                t1 = time.perf_counter()
                pane.apply_snapshot(snap)
                t2 = time.perf_counter()
                results["thread"].append(cost)
                results["ui"].append(t2 - t1)
                results["total"].append(cost + (t2 - t1))
                results["wall"].append(t2 - t0)
                t = time.perf_counter()
                await pilot.press("f")
                results["keys"].append(time.perf_counter() - t)
                results["handled"].append(handled_at[-1] - t)
                await pilot.pause(0.05)
            assert len(pane._rows) == n_sessions, len(pane._rows)

    try:
        asyncio.run(drive())
    finally:
        for s in [*running, writer]:
            reg.kill(s.id, grace=0.5)

    def ms(xs: list[float]) -> str:
        xs = sorted(xs)
        return f"median {statistics.median(xs) * 1000:.2f} ms, p95 {xs[int(len(xs) * 0.95) - 1] * 1000:.2f} ms"

    return [
        (f"(c) refresh, {n_sessions} sessions: sample (thread)", ms(results["thread"])),
        ("(c) refresh: keyed diff (UI thread)", ms(results["ui"])),
        ("(c) refresh: total work", ms(results["total"]) + " (aim < 10 ms median)"),
        ("(c) refresh: wall, incl. thread hop", ms(results["wall"]) + " (GIL hand-offs under load)"),
        ("(c) key press -> its action runs", ms(results["handled"]) + " while 5 MB/s streams into the view"),
        ("(c) Pilot press() round trip", ms(results["keys"]) + " (includes Pilot's wait for idle)"),
    ]


def bench_redaction(mb: int = 4) -> list[tuple[str, str]]:
    """(d) Masking throughput (MB/s) on ordinary log text and on the pathological lines
    of issue 10 (one line without a newline each). Self-contained: move it as a whole."""
    import base64
    import time as _time

    from engine.processes.redact import redact

    size = mb << 20
    log_line = "12:00:01 INFO GET /api/items?page=2 200 user=bob token_count=12 in 3.1ms\n"
    inputs = {
        "ordinary log text": (log_line * (size // len(log_line) + 1))[:size],
        "'password-' repeated, one line": ("password-" * (size // 9 + 1))[:size],
        "base64url, one line": base64.urlsafe_b64encode(os.urandom(size)).decode()[:size],
        "'eyJ-' repeated, one line": ("eyJ-" * (size // 4 + 1))[:size],
    }
    rows = []
    for name, text in inputs.items():
        started = _time.perf_counter()
        redact(text)
        seconds = _time.perf_counter() - started
        rows.append((f"(d) redact {name}", f"{mb / seconds:.1f} MB/s ({mb} MB in {seconds:.2f} s)"))
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=int, default=200)
    ap.add_argument("--spawns", type=int, default=200)
    ap.add_argument("--sessions", type=int, default=300)
    ap.add_argument("--only", choices=("a", "b", "c", "d"), action="append", help="run only these parts")
    args = ap.parse_args()
    parts = set(args.only or ("a", "b", "c", "d"))
    rows = []
    if "a" in parts:
        rows += bench_follow(args.mb)
    if "b" in parts:
        rows += bench_spawn(args.spawns)
    if "c" in parts:
        rows += bench_pane(args.sessions)
    if "d" in parts:
        rows += bench_redaction()
    width = max(len(k) for k, _ in rows)
    print(f"{'measure'.ljust(width)}  result")
    print(f"{'-' * width}  {'-' * 50}")
    for k, v in rows:
        print(f"{k.ljust(width)}  {v}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
