"""``kanban daemon`` lives through an outage of its PostgreSQL server: it says so once,
retries, and as soon as the server is back renews its lease and dispatches again.

The outage is real: a private PostgreSQL cluster of this test (initdb and pg_ctl on a
free port in a temp dir, run as the ``postgres`` user), stopped and started again. The
shared server at 127.0.0.1:5432 is never touched (other tests use it)."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.home import HomeLayout
from tests.support import wait_until
from tests.support.cli import run_cli
from tests.support.kanban import CLI

PG_BIN = Path("/usr/lib/postgresql/15/bin")
HOST = "outage-host"


class Cluster:
    """A PostgreSQL cluster of our own, run as ``postgres`` (we are root)."""

    def __init__(self, data: Path, port: int) -> None:
        self.data, self.port = data, port
        self.url = f"postgresql://postgres@127.0.0.1:{port}/postgres"

    def _ctl(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run(["runuser", "-u", "postgres", "--", str(PG_BIN / "pg_ctl"), "-D", str(self.data),
                               *args], capture_output=True, text=True, timeout=120)

    def start(self) -> None:
        out = self._ctl("-w", "-l", str(self.data / "server.log"), "-o",
                        f"-p {self.port} -k {self.data} -c listen_addresses=127.0.0.1", "start")
        assert out.returncode == 0, out.stdout + out.stderr

    def stop(self) -> None:
        out = self._ctl("-w", "-m", "fast", "stop")
        assert out.returncode == 0, out.stdout + out.stderr


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    if os.geteuid() != 0 or shutil.which("runuser") is None or not (PG_BIN / "initdb").is_file():
        pytest.skip("a private PostgreSQL cluster needs root, runuser and PostgreSQL 15's initdb in " + str(PG_BIN))
    root = Path(tempfile.mkdtemp(prefix="hermes-outage-pg-", dir="/tmp"))
    data = root / "data"
    try:
        shutil.chown(root, "postgres")
        made = subprocess.run(["runuser", "-u", "postgres", "--", str(PG_BIN / "initdb"), "-D", str(data), "-A",
                               "trust", "-U", "postgres", "--no-sync"], capture_output=True, text=True, timeout=300)
        if made.returncode != 0:
            pytest.skip(f"initdb as postgres failed: {made.stderr.strip()[:200]}")
        db = Cluster(data, _free_port())
        db.start()
        try:
            yield db
        finally:
            db._ctl("-w", "-m", "immediate", "stop")
    finally:
        shutil.rmtree(root, ignore_errors=True)


async def _lease(url: str) -> float | None:
    import asyncpg

    conn = await asyncpg.connect(url, timeout=10)
    try:
        return await conn.fetchval("SELECT lease_expires FROM hosts WHERE host_id = $1", HOST)
    finally:
        await conn.close()


def _lease_now(url: str) -> float | None:
    return asyncio.run(_lease(url))


def _done(home: HomeLayout, env: dict, task_id: str) -> bool:
    out = run_cli("--home", str(home.root), "kanban", "show", task_id, "--json", env=env)
    return out.returncode == 0 and json.loads(out.stdout)["status"] == "done"


@pytest.mark.slow
def test_the_daemon_waits_out_a_server_outage_then_renews_its_lease_and_dispatches(home, cluster, children):
    worker = f'{CLI} complete "$HERMES_KANBAN_TASK" --summary ok'
    home.config_file.write_text(f"kanban:\n  dispatch_interval_seconds: 0.2\n  profiles:\n    w: {json.dumps(worker)}\n")
    env = {"HERMES_KANBAN_DATABASE_URL": cluster.url, "HERMES_KANBAN_HOST_ID": HOST}

    def create(title: str) -> str:
        out = run_cli("--home", str(home.root), "kanban", "create", title, "--assignee", "w", "--json", env=env)
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout)["id"]

    first = create("before the outage")
    log = home.root / "daemon.log"
    with open(log, "w") as out:
        daemon = children([sys.executable, "-m", "hermes_tui", "--home", str(home.root), "kanban", "daemon"],
                          stdout=out, stderr=subprocess.STDOUT, env={**os.environ, **env})
    try:
        wait_until(lambda: _done(home, env, first), timeout=60, what=lambda: f"the first card; {log.read_text()}")
        lease_before = _lease_now(cluster.url)
        assert lease_before is not None

        cluster.stop()
        wait_until(lambda: "cannot be reached" in log.read_text(), timeout=60,
                   what=lambda: f"the daemon's outage line; {log.read_text()}")
        assert daemon.poll() is None, log.read_text()

        cluster.start()
        wait_until(lambda: "reachable again" in log.read_text(), timeout=60,
                   what=lambda: f"the daemon back; {log.read_text()}")
        wait_until(lambda: (_lease_now(cluster.url) or 0) > lease_before, timeout=60, what="the lease renewed")
        second = create("after the outage")
        wait_until(lambda: _done(home, env, second), timeout=60, what=lambda: f"the second card; {log.read_text()}")
        assert daemon.poll() is None
    finally:
        daemon.send_signal(signal.SIGTERM)
        daemon.wait(timeout=60)
    text = log.read_text()
    assert text.count("cannot be reached") == 1, text  # said once for the whole outage
    outage = [line for line in text.splitlines() if "cannot be reached" in line][0]
    assert "retrying" in outage and "Traceback" not in text
