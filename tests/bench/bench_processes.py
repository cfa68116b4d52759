"""Processes benchmark: ours against the plain tools, measured in the same run.

    python tests/bench/bench_processes.py [--mb 200] [--spawns 50] [--sessions 300] [--runs N] [--only a|b|c]

(a) Output: a finished session's 200 MB output file, read to the end by the byte-offset
    follower (bytes only; then the view's path: every byte read, only the newest part it
    draws decoded; and, for comparison, every byte decoded) against ``cat FILE >/dev/null``. Both warm (the file was just written and
    read once untimed); rounds alternate which goes first.
(b) Spawn+wait: N ``true`` through the registry (wrapper, output file, metadata, exit
    record) against ``subprocess.run(["true"])`` N times, interleaved round by round;
    the figure is per process. ``true`` is a builtin of the wrapper's shell; a second
    row runs ``/bin/true``, which the wrapper has to fork and exec like any command.
(c) ``hermes-tui ps --json`` (and ``ps --all --json``) on a home with 300 sessions that
    finished an hour ago (their exit records aged), the whole CLI process (interpreter
    start included), against ``python -c pass`` and against ``ls`` of the sessions folder.
    The index of finished sessions is built by the untimed warm-up round.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from harness import Table, compare, run_process, timed, user_env  # noqa: E402

from engine.config import ProcessSettings, Settings  # noqa: E402
from engine.home import HomeLayout  # noqa: E402
from engine.processes import ProcessRegistry  # noqa: E402
from engine.processes.follower import OutputFollower  # noqa: E402
from engine.processes.redact import maybe_redact  # noqa: E402

MB = 1024 * 1024
# Mostly ASCII, like real build and test output, with a few multi-byte characters.
LINE = "2026-11-29 19:00:01 INFO worker 7: processed batch 0123456789 (ok) é"


def _registry(root: Path) -> ProcessRegistry:
    home = HomeLayout(root).ensure()
    return ProcessRegistry(home, replace(Settings(), processes=ProcessSettings(max_finished=10_000)))


def write_output(reg: ProcessRegistry, size: int) -> Path:
    """A real session that wrote ``size`` bytes; returns its output file."""
    s = reg.spawn(f"yes '{LINE}' | head -c {size}")
    reg.wait(s.id)
    path = s.output_path
    assert path.stat().st_size == size, (path.stat().st_size, size)
    return path


def follow_bytes(path: Path, size: int) -> float:
    def go() -> None:
        with OutputFollower(path) as f:
            while f.read().data:
                pass
            assert f.bytes_read == size

    return timed(go)


def follow_decoded(path: Path, size: int) -> float:
    """Every byte read and decoded as UTF-8 (what the output view turns into lines)."""
    def go() -> None:
        with OutputFollower(path) as f:
            while f.read().text:
                pass
            assert f.bytes_read == size

    return timed(go)


def follow_shown(path: Path, size: int) -> float:
    """What the output view pays: every byte read, only the newest DRAW_BYTES_PER_FLUSH
    of each flush decoded (a flush here takes everything new at once)."""
    from widgets.processes.output_view import DRAW_BYTES_PER_FLUSH

    def go() -> None:
        with OutputFollower(path) as f:
            shown = f.read_newest(DRAW_BYTES_PER_FLUSH)
            assert f.bytes_read == size and shown.text and shown.skipped + len(shown.text.encode()) == size

    return timed(go)


def redact_one_mb(text: str) -> float:
    return timed(lambda: maybe_redact(text, True))


def bench_output(table: Table, root: Path, mb: int, runs: int) -> None:
    size = mb * MB
    path = write_output(_registry(root / "output-home"), size)

    def cat() -> float:
        return run_process(["cat", str(path)])

    table.add(compare(f"(a) follower read_bytes of {mb} MB vs cat", lambda: follow_bytes(path, size), cat, runs,
                      unit="ms", aim="<= 2.0x (>= 0.5x cat's rate)"))
    table.add(compare(f"(a) follower read + decode what the view draws, {mb} MB vs cat",
                      lambda: follow_shown(path, size), cat, runs, unit="ms", aim="<= 2.0x (>= 0.5x cat's rate)"))
    table.add(compare(f"(a) follower read + UTF-8 decode of every byte, {mb} MB vs cat",
                      lambda: follow_decoded(path, size), cat, runs, unit="ms",
                      note="not what the view does (it decodes only what it draws); kept for comparison"))
    if Settings().processes.redact:  # the view redacts what it draws by default
        with open(path, encoding="utf-8") as fh:
            text = fh.read(MB)
        table.add(compare("(a) redact 1 MB of that output (on by default; ours only)", lambda: redact_one_mb(text),
                          None, runs, unit="ms", note="no plain tool does this; the view redacts only what it draws"))


def bench_spawn(table: Table, root: Path, n: int, runs: int) -> None:
    reg = _registry(root / "spawn-home")

    def row(argv: list[str], note: str = "") -> None:
        def ours() -> float:
            def go() -> None:
                for _ in range(n):
                    s = reg.spawn(argv)
                    assert reg.wait(s.id).exit_code == 0
            return timed(go) / n

        def plain() -> float:
            def go() -> None:
                for _ in range(n):
                    subprocess.run(argv, check=True)
            return timed(go) / n

        table.add(compare(f"(b) spawn+wait `{' '.join(argv)}` (per process, {n} per round) vs subprocess.run", ours,
                          plain, runs, unit="ms", aim="<= 3.0x", note=note))

    row(["true"], note="the wrapper (sh) runs `true` as its builtin: one process, like the reference")
    row(["/bin/true"], note="a path is not a builtin: the wrapper forks and execs it, two processes to the reference's one")


def bench_ps(table: Table, root: Path, sessions: int, runs: int) -> None:
    reg = _registry(root / "ps-home")
    ids = [reg.wait(reg.spawn(["true"]).id).id for _ in range(sessions)]
    # Finished a while ago, like the sessions a real home accumulates: settled (a session
    # that ended in the last 10 s may still get its kill record, so it is not indexed yet).
    long_ago = time.time() - 3600
    for sid in ids:
        os.utime(reg.session_dir(sid) / "exit", (long_ago, long_ago))
    assert len(reg.list(include_finished=True)) == sessions
    cli = str(Path(sys.executable).with_name("hermes-tui"))
    home = str(root / "ps-home")

    def ps(*flags: str):
        return lambda: run_process([cli, "--home", home, "ps", *flags], env=user_env())

    def python_pass() -> float:
        return run_process([sys.executable, "-c", "pass"])

    def ls() -> float:
        return run_process(["ls", str(reg.root)])

    table.add(compare(f"(c) ps --json, {sessions} finished sessions vs python -c pass", ps("--json"), python_pass,
                      runs, unit="ms", aim="<= 3.0x"))
    table.add(compare(f"(c) ps --all --json, {sessions} finished vs python -c pass", ps("--all", "--json"),
                      python_pass, runs, unit="ms", aim="<= 3.0x"))
    table.add(compare(f"(c) ps --json, {sessions} finished sessions vs ls of the sessions folder", ps("--json"), ls,
                      runs, unit="ms"))


def redaction_inputs(mb: int) -> dict[str, str]:
    """Ordinary log text and the pathological single lines that used to make masking
    backtrack (one line without a newline each)."""
    import base64

    size = mb * MB
    log_line = "12:00:01 INFO GET /api/items?page=2 200 user=bob token_count=12 in 3.1ms\n"
    return {
        "ordinary log text": (log_line * (size // len(log_line) + 1))[:size],
        "'password-' repeated, one line": ("password-" * (size // 9 + 1))[:size],
        "base64url, one line": base64.urlsafe_b64encode(os.urandom(size)).decode()[:size],
        "'eyJ-' repeated, one line": ("eyJ-" * (size // 4 + 1))[:size],
    }


def bench_redaction(table: Table, mb: int, runs: int) -> None:
    """(d) Masking cost per input kind; no plain tool masks secrets, so ours only. The
    note gives the throughput of the median run."""
    for name, text in redaction_inputs(mb).items():
        row = table.add(compare(f"(d) redact {mb} MB: {name}", lambda t=text: timed(lambda: maybe_redact(t, True)),
                                None, runs, unit="ms", note="ours only"))
        table.rows[-1] = replace(row, note=f"ours only; {mb / row.ours.median:.1f} MB/s at the median")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=int, default=200)
    ap.add_argument("--spawns", type=int, default=50, help="processes per round for (b)")
    ap.add_argument("--sessions", type=int, default=300)
    ap.add_argument("--runs", type=int, default=7, help="interleaved rounds per row")
    ap.add_argument("--only", choices=("a", "b", "c", "d"), action="append", help="run only these parts")
    args = ap.parse_args()
    parts = set(args.only or ("a", "b", "c", "d"))
    table = Table("Processes: hermes-tui vs the plain tools", "plain tool")
    with tempfile.TemporaryDirectory(prefix="hermes-bench-proc-") as tmp:
        root = Path(tmp)
        if "a" in parts:
            bench_output(table, root, args.mb, args.runs)
        if "b" in parts:
            bench_spawn(table, root, args.spawns, args.runs)
        if "c" in parts:
            bench_ps(table, root, args.sessions, args.runs)
        if "d" in parts:
            bench_redaction(table, 4, args.runs)
    table.print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
