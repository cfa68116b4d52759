"""Scratch benchmarks (run on demand: ``python tests/bench/bench_scratch.py``).

(a) The state of every entry: 200 entries / ~200k files, 10% active with their only
    recent file deep inside. Side by side: our scan (entries split across
    processes), the same walk in one process, a plain ``os.scandir`` walk, one
    ``find SCRATCH -newermt @CUTOFF`` over the whole tree, and ``du -s SCRATCH``
    (the floor: one lstat per inode, in C).
(b) An active entry of 100k files whose recent file is near the top: the early
    stop against a full walk of the same entry (target: under 1%).
(c) Pruning 50 idle entries of 100k files in all against ``rm -rf`` of identical
    trees (target: within 1.5x).

Usage: ``python tests/bench/bench_scratch.py [abc]``. The (a) tree is built once under /tmp and reused by later runs; (b) and (c) trees
are built per run and removed. Times are the best of several runs, warm cache.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from engine.home import HomeLayout  # noqa: E402
from engine.scratch.activity import scan_activity, scan_many  # noqa: E402
from engine.scratch.execute import execute_plan  # noqa: E402
from engine.scratch.plan import plan_prune  # noqa: E402
from engine.scratch.target import PruneOptions, PruneTarget  # noqa: E402

BASE = Path("/tmp/hermes-bench-scratch")
TREE_A = BASE / "a-200x1000"
HOUR = 3600.0
OLD = time.time() - 48 * HOUR


def _write_entry(entry: Path, n_files: int, fanout: tuple[int, int] = (10, 4)) -> list[Path]:
    """n_files files under entry/aX/bY/c/ (depth 4), all aged; returns the file paths."""
    files = []
    per_leaf = max(1, n_files // (fanout[0] * fanout[1]))
    for a in range(fanout[0]):
        for b in range(fanout[1]):
            d = entry / f"a{a}" / f"b{b}" / "c"
            d.mkdir(parents=True, exist_ok=True)
            for f in range(per_leaf):
                p = d / f"f{f}.txt"
                with open(p, "w") as fh:
                    fh.write("x" * 100)
                os.utime(p, (OLD, OLD))
                files.append(p)
    for dirpath, _dirs, _files in os.walk(entry, topdown=False):
        os.utime(dirpath, (OLD, OLD))
    return files


def build_tree_a() -> None:
    stamp = TREE_A / ".built"
    if stamp.exists():
        return
    shutil.rmtree(TREE_A, ignore_errors=True)
    TREE_A.mkdir(parents=True)
    for e in range(200):
        entry = TREE_A / f"entry{e:03d}"
        files = _write_entry(entry, 1000)
        if e % 10 == 0:  # 10% active: the only recent write is the last file, deepest
            os.utime(files[-1], None)
    stamp.write_text("")


def best(fn, runs: int = 3) -> float:
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def scandir_walk(path: str, cutoff: float) -> bool:
    stack = [path]
    while stack:
        d = stack.pop()
        with os.scandir(d) as it:
            for e in it:
                s = e.stat(follow_symlinks=False)
                if e.is_dir(follow_symlinks=False):
                    stack.append(e.path)
                if s.st_mtime >= cutoff:
                    return True
    return False


def bench_a() -> list[tuple[str, float]]:
    build_tree_a()
    paths = sorted(str(p) for p in TREE_A.iterdir() if p.name != ".built")
    cutoff = time.time() - 24 * HOUR
    states = scan_many(paths, cutoff)
    assert sum(a.touched for a in states) == 20 and sum(a.idle for a in states) == 180, "tree is wrong"
    for _ in range(2):  # warm the cache
        subprocess.run(["du", "-s", str(TREE_A)], stdout=subprocess.DEVNULL, check=True)
    rows = [
        ("scan_many (entries split across processes)", best(lambda: scan_many(paths, cutoff))),
        ("scan_activity, one process", best(lambda: [scan_activity(p, cutoff) for p in paths])),
        ("plain os.scandir walk, one process", best(lambda: [scandir_walk(p, cutoff) for p in paths])),
        (f"find SCRATCH -newermt @{int(cutoff)}", best(lambda: subprocess.run(
            ["find", str(TREE_A), "-newermt", f"@{cutoff}"], stdout=subprocess.DEVNULL, check=True))),
        ("du -s SCRATCH", best(lambda: subprocess.run(["du", "-s", str(TREE_A)], stdout=subprocess.DEVNULL,
                                                       check=True))),
    ]
    return rows


def bench_b() -> list[tuple[str, float]]:
    entry = BASE / "b-active-100k"
    shutil.rmtree(entry, ignore_errors=True)
    _write_entry(entry, 100_000, fanout=(25, 40))
    top = entry / "RECENT.txt"
    top.write_text("fresh")  # near the top; its directory's mtime moves too, as a real write would
    cutoff = time.time() - 24 * HOUR
    assert scan_activity(entry, cutoff).touched
    early = best(lambda: scan_activity(entry, cutoff), runs=20)
    full = best(lambda: scan_activity(entry, time.time() + 10 * HOUR), runs=3)  # nothing recent: full walk
    shutil.rmtree(entry)
    return [("active entry, recent file near the top", early), ("full walk of the same entry", full)]


def bench_c() -> list[tuple[str, float]]:
    runs = []
    for _ in range(2):
        home = HomeLayout(BASE / "c-home").ensure()
        scratch = home.ensure_dir(home.scratch_dir)
        rm_root = BASE / "c-rm"
        shutil.rmtree(rm_root, ignore_errors=True)
        for i in range(50):
            _write_entry(scratch / f"idle{i:02d}", 2000)
            _write_entry(rm_root / f"idle{i:02d}", 2000)
        (home.cache_dir / ".scratch-prune.lock").touch()
        target = PruneTarget.of(home)
        options = PruneOptions(quarantine_hours=0.0)
        subprocess.run(["du", "-s", str(BASE)], stdout=subprocess.DEVNULL, check=True)
        t = time.perf_counter()
        plan = plan_prune(target, options)
        t_plan = time.perf_counter() - t
        t = time.perf_counter()
        result = execute_plan(target, plan, options)
        t_exec = time.perf_counter() - t
        assert result.removed_count == 50, result
        t = time.perf_counter()
        subprocess.run(["rm", "-rf", *[str(p) for p in sorted(rm_root.iterdir())]], check=True)
        t_rm = time.perf_counter() - t
        runs.append((t_plan, t_exec, t_rm))
        shutil.rmtree(home.root)
        shutil.rmtree(rm_root)
    t_plan, t_exec, t_rm = min(runs, key=lambda r: r[1])
    return [("plan (survey: full walk of every idle entry)", t_plan),
            ("execute (re-check walk + delete + lstat confirm)", t_exec),
            ("plan + execute", t_plan + t_exec),
            ("rm -rf of identical trees", t_rm)]


def table(title: str, rows: list[tuple[str, float]], ref: float) -> None:
    print(f"\n{title}")
    width = max(len(r[0]) for r in rows)
    for name, secs in rows:
        print(f"  {name:<{width}}  {secs * 1000:9.1f} ms  {secs / ref:6.2f}x")


def main(which: str = "abc") -> None:
    BASE.mkdir(parents=True, exist_ok=True)
    if "a" in which:
        a = bench_a()
        table("(a) state of 200 entries / ~200k files (x = relative to find)", a, a[3][1])
    if "b" in which:
        b = bench_b()
        table("(b) early stop on an active 100k-file entry (x = relative to the full walk)", b, b[1][1])
        print(f"  early stop costs {100 * b[0][1] / b[1][1]:.3f}% of the full walk (target < 1%)")
    if "c" in which:
        c = bench_c()
        table("(c) prune 50 idle entries / 100k files (x = relative to rm -rf)", c, c[3][1])
    print(f"\nThe (a) tree stays in {TREE_A} for the next run; remove it with: rm -rf {BASE}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "abc")  # e.g. "a" or "bc": only those
