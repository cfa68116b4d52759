"""Scratch benchmark: ours against du, find and rm, measured in the same run.

    python tests/bench/bench_scratch.py [--runs N] [--only a|b|c|d] [--prune-on disk|tmpfs|both] [--prune-dir DIR]

(a) Scan: the state and size of every entry of a scratch folder of 200 entries /
    ~200k files (10% active, their only recent file deep inside): the survey in
    process and ``hermes-tui scratch --json`` as a whole process, against
    ``du -s SCRATCH`` and ``find SCRATCH -newermt @CUTOFF``. Warm cache (the tree is
    read once untimed); rounds alternate which side goes first. The tree is built once
    under $TMPDIR/hermes-tui-bench/scratch-a and reused by later runs. The CPU row
    adds up user and system time of both sides in the same rounds (children
    included): steadier than the wall clock on a shared machine, and it shows what the
    pool's second process costs. A last row weighs the process pool: the same walks
    with the adaptive pool and in one process.
(b) Early stop: an active entry of 100k files whose recent file is near the top,
    against the full walk of the same entry (aim: under 1%).
(c) Prune with delete of 50 idle entries / 100k files against ``rm -rf`` of an
    identical tree, on the disk ($TMPDIR) and again on tmpfs (/dev/shm, when it is
    one: no I/O, so the walks weigh most there), or under each ``--prune-dir`` (its
    filesystem type is named in the row). "Ours" is what ``prune --yes`` does: plan,
    then execute that plan at once. A CPU row per place, from the same rounds, adds
    up user and system time (children included). Fair by construction: each side builds its own fresh tree, then
    ``sync`` flushes it (untimed) so no side pays the other's disk writes, and the
    rounds alternate which side goes first. The caches are not dropped (other users of
    the machine would pay for it): both sides delete a tree that is in the page cache.
(d) The automatic-prune check every CLI command makes, when no pass is due (the stamp
    is fresh): ``hermes-tui ps`` with the check against the same command with it off
    (HERMES_AUTO_PRUNE=0), whole processes; and the check itself in process.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from harness import Table, compare, loadavg, row_from, run_process, timed, user_env  # noqa: E402

from engine.config import Settings  # noqa: E402
from engine.home import HomeLayout  # noqa: E402
from engine.scratch import schedule  # noqa: E402
from engine.scratch.activity import scan_activity, scan_many  # noqa: E402
from engine.scratch.entries import survey_scratch  # noqa: E402
from engine.scratch.execute import execute_plan  # noqa: E402
from engine.scratch.plan import plan_prune  # noqa: E402
from engine.scratch.target import PruneOptions, PruneTarget  # noqa: E402

BENCH_ROOT = Path(tempfile.gettempdir()) / "hermes-tui-bench"
HOUR = 3600.0
OLD = time.time() - 48 * HOUR
CLI = str(Path(sys.executable).with_name("hermes-tui"))
# No automatic pass may prune the benchmark's own trees while they are measured.
NO_AUTO = user_env(HERMES_AUTO_PRUNE="0")


def cpu_seconds() -> float:
    """User + system CPU of this process and of its children reaped so far."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


class Meter:
    """Times the measured part of a side's round and keeps its CPU seconds too, one
    figure per round (the harness records only what the side returns: the wall time)."""

    def __init__(self) -> None:
        self.cpu: list[float] = []

    def timed(self, fn) -> float:
        cpu, start = cpu_seconds(), time.perf_counter()
        fn()
        wall = time.perf_counter() - start
        self.cpu.append(cpu_seconds() - cpu)
        return wall


def compare_with_cpu(table: Table, name: str, sides, runs: int, *, aim: str, cpu_name: str, note: str = "",
                     warmup: int = 1) -> None:
    """The wall-clock row, then a CPU row from the very same rounds. ``sides`` makes
    (ours, reference) from two Meters, which they time their measured part with."""
    meters = Meter(), Meter()
    ours, reference = sides(*meters)
    load = loadavg()
    table.add(compare(name, ours, reference, runs, aim=aim, note=note, warmup=warmup))
    table.add(row_from(cpu_name, meters[0].cpu[warmup:], meters[1].cpu[warmup:], load,
                       note="user+system CPU of each side in the rounds above, children included"))


