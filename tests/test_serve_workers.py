"""``daskscope serve --workers 2``: two server processes on one port and one PostgreSQL
take batches from several connections at once; each record is stored exactly once."""

from __future__ import annotations

import gc
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import psutil
import pytest

from conftest import _admin
from daskscope.store import open_store
from daskscope.store.identity import add_user, create_account, create_token, revoke_token
from daskscope.wire import encode_batch
from factories import make_cluster, make_group
from pgserver import free_port
from serveproc import launch, stop

BATCHES = 12  # a connection
GROUPS = 40  # a batch


@pytest.fixture
def team_database(postgres_server: str) -> Iterator[tuple[str, str]]:
    """A fresh PostgreSQL database with one member; yields its URL and their token."""
    name = f"w_{uuid.uuid4().hex[:12]}"
    _admin(postgres_server, f"CREATE DATABASE {name}")
    url = f"{postgres_server}/{name}"
    with open_store(url) as store:
        create_account(store, "team")
        add_user(store, "ann", account="team")
        token = create_token(store, "ann")
    yield url, token
    _admin(postgres_server, f"DROP DATABASE {name} WITH (FORCE)")


@pytest.fixture
def two_workers(team_database: tuple[str, str], tmp_path: Path) -> Iterator[str]:
    """``daskscope serve --workers 2 --auth`` in its own process; yields its base URL."""
    url, _ = team_database
    port = free_port()
    command = [sys.executable, "-m", "daskscope.cli.main", "--database", url, "serve"]
    command += ["--host", "127.0.0.1", "--port", str(port), "--auth", "--workers", "2"]
    log = tmp_path / "serve.log"
    process = launch(command, log)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120  # a minute or more at load 50
        while not _answers(base):
            assert process.poll() is None, log.read_text()
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.2)
        yield base
        assert process.poll() is None, f"serve died: {log.read_text()[-2000:]}"
        assert _worker_processes(process.pid) == 2, log.read_text()[-2000:]
    finally:
        stop(process)


