"""A fresh PostgreSQL database per test, on the server every machine of this project
runs (127.0.0.1:5432, trust auth). Tests run in parallel, so each gets its own database
and drops it afterwards.

Without a server the PostgreSQL tests are skipped on a developer's machine, and FAIL
under CI (``CI`` set): a CI run that silently skipped them would prove nothing.
"""

from __future__ import annotations

import asyncio
import os
import secrets
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

ADMIN_URL = os.environ.get("HERMES_TEST_PG_ADMIN_URL", "postgresql://postgres@127.0.0.1:5432/postgres")


def _url_of(dbname: str) -> str:
    base, _slash, _db = ADMIN_URL.rpartition("/")
    return f"{base}/{dbname}"


async def _admin(statement: str, admin_url: str | None = None) -> None:
    import asyncpg

    conn = await asyncpg.connect(admin_url or ADMIN_URL, timeout=10)
    try:
        await conn.execute(statement)
    finally:
        await conn.close()


def _run(coro) -> None:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        asyncio.run(coro)
        return
    # Called from inside a running loop (an async fixture): do it on a thread of its own.
    import threading

    errors: list[BaseException] = []

    def go() -> None:
        try:
            asyncio.run(coro)
        except BaseException as exc:  # handed back to the caller
            errors.append(exc)

    t = threading.Thread(target=go)
    t.start()
    t.join()
    if errors:
        raise errors[0]


def require_server(admin_url: str | None = None) -> None:
    """Skip (or fail under CI) when the PostgreSQL server cannot be reached."""
    admin_url = admin_url or ADMIN_URL
    try:
        _run(_admin("SELECT 1", admin_url))
    except Exception as exc:  # any reason: refused, no such role, ...
        why = f"PostgreSQL at {admin_url} cannot be reached: {type(exc).__name__}: {exc}"
        if os.environ.get("CI"):
            pytest.fail(why + " (CI is set: PostgreSQL tests must run)")
        pytest.skip(why)


@contextmanager
def fresh_database() -> Iterator[str]:
    """A new empty database's URL, dropped (with its connections) afterwards."""
    require_server()
    name = "hk_test_" + secrets.token_hex(6)
    _run(_admin(f'CREATE DATABASE "{name}"'))
    try:
        yield _url_of(name)
    finally:
        _run(_admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
