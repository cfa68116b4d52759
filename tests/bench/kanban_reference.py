"""Driver for the hermes-agent reference board, run by bench_kanban.py inside the
reference's own virtual environment (so nothing of hermes-tui is importable here).

It reads one JSON request per line on stdin and answers one JSON line on stdout, so a
single interpreter serves every round (its start-up is not part of any in-process
figure, as ours is not). Opening a connection is never timed, as on our side.

Requests:
  {"op": "create", "db": PATH, "n": N}            N cards, one create_task (one durable
                                                   write transaction) each -> {"seconds"}
  {"op": "build", "db": PATH, "shape": {...}}     the benchmark board (setup, untimed)
  {"op": "tick", "db": PATH, "home": DIR, "limit": N}
                                                   one dispatch_once with a spawner that
                                                   starts nothing -> {"seconds", "spawned"}
"""

from __future__ import annotations

import json
import os
import sys
import time


def _use(db: str, home: str) -> None:
    """Point the reference at this board file and kanban root (it resolves both from
    the environment on every call)."""
    os.environ["HERMES_KANBAN_DB"] = db
    os.environ["HERMES_KANBAN_HOME"] = home


def create(kb, db: str, home: str, n: int) -> dict:
    _use(db, home)
    conn = kb.connect()
    try:
        start = time.perf_counter()
        for i in range(n):
            kb.create_task(conn, title=f"single {i}", assignee="coder")
        return {"seconds": time.perf_counter() - start}
    finally:
        conn.close()


def build(kb, db: str, home: str, shape: dict) -> dict:
    """The same board as ours: cards made by the reference's own create_task, then moved
    into the shape's statuses with plain SQL (setup only, so durability is relaxed)."""
    _use(db, home)
    conn = kb.connect()
    try:
        conn.execute("PRAGMA synchronous = OFF")
        profiles = ("coder", "writer")
        ids = [kb.create_task(conn, title=f"card {i}", body="benchmark card " * 4, assignee=profiles[i % 2],
                              priority=i % 5) for i in range(shape["total"])]
        groups = _split(ids, shape)
        now = int(time.time())
        with conn:
            conn.execute("BEGIN")
            conn.executemany("UPDATE tasks SET status = 'done', completed_at = ? WHERE id = ?",
                             [(now, i) for i in groups["done"]])
            for status in ("archived", "review", "todo"):
                conn.executemany(f"UPDATE tasks SET status = '{status}' WHERE id = ?", [(i,) for i in groups[status]])
            conn.executemany("UPDATE tasks SET status = 'blocked', consecutive_failures = 2 WHERE id = ?",
                             [(i,) for i in groups["blocked"]])
            ready = groups["ready"]
            conn.executemany("INSERT INTO task_links (parent_id, child_id) VALUES (?, ?)",
                             [(ready[n % len(ready)], i) for n, i in enumerate(groups["todo"])])
            conn.executemany(
                "INSERT INTO task_runs (task_id, profile, status, claim_lock, started_at, ended_at, outcome) "
                "VALUES (?, 'coder', 'done', 'bench:1', ?, ?, 'completed')",
                [(i, now - 60, now) for i in groups["done"]])
        counts = dict(conn.execute("SELECT status, count(*) FROM tasks GROUP BY status").fetchall())
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        return {"counts": counts}
    finally:
        conn.close()


def _split(ids: list[str], shape: dict) -> dict[str, list[str]]:
    out, at = {}, 0
    for status, count in shape["groups"]:
        out[status] = ids[at:at + count]
        at += count
    return out


def tick(kb, db: str, home: str, limit: int) -> dict:
    _use(db, home)
    conn = kb.connect()
    try:
        start = time.perf_counter()
        result = kb.dispatch_once(conn, spawn_fn=lambda task, workspace: None, max_in_progress=limit)
        seconds = time.perf_counter() - start
        return {"seconds": seconds, "spawned": len(result.spawned)}
    finally:
        conn.close()


def main() -> int:
    from hermes_cli import kanban_db as kb

    for line in sys.stdin:
        req = json.loads(line)
        op = req["op"]
        if op == "create":
            answer = create(kb, req["db"], req["home"], req["n"])
        elif op == "build":
            answer = build(kb, req["db"], req["home"], req["shape"])
        elif op == "tick":
            answer = tick(kb, req["db"], req["home"], req["limit"])
        else:
            answer = {"error": f"unknown op {op!r}"}
        print(json.dumps(answer), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