def _answers(base: str) -> bool:
    try:
        return httpx.get(f"{base}/openapi.json", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def _worker_processes(supervisor: int) -> int:
    """uvicorn's worker processes under the supervisor (spawned by multiprocessing)."""
    children = psutil.Process(supervisor).children()
    return sum("spawn_main" in " ".join(child.cmdline()) for child in children)


def _batch(cluster_id: str, number: int) -> bytes:
    now = time.time()
    records: list = [
        make_cluster(
            cluster_id,
            start=now,
            id=cluster_id,
            account="claimed-by-the-token",
            user="someone",
            scheduler_address="tcp://10.0.0.1:8786",
            python_version="3.11.7",
            stopped_at=None,
            last_seen_at=now,
            workers_peak=1,
            threads_peak=1,
            core_seconds=1.0,
            tasks_executed=number,
        )
    ]
    records += [
        make_group(
            cluster_id, f"group-{number}-{i}", id=f"{cluster_id}-{number}-{i}", prefix="group",
            states={"memory": 1}, tasks_total=1, tasks_executed=1, nbytes_total=8,
            duration_s=0.01, durations={"compute": 0.01}, types=["int"],
            started_at=now + number, stopped_at=now + number + 1,
        )
        for i in range(GROUPS)
    ]  # fmt: skip
    return encode_batch(records)


def _post_all(base: str, token: str, cluster_id: str, failures: list[str]) -> None:
    """One connection posting its cluster's batches back to back, the last one twice
    (a collector's retry after a lost answer)."""
    headers = {"authorization": f"Bearer {token}", "content-type": "application/json"}
    with httpx.Client(base_url=base, headers=headers, timeout=60) as client:
        for number in [*range(BATCHES), BATCHES - 1]:
            response = client.post("/api/v1/ingest", content=_batch(cluster_id, number))
            if response.status_code != 200 or response.json()["rejected"]:
                failures.append(f"{cluster_id} batch {number}: {response.text[:300]}")


def _stored_group_names(base: str, token: str, cluster_id: str) -> list[str]:
    """Every task group of a cluster, read back page by page through the API."""
    headers = {"authorization": f"Bearer {token}"}
    names: list[str] = []
    route: str | None = f"/api/v1/clusters/{cluster_id}/task-groups?limit=100"
    with httpx.Client(base_url=base, headers=headers, timeout=60) as client:
        while route is not None:
            response = client.get(route)
            assert response.status_code == 200, response.text
            page = response.json()
            names += [group["name"] for group in page["groups"]]
            route = page["next"]
    return names


def test_two_server_processes_store_each_record_once(
    two_workers: str, team_database: tuple[str, str]
) -> None:
    url, token = team_database
    clusters = ["workers-a", "workers-b"]
    failures: list[str] = []
    threads = [
        threading.Thread(target=_post_all, args=(two_workers, token, cid, failures))
        for cid in clusters
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []

    expected = sorted(f"group-{n}-{i}" for n in range(BATCHES) for i in range(GROUPS))
    for cid in clusters:
        assert sorted(_stored_group_names(two_workers, token, cid)) == expected
    listed = httpx.get(
        f"{two_workers}/api/v1/clusters", headers={"authorization": f"Bearer {token}"}, timeout=60
    ).json()
    assert sorted(c["id"] for c in listed["clusters"] if c["id"] in clusters) == clusters
    with open_store(url) as store, store.engine.connect() as conn:
        import sqlalchemy as sa

        owners = dict(conn.execute(sa.text("SELECT id, account FROM clusters")).all())
    # the token, not the collector, says whose clusters these are
    assert owners == {"workers-a": "team", "workers-b": "team"}


def test_a_revoked_token_writes_nothing_from_the_moment_it_is_revoked(
    two_workers: str, team_database: tuple[str, str]
) -> None:
    """Ingest takes a token it saw valid from memory (web/tokencache.py) and checks it
    again in the writing transaction: revoking it stops the next batch in every worker
    process at once."""
    url, token = team_database
    headers = {"authorization": f"Bearer {token}", "content-type": "application/json"}
    clients = [httpx.Client(base_url=two_workers, headers=headers, timeout=60) for _ in range(4)]
    try:
        for client in clients:  # each connection's worker has now seen the token valid
            assert client.post("/api/v1/ingest", content=_batch("revoked", 0)).status_code == 200
        with open_store(url) as store:
            assert revoke_token(store, token=token) == 1
        for number, client in enumerate(clients, start=1):
            refused = client.post("/api/v1/ingest", content=_batch("revoked", number))
            assert refused.status_code == 401, refused.text
    finally:
        for client in clients:
            client.close()
    with open_store(url) as store, store.engine.connect() as conn:
        import sqlalchemy as sa

        stored = conn.execute(sa.text("SELECT name FROM task_groups")).scalars().all()
    assert sorted(stored) == sorted(f"group-0-{i}" for i in range(GROUPS))


def test_worker_processes_have_time_to_start(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """uvicorn's supervisor kills a worker that does not answer its health check in time,
    also while the worker still imports; with uvicorn's default (5 s), workers starting
    on a loaded host were killed and started again in a loop."""
    import uvicorn

    from daskscope.cli.serve import run_server
    from daskscope.web.app import WORKER_APP_ENV

    options: dict = {}
    monkeypatch.setattr(uvicorn, "run", lambda target, **kwargs: options.update(kwargs))
    # serve freezes its objects out of garbage collection: not the test process's (the
    # later tests' leftovers would never be collected)
    monkeypatch.setattr(gc, "freeze", lambda: None)
    monkeypatch.setenv(WORKER_APP_ENV, "{}")  # restored after the test
    run_server(f"sqlite:///{tmp_path / 'store.db'}", "127.0.0.1", free_port(), workers=2)
    assert options["workers"] == 2
    assert options["timeout_worker_healthcheck"] >= 60