def write_entry(entry: Path, n_files: int, fanout: tuple[int, int] = (10, 4)) -> list[Path]:
    """n_files files of 100 bytes under entry/aX/bY/c/ (depth 4), all aged 48 h."""
    files = []
    per_leaf = max(1, n_files // (fanout[0] * fanout[1]))
    payload = b"x" * 100
    for a in range(fanout[0]):
        for b in range(fanout[1]):
            d = entry / f"a{a}" / f"b{b}" / "c"
            d.mkdir(parents=True, exist_ok=True)
            for f in range(per_leaf):
                p = d / f"f{f}.txt"
                fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
                os.write(fd, payload)
                os.close(fd)
                os.utime(p, (OLD, OLD))
                files.append(p)
    for dirpath, _dirs, _files in os.walk(entry, topdown=False):
        os.utime(dirpath, (OLD, OLD))
    return files


def scan_home() -> HomeLayout:
    """The (a) home: built once, then reused (a stamp says it is complete)."""
    home = HomeLayout(BENCH_ROOT / "scratch-a").ensure()
    scratch = home.ensure_dir(home.scratch_dir)
    stamp = BENCH_ROOT / "scratch-a.built"
    if not stamp.exists():
        print("building the 200-entry / 200k-file tree (once) ...", file=sys.stderr, flush=True)
        shutil.rmtree(scratch)
        scratch.mkdir()
        for e in range(200):
            files = write_entry(scratch / f"entry{e:03d}", 1000)
            if e % 10 == 0:  # 10% active: the only recent write is the last file, deepest
                os.utime(files[-1], None)
        os.utime(scratch, (OLD, OLD))
        stamp.touch()
    # The automatic pass never runs here (NO_AUTO), but keep its stamp fresh regardless.
    PruneTarget.of(home).stamp_file.touch()
    return home


def bench_scan(table: Table, runs: int) -> None:
    home = scan_home()
    target = PruneTarget.of(home)
    scratch = str(target.scratch_dir)
    cutoff = time.time() - 24 * HOUR
    survey = survey_scratch(target, PruneOptions(arrival_hours=0.0), with_sizes=True)
    states = [e.state for e in survey.entries]
    assert len(states) == 200, len(states)

    def survey_once() -> None:
        survey_scratch(target, PruneOptions(arrival_hours=0.0), with_sizes=True)

    def cli() -> None:
        run_process([CLI, "--home", str(home.root), "scratch", "--json"], env=NO_AUTO)

    def ours_cli() -> float:
        return timed(cli)

    def du() -> float:
        return run_process(["du", "-s", scratch])

    def find() -> float:
        return run_process(["find", scratch, "-newermt", f"@{cutoff:.0f}"])

    compare_with_cpu(table, "(a) scan 200 entries / 200k files: survey in process vs du -s",
                     lambda mo, mr: (lambda: mo.timed(survey_once), lambda: mr.timed(du)), runs, aim="<= 1.2x",
                     cpu_name="(a) the same, CPU time")
    paths = [e.path for e in survey.entries]
    table.add(compare("(a) the walks alone: adaptive process pool vs one process",
                      lambda: timed(lambda: scan_many(paths, cutoff, full=True)),
                      lambda: timed(lambda: scan_many(paths, cutoff, workers=1, full=True)), runs, aim="< 1x"))
    compare_with_cpu(table, "(a) scratch --json (whole CLI) vs du -s",
                     lambda mo, mr: (lambda: mo.timed(cli), lambda: mr.timed(du)), runs, aim="<= 1.2x",
                     cpu_name="(a) the same, CPU time")
    table.add(compare("(a) scratch --json (whole CLI) vs find -newermt", ours_cli, find, runs))


def bench_early_stop(table: Table, runs: int) -> None:
    entry = Path(tempfile.mkdtemp(prefix="b-active-", dir=BENCH_ROOT)) / "entry"
    try:
        write_entry(entry, 100_000, fanout=(25, 40))
        (entry / "RECENT.txt").write_text("fresh")  # near the top; its directory's mtime moves too
        cutoff = time.time() - 24 * HOUR
        assert scan_activity(entry, cutoff).touched
        never = time.time() + 10 * HOUR  # nothing is that recent: the full walk

        table.add(compare("(b) active 100k-file entry: early stop vs full walk of it",
                          lambda: timed(lambda: scan_activity(entry, cutoff)),
                          lambda: timed(lambda: scan_activity(entry, never)), runs, unit="us", aim="<= 0.01x"))
    finally:
        shutil.rmtree(entry.parent)


def bench_prune(table: Table, runs: int, entries: int, files: int, under: Path = BENCH_ROOT) -> None:
    root = Path(tempfile.mkdtemp(prefix="c-prune-", dir=under))
    counter = iter(range(10**6))

    def build(under: Path) -> list[Path]:
        paths = []
        for i in range(entries):
            write_entry(under / f"idle{i:02d}", files // entries)
            paths.append(under / f"idle{i:02d}")
        return paths

    def ours(meter: Meter) -> float:
        home = HomeLayout(root / f"home{next(counter)}").ensure()
        scratch = home.ensure_dir(home.scratch_dir)
        build(scratch)
        target = PruneTarget.of(home)
        # delete, no quarantine; the trees were just made, so their arrival must not count
        options = PruneOptions(quarantine_hours=0.0, arrival_hours=0.0)
        os.sync()
        results = []
        elapsed = meter.timed(  # what prune --yes does: the plan, then that plan at once
            lambda: results.append(execute_plan(target, plan_prune(target, options), options, just_planned=True)))
        assert results[0].removed_count == entries, results[0]
        shutil.rmtree(home.root)
        return elapsed

    def rm(meter: Meter) -> float:
        paths = build(root / f"rm{next(counter)}")
        os.sync()
        elapsed = meter.timed(lambda: run_process(["rm", "-rf", *map(str, paths)]))
        assert not any(p.exists() for p in paths)
        paths[0].parent.rmdir()
        return elapsed

    where = f"{under} ({fs_type(under)})"
    try:
        compare_with_cpu(table, f"(c) prune with delete, {entries} idle entries / {files // 1000}k files vs rm -rf, "
                         f"{where}", lambda mo, mr: (lambda: ours(mo), lambda: rm(mr)), runs, aim="<= 1.5x", warmup=0,
                         note="fresh trees per side, sync before each side, alternating order, caches not dropped",
                         cpu_name=f"(c) the same, CPU time, {where}")
    finally:
        shutil.rmtree(root, ignore_errors=True)


def fs_type(path: Path) -> str:
    """The filesystem type of the mount ``path`` is on (the longest mount point that
    holds it), e.g. ext4 or tmpfs."""
    real, best, kind = os.path.realpath(path), "", "?"
    try:
        with open("/proc/mounts", encoding="utf-8") as fh:
            for line in fh:
                fields = line.split()
                point = fields[1].replace("\\040", " ")
                inside = real == point or real.startswith(point.rstrip("/") + "/")
                if inside and len(point) >= len(best):
                    best, kind = point, fields[2]
    except (OSError, IndexError):
        pass
    return kind


def tmpfs_root() -> Path | None:
    """/dev/shm when it is a writable tmpfs: (c) again with no I/O, where the walks'
    share of the prune is largest (the worst case for the prune against rm)."""
    shm = Path("/dev/shm")
    try:
        with open("/proc/mounts", encoding="utf-8") as fh:
            is_tmpfs = any(line.split()[1:3] == ["/dev/shm", "tmpfs"] for line in fh)
    except OSError:
        return None
    return shm if is_tmpfs and os.access(shm, os.W_OK) else None


def prune_places(prune_on: str, dirs: list[Path] | None) -> list[Path]:
    """Where (c) deletes: the given folders, else the disk and/or /dev/shm."""
    if dirs:
        for d in dirs:
            d.mkdir(parents=True, exist_ok=True)
        return dirs
    places = [BENCH_ROOT] if prune_on in ("disk", "both") else []
    if prune_on in ("tmpfs", "both"):
        tmpfs = tmpfs_root()
        if tmpfs is None:
            print("(c) on tmpfs skipped: /dev/shm is not a writable tmpfs here", file=sys.stderr)
        else:
            places.append(tmpfs)
    return places


def bench_auto_check(table: Table, runs: int) -> None:
    home = HomeLayout(Path(tempfile.mkdtemp(prefix="d-home-", dir=BENCH_ROOT))).ensure()
    target = PruneTarget.of(home)
    home.ensure_dir(target.scratch_dir)
    target.stamp_file.touch()  # a pass just ran: none is due
    settings = Settings()
    try:
        def with_check() -> float:
            target.stamp_file.touch()
            return run_process([CLI, "--home", str(home.root), "ps"], env=user_env())

        def without() -> float:
            return run_process([CLI, "--home", str(home.root), "ps"], env=NO_AUTO)

        table.add(compare("(d) `ps` with the auto-prune check (none due) vs with it off", with_check, without, runs,
                          aim="~1.00x (nothing measurable)"))

        def check_in_process() -> float:
            schedule._reset_for_tests()  # the once-per-process flag, so the check runs again
            start = time.perf_counter()
            started = schedule.maybe_start_auto_prune(home, settings)
            elapsed = time.perf_counter() - start
            assert started is None  # not due: nothing started
            return elapsed

        table.add(compare("(d) the check itself, in process (none due)", check_in_process, None, runs, unit="us"))
    finally:
        shutil.rmtree(home.root)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=7, help="interleaved rounds per row")
    ap.add_argument("--prune-runs", type=int, default=4, help="rounds for (c): each builds two 100k-file trees")
    ap.add_argument("--prune-files", type=int, default=100_000)
    ap.add_argument("--prune-on", choices=("disk", "tmpfs", "both"), default="both",
                    help="where (c) deletes: $TMPDIR, /dev/shm when it is a tmpfs, or both")
    ap.add_argument("--prune-dir", type=Path, action="append", metavar="DIR",
                    help="(c) under this folder instead (repeatable; the row names its filesystem type)")
    ap.add_argument("--only", choices=("a", "b", "c", "d"), action="append", help="run only these parts")
    args = ap.parse_args()
    parts = set(args.only or "abcd")
    BENCH_ROOT.mkdir(parents=True, exist_ok=True)
    table = Table("Scratch: hermes-tui vs du, find and rm", "plain tool")
    if "a" in parts:
        bench_scan(table, args.runs)
    if "b" in parts:
        bench_early_stop(table, args.runs)
    if "c" in parts:
        for under in prune_places(args.prune_on, args.prune_dir):
            bench_prune(table, args.prune_runs, 50, args.prune_files, under=under)
    if "d" in parts:
        bench_auto_check(table, args.runs)
    table.print()
    print(f"\nThe (a) tree stays in {BENCH_ROOT / 'scratch-a'} for the next run; "
          f"remove it with: rm -rf {BENCH_ROOT / 'scratch-a'} {BENCH_ROOT / 'scratch-a.built'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
