"""What ``doctor`` says about a PostgreSQL board: can the server be reached, is the
database our board and at which schema version, does this host hold a lease, and is
that lease this machine's (another boot holding it: two machines share the host id).

Read only: it connects, reads the meta row and the hosts table, and writes nothing (an
empty database is not set up here; the first real use does that)."""

from __future__ import annotations

import asyncio
from dataclasses import asdict, dataclass

from engine.kanban.backends.postgres import schema
from engine.kanban.backends.postgres.url import DatabaseUrl
from engine.kanban.hosts import boot_id

CHECK_TIMEOUT_SECONDS = 5.0


@dataclass(frozen=True)
class SharedBoardCheck:
    url: str  # shown form: never the password
    reachable: bool
    state: str  # one line: "board, schema version 2", "empty database", the refusal, or the error
    usable: bool
    host_id: str
    lease_expires_in: float | None = None  # seconds; negative: expired; None: no lease yet
    lease_boot_id: str | None = None  # the boot that holds this host id's lease
    this_boot_id: str | None = None  # this machine's boot: another one holding a live lease is another machine
    bad_url: bool = False  # the driver cannot use the URL (bad input: doctor exits 2)

    def to_json(self) -> dict:
        return asdict(self)


async def _read(url: DatabaseUrl, host_id: str) -> SharedBoardCheck:
    import asyncpg

    conn = await asyncpg.connect(dsn=url.secret, timeout=CHECK_TIMEOUT_SECONDS,
                                 server_settings={"application_name": "hermes-tui doctor"})
    try:
        tables = [r[0] for r in await conn.fetch(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()")]
        meta = None
        if schema.META_TABLE in tables:
            meta = {r[0]: r[1] for r in await conn.fetch(f"SELECT key, value FROM {schema.META_TABLE}")}
        why = schema.refusal(str(url), meta=meta, other_tables=tables if meta is None else [])
        if why:
            return SharedBoardCheck(str(url), True, why, False, host_id)
        if meta is None:
            return SharedBoardCheck(str(url), True, "empty: the first use sets the board up", True, host_id)
        version = int(meta["schema_version"])
        state = f"hermes-tui board, schema version {version}"
        if version < schema.SCHEMA_VERSION:
            state += f" (the next use migrates it to {schema.SCHEMA_VERSION})"
        lease = holder = None
        if "hosts" in tables:
            # Measured with the server's clock, as every host's dispatcher measures it.
            row = await conn.fetchrow("SELECT lease_expires - extract(epoch FROM clock_timestamp())::float8, boot_id "
                                      "FROM hosts WHERE host_id = $1", host_id)
            lease, holder = (None, None) if row is None else (float(row[0]), str(row[1]))
        return SharedBoardCheck(str(url), True, state, True, host_id, lease, holder, boot_id())
    finally:
        await conn.close()


def check_shared_board(url: DatabaseUrl, host_id: str) -> SharedBoardCheck:
    """Blocking (a few seconds at most): for the CLI."""
    try:
        return asyncio.run(asyncio.wait_for(_read(url, host_id), CHECK_TIMEOUT_SECONDS * 2))
    except ValueError as exc:  # the driver's own reading of the URL (an unknown sslmode, ...)
        text = url.scrub(str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__)
        return SharedBoardCheck(str(url), False, f"the board database URL is not usable: {text}", False, host_id,
                                bad_url=True)
    except Exception as exc:  # refused, timed out, no such database, bad credentials ...
        text = url.scrub(str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__)
        return SharedBoardCheck(str(url), False, f"cannot be reached: {text}", False, host_id)
