"""A dispatch tick on a PostgreSQL board in few round trips.

On a file board a statement answers in microseconds; on a server each one is a round
trip over the network, two on a new connection (asyncpg prepares a statement before it
runs it the first time). A tick that claims cards made 20 statements (35 round trips on
a new connection): at 1 ms to the server, 35 ms of waiting, more than the SQLite board's
whole tick. Here the tick's steps are each one statement, so such a tick makes 5 (the
dispatch lock, the first look, the claim, the record of the launches, the unlock):

- **the first look** (:func:`first_look_sql`): the dispatcher's reads (is a worker to look
  after, which todo cards may be promoted, the ready cards in dispatch order, the runs
  still launching) and this host's lease renewal with the hosts whose lease ran out;
- **the claim** (:data:`CLAIM`): the compare-and-set of the chosen cards, their runs
  (``launching``, with their launch tokens) and the runs' events, in one statement, so
  in one transaction of its own (or inside the caller's, when profile caps are counted
  under their locks first); the claimed cards' titles and bodies come back with it;
- **the record** (:data:`RECORD`): each launched worker written on its run and card,
  its ``spawned`` event, and the runs that ended meanwhile (their workers are stopped).

What keeps these exactly as safe as the statement-by-statement tick:

- a statement is atomic: all of it commits or none (a dispatcher killed mid-tick leaves
  what it left before: claims with ``launching`` runs, resolved by the next tick);
- the compare-and-set is the same: only a card still ready and unclaimed is taken, rows
  another host is claiming are skipped (``FOR UPDATE SKIP LOCKED``), and PostgreSQL
  checks a row again once it has it locked;
- every order that matters is an explicit ``ORDER BY``: the aggregated reads
  (``json_agg(... ORDER BY ...)``, ``array_agg(... ORDER BY ...)``) and the events'
  inserts (``INSERT ... SELECT ... ORDER BY``: the insert draws each new id as it takes
  the sorted rows, as the statement-by-statement tick's multi-row ``VALUES`` insert draws
  them in its list's order). Nothing relies on the order rows happen to come back in;
- rows come back as json with every digit of a float (the board's connection sets
  ``extra_float_digits``), so a time read here is the time a plain read gives;
- a card's run id is drawn from the runs' sequence by the claim itself
  (``current_run_id = nextval(...)``), so the card and its run are written by one
  statement and a run id is still never handed out twice (it is the worker's fencing
  token). The claim never writes a row twice: the card once, its run once.

Each statement's text is the same whatever the number of cards (the cards go in as
arrays), so a long-lived connection prepares each once.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from engine.kanban.backends.postgres.errors import HostIdInUse
from engine.kanban.models import dump_payload

# The tick's reads as (columns, source, order) where the dispatcher's SQL is
# ``SELECT columns FROM source ORDER BY order``; each aggregated here in that order.
Ordered = tuple[str, str, str]

# Only types asyncpg knows without asking the server cross the wire here: scalars, text
# arrays and json. Another array type (bigint[], boolean[], record[]) makes asyncpg look
# it up on each new connection: two more round trips and, on a server with JIT, 12-17 ms.
# So arrays go in as text[] (cast in the statement) and rows come back as json.


def _rows_as_json(read: Ordered) -> str:
    columns, source, order = read
    return f"(SELECT json_agg(json_build_array({columns}) ORDER BY {order}) FROM {source})"


# This host's lease renewed, as a data-changing WITH named ``renewed``: inserted, or
# updated when the row is this boot's or its lease has run out. A live lease of the same
# host id held by another boot is left as it is (another machine uses this id: renewed
# is then empty, and the caller refuses to act). Parameters: host, boot, expiry, now.
RENEW = ("WITH renewed AS (INSERT INTO hosts (host_id, boot_id, lease_expires, renewed_at) VALUES (?, ?, ?, ?) "
         "ON CONFLICT (host_id) DO UPDATE SET boot_id = excluded.boot_id, "
         "lease_expires = excluded.lease_expires, renewed_at = excluded.renewed_at "
         "WHERE hosts.boot_id = excluded.boot_id OR hosts.lease_expires < excluded.renewed_at RETURNING host_id), "
         # An outage (nobody renewed for longer than the gap): the leases live when it
         # began are given a grace until one full lease after now (OUTAGE_GRACE).
         "outage AS (INSERT INTO hermes_kanban_meta (key, value) SELECT x.k, x.v "
         "FROM (SELECT max(renewed_at) AS last FROM hosts) p, LATERAL (VALUES ('unreachable_from', p.last::text), "
         "('outage_grace_until', (?::float8)::text)) AS x(k, v) WHERE p.last < ? "
         "ON CONFLICT (key) DO UPDATE SET value = excluded.value RETURNING key) ")
# Of a hosts row ``h`` at time ? (given twice): its lease lives, or the grace of the last
# outage covers it (it was live when nobody could reach the board any more).
LEASE_LIVE = ("(h.lease_expires >= ? OR (h.lease_expires > COALESCE((SELECT value::float8 FROM hermes_kanban_meta "
              "WHERE key = 'unreachable_from'), 'Infinity') AND ? <= COALESCE((SELECT value::float8 FROM "
              "hermes_kanban_meta WHERE key = 'outage_grace_until'), '-Infinity')))")
# The other hosts whose lease ran out, by id (a text array), judged against the time the
# board was reachable: not lost while LEASE_LIVE holds, nor when this very statement
# finds an outage that began while their lease lived. Parameters: now, now (LEASE_LIVE),
# now minus the gap, host.
LOST = ("(SELECT array_agg(h.host_id ORDER BY h.host_id) FROM hosts h WHERE NOT " + LEASE_LIVE +
        " AND NOT ((SELECT max(renewed_at) FROM hosts) < ? AND h.lease_expires > (SELECT max(renewed_at) FROM hosts)) "
        "AND h.host_id <> ?)")


def renew_params(host: str, boot: str, now: float, lease_seconds: float) -> tuple:
    """:data:`RENEW`'s parameters, then :data:`LOST`'s. An outage is a gap of more than
    half a lease in which no host renewed."""
    gap_from = now - lease_seconds / 2
    return (host, boot, now + lease_seconds, now, now + lease_seconds, gap_from, now, now, gap_from, host)
# Whether it was renewed, and the lease as it was before (json [boot, expiry], or
# null). Parameters: host.
RENEWAL = ("(SELECT count(*) FROM renewed), "
           "(SELECT json_build_array(boot_id, lease_expires) FROM hosts WHERE host_id = ?)")


def first_look_sql(live: str, promotable: str, ready: Ordered, launching: Ordered) -> str:
    """One statement: this host's lease renewed (:data:`RENEW`), then (in one snapshot,
    which does not see the renewal) ``live``'s answer, the ids ``promotable`` gives (one
    column named id; a text array, by id), the rows of ``ready`` and of ``launching``
    (each json, in its order), the other hosts whose lease ran out (:data:`LOST`), and
    :data:`RENEWAL`. Parameters: :func:`renew_params`; host."""
    return (
        RENEW + f"SELECT ({live}), (SELECT array_agg(q.id ORDER BY q.id) FROM ({promotable}) q), "
        f"{_rows_as_json(ready)}, {_rows_as_json(launching)}, "
        + LOST + ", " + RENEWAL
    )


def refuse_unless_renewed(renewed: int, held: str | None, host_id: str, boot: str, now: float) -> None:
    """Raise :class:`HostIdInUse` when :data:`RENEW` left the lease to another boot."""
    if renewed:
        return
    holder_boot, expires = json.loads(held) if held is not None else ("?", now)
    raise HostIdInUse(host_id, boot, str(holder_boot), float(expires) - now)


def json_rows(text: str | None) -> list[tuple]:
    """Rows aggregated as json arrays, as tuples; None (an aggregate of no rows) is none."""
    return [tuple(row) for row in json.loads(text)] if text is not None else []


def _texts(values: Sequence[object]) -> list[str | None]:
    return [None if v is None else str(v) for v in values]


# The claim. Parameters: the cards' ids, profiles, launch tokens (text arrays, in
# dispatch order); running, the default assignee, the claim lock, its expiry, now; the
# cards' ids again, ready; the run's status while it launches, the lock, expiry, now;
# now; then the events' card ids, kinds, payloads and whether each names the card's new
# run ('true'/'false'), text arrays in the order the events are written.
CLAIM = (
    "WITH wanted AS (SELECT * FROM unnest(?::text[], ?::text[], ?::text[]) AS x(id, profile, token)), "
    "claimed AS (UPDATE tasks t SET status = ?, assignee = COALESCE(t.assignee, ?), claim_lock = ?, "
    "claim_expires = ?, started_at = COALESCE(t.started_at, ?), last_heartbeat_at = NULL, "
    "current_run_id = nextval(pg_get_serial_sequence('task_runs', 'id')) "
    "WHERE t.id IN (SELECT id FROM tasks WHERE id = ANY(?::text[]) AND status = ? "
    "AND claim_lock IS NULL ORDER BY id FOR UPDATE SKIP LOCKED) "
    "RETURNING t.id, t.current_run_id, t.title, t.body), "
    "runs AS (INSERT INTO task_runs (id, task_id, profile, status, claim_lock, claim_expires, started_at, process_id) "
    "SELECT c.current_run_id, c.id, w.profile, ?::text, ?::text, ?::float8, ?::float8, w.token "
    "FROM claimed c JOIN wanted w ON w.id = c.id), "
    "noted AS (INSERT INTO task_events (task_id, run_id, kind, payload, created_at) "
    "SELECT e.task_id, CASE WHEN e.of_run::boolean THEN c.current_run_id END, e.kind, e.payload, ?::float8 "
    "FROM unnest(?::text[], ?::text[], ?::text[], ?::text[]) WITH ORDINALITY AS e(task_id, kind, payload, of_run, n) "
    "JOIN claimed c ON c.id = e.task_id ORDER BY e.n) "
    "SELECT id, current_run_id, title, body FROM claimed ORDER BY id"
)


def claim_params(cards: Sequence[tuple[str, str, str]], events: Sequence[tuple[str, str, dict | None, bool]], *,
                 running: str, ready: str, launching: str, default: str | None, lock: str, expires: float,
                 now: float) -> tuple:
    """:data:`CLAIM`'s parameters: ``cards`` (id, profile, launch token) in dispatch
    order; ``events`` (card id, kind, payload, whether it names the new run) in the order
    they are written, each only if its card is won."""
    ids = _texts([c[0] for c in cards])
    return (ids, _texts([c[1] for c in cards]), _texts([c[2] for c in cards]),
            running, default, lock, expires, now, ids, ready, launching, lock, expires, now, now,
            _texts([e[0] for e in events]), _texts([e[1] for e in events]), [dump_payload(e[2]) for e in events],
            ["true" if e[3] else "false" for e in events])


# The record of launched workers. Parameters: run ids, card ids, pids, fingerprints,
# session ids, output paths, the spawned events' payloads (text arrays, one item per
# worker, in the order their events are written); launching, running (a run still
# launching becomes running); the run ids; the card ids; the event kind, now; the
# outcomes a worker gives its own run (three); the run ids; the three outcomes again.
# (Each update names its rows by ``= ANY(ids)`` too: found by their primary key, not by
# a scan of the table to join.)
RECORD = (
    "WITH w AS (SELECT x.run_id::bigint AS run_id, x.task_id, x.pid::bigint AS pid, x.fp, x.session_id, "
    "x.output_path, x.payload, x.n FROM unnest(?::text[], ?::text[], ?::text[], ?::text[], ?::text[], ?::text[], "
    "?::text[]) WITH ORDINALITY AS x(run_id, task_id, pid, fp, session_id, output_path, payload, n)), "
    "runs AS (UPDATE task_runs r SET status = CASE WHEN r.status = ? THEN ? ELSE r.status END, "
    "worker_pid = w.pid, worker_started_at = w.fp, process_id = w.session_id, output_path = w.output_path "
    "FROM w WHERE r.id = ANY(?::text[]::bigint[]) AND r.id = w.run_id AND r.worker_pid IS NULL "
    "RETURNING r.id, r.task_id, r.outcome, r.worker_pid, r.worker_started_at, r.claim_lock, r.ended_at), "
    "cards AS (UPDATE tasks t SET worker_pid = w.pid, worker_started_at = w.fp FROM w "
    "WHERE t.id = ANY(?::text[]) AND t.id = w.task_id AND t.current_run_id = w.run_id), "
    "noted AS (INSERT INTO task_events (task_id, run_id, kind, payload, created_at) "
    "SELECT w.task_id, w.run_id, ?::text, w.payload, ?::float8 FROM w ORDER BY w.n) "
    "SELECT id, task_id, outcome, worker_pid, worker_started_at, claim_lock FROM runs "
    "WHERE ended_at IS NOT NULL AND outcome NOT IN (?, ?, ?) "
    "UNION ALL SELECT id, task_id, outcome, worker_pid, worker_started_at, claim_lock FROM task_runs "
    "WHERE id = ANY(?::text[]::bigint[]) AND id NOT IN (SELECT id FROM runs) AND ended_at IS NOT NULL "
    "AND outcome NOT IN (?, ?, ?) ORDER BY id"
)


def record_params(workers: Sequence[tuple[int, str, int | None, str, str | None, str | None, dict]], *,
                  launching: str, running: str, kind: str, now: float, own_ends: Sequence[str]) -> tuple:
    """:data:`RECORD`'s parameters: ``workers`` (run id, card id, pid, fingerprint,
    session id, output path, the spawned event's payload), in the order their events
    are written; ``own_ends``: the three outcomes a worker gives its own run."""
    if len(own_ends) != 3:
        raise ValueError(f"the record takes three outcomes a worker gives its own run, not {len(own_ends)}")
    columns = [list(c) for c in zip(*workers, strict=True)] if workers else [[] for _ in range(7)]
    run_ids, task_ids = _texts(columns[0]), _texts(columns[1])
    return (run_ids, task_ids, *(_texts(c) for c in columns[2:6]), [dump_payload(p) for p in columns[6]],
            launching, running, run_ids, task_ids, kind, now, *own_ends, run_ids, *own_ends)
