"""Delivery from a real Dask cluster to a real ``daskscope serve`` process when the host
or the server gets in the way: an unusable spool, stray spool entries, a revoked token,
a smaller body limit (413), a server being redeployed (404) or away, and a cluster that
closes while backoff is in force. Ground truth: a second recorder on the same cluster
writing straight to a database, and the number of tasks the test ran."""

from __future__ import annotations

import json
import logging
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from distributed import Client, LocalCluster
from distributed.protocol.pickle import dumps

import daskscope
from cliutil import run_cli
from daskscope.collector.http_sink import HttpSink
from daskscope.collector.plugin import DaskscopePlugin
from daskscope.config import CollectorSettings
from daskscope.model import ClusterRecord, stable_id
from daskscope.store import cluster_detail, open_store, table_counts
from daskscope.store.identity import add_user, create_account, create_token, revoke_token
from factories import make_group
from pgserver import free_port
from test_ingest import CHILD_TABLES, Server

FAST = dict(flush_interval=0.2, worker_sampling_interval=0.2, profile_enabled=False)


def inc(x: int) -> int:
    time.sleep(0.01)
    return x + 1


def work(client: Client, phase: int, n: int = 30) -> int:
    keys = [f"phase{phase}group{i}-0" for i in range(n)]  # a task group each
    assert client.gather(client.map(inc, range(n), key=keys)) == list(range(1, n + 1))
    return n


async def _flush_direct(dask_scheduler: Any) -> Any:
    return await dask_scheduler.plugins["daskscope-direct"].handle_flush()


def record(
    tmp_path: Path,
    server_url: str,
    spool: Path,
    between: list[Callable[[], None]],
    *,
    token: str | None = None,
    before_close: Callable[[Client], None] | None = None,
) -> tuple[str, str, int, dict]:
    """A cluster with two recorders (via the server; straight to a database); a phase
    of work, then each action of ``between``, then a last phase. Returns both cluster
    ids, the number of tasks run, and the server recorder's status before close."""
    direct_url = f"sqlite:///{tmp_path / 'direct.db'}"
    tasks = 0
    with (
        LocalCluster(
            n_workers=2, threads_per_worker=2, processes=False, dashboard_address=":0"
        ) as cluster,
        Client(cluster) as client,
    ):
        via = daskscope.register(
            client, server=server_url, token=token, spool_dir=str(spool), **FAST
        )
        direct = DaskscopePlugin(CollectorSettings.from_config(database=direct_url, **FAST))
        client.sync(
            client.scheduler.register_scheduler_plugin,
            plugin=dumps(direct),
            name="daskscope-direct",
            idempotent=False,
        )
        for phase, action in enumerate(between):
            tasks += work(client, phase)
            daskscope.flush(client, wait_for_metrics=False)
            action()
        tasks += work(client, len(between))
        status = daskscope.flush(client)
        client.run_on_scheduler(_flush_direct)
        if before_close is not None:
            before_close(client)
    return via, direct.cluster_id, tasks, status


def assert_same(server_db: str, via: str, direct_db: str, direct: str, tasks: int) -> None:
    """The server holds what the cluster did: the direct recorder's rows, the tasks run."""
    served, straight = open_store(server_db), open_store(direct_db)
    try:
        mine, theirs = table_counts(served, via), table_counts(straight, direct)
        for table in CHILD_TABLES:
            assert mine[table] == theirs[table], table
        mine, theirs = cluster_detail(served, via), cluster_detail(straight, direct)
        groups = {g["name"]: g["tasks_executed"] for g in mine["task_groups"]}
        assert groups == {g["name"]: g["tasks_executed"] for g in theirs["task_groups"]}
        assert sum(groups.values()) == tasks == mine["cluster"]["tasks_executed"]
        assert mine["cluster"]["stopped_at"] is not None  # the close arrived too
    finally:
        served.close()
        straight.close()


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    url = f"sqlite:///{tmp_path / 'server.db'}"
    open_store(url).close()
    instance = Server(url, free_port(), tmp_path / "server.log")
    instance.start()
    yield instance
    instance.stop()


def spool_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return run_cli("spool", *args)


# -- 1. a spool that cannot be used ------------------------------------------------


def test_a_spool_folder_that_cannot_be_made_does_not_stop_delivery(
    server: Server, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # A folder cannot be made under a regular file, for root too (a read-only home)
    blocker = tmp_path / "home-is-a-file"
    blocker.write_text("not a folder")
    spool = blocker / "spool"
    with caplog.at_level(logging.WARNING, logger="daskscope"):
        via, direct, tasks, status = record(tmp_path, server.url, spool, [lambda: None])
    assert status["write_failures"] == 0 and status["spooled"] == 0
    warnings = [r.getMessage() for r in caplog.records if "spool folder" in r.getMessage()]
    assert len(warnings) == 1 and "daskscope.spool-dir" in warnings[0]
    assert_same(server.database, via, f"sqlite:///{tmp_path / 'direct.db'}", direct, tasks)


def test_stray_spool_entries_are_set_aside_not_deleted(server: Server, tmp_path: Path) -> None:
    spool = tmp_path / "spool"
    (spool / "000000000001-aaaaaaaaaaaa.batch").mkdir(parents=True)  # a folder, our name
    (spool / "notes.batch").write_text("someone's notes")  # a file, not our name
    via, direct, tasks, _ = record(tmp_path, server.url, spool, [lambda: None])
    assert_same(server.database, via, f"sqlite:///{tmp_path / 'direct.db'}", direct, tasks)
    assert (spool / "notes.batch.unreadable").read_text() == "someone's notes"
    assert (spool / "000000000001-aaaaaaaaaaaa.batch.unreadable").is_dir()
    assert not list(spool.glob("*.batch"))

    listed = spool_cli("ls", "--spool-dir", str(spool), "--json")
    assert listed.returncode == 0, listed.stderr
    entries = json.loads(listed.stdout)["entries"]
    assert sorted((e["name"], e["state"]) for e in entries) == [
        ("000000000001-aaaaaaaaaaaa.batch.unreadable", "unreadable"),
        ("notes.batch.unreadable", "unreadable"),
    ]
    dropped = spool_cli("drop", "--spool-dir", str(spool), "--unreadable")
    assert dropped.returncode == 0, dropped.stderr
    # the file goes; a folder is left for a human
    assert not (spool / "notes.batch.unreadable").exists()
    assert (spool / "000000000001-aaaaaaaaaaaa.batch.unreadable").is_dir()


# -- 2. refusals that can pass -------------------------------------------------------


def test_a_revoked_token_keeps_batches_for_spool_send_with_a_new_one(tmp_path: Path) -> None:
    database = f"sqlite:///{tmp_path / 'server.db'}"
    with open_store(database) as store:
        create_account(store, "hep")
        add_user(store, "ana", account="hep")
        old_token = create_token(store, "ana")
    server = Server(database, free_port(), tmp_path / "server.log", "--auth")
    server.start()
    spool = tmp_path / "spool"

    def revoke() -> None:
        with open_store(database) as store:
            assert revoke_token(store, token=old_token) == 1

    try:
        via, direct, tasks, status = record(tmp_path, server.url, spool, [revoke], token=old_token)
        assert status["spooled"] > 0 and status["rejected_batches"] == 0
        # kept as waiting, after the last try at close too: nothing set aside
        assert list(spool.glob("*.batch")) and not list(spool.glob("*.rejected"))
        listed = json.loads(spool_cli("ls", "--spool-dir", str(spool), "--json").stdout)
        assert {e["state"] for e in listed["entries"]} == {"waiting"}
        assert all(e["records"] > 0 for e in listed["entries"])

        with open_store(database) as store:
            new_token = create_token(store, "ana")
        sent = spool_cli(
            "send", "--spool-dir", str(spool), "--server", server.url, "--token", new_token
        )
        assert sent.returncode == 0, sent.stderr
        assert not list(spool.glob("*.batch"))
    finally:
        server.stop()
    assert_same(database, via, f"sqlite:///{tmp_path / 'direct.db'}", direct, tasks)
    with open_store(database) as store:
        assert cluster_detail(store, via)["cluster"]["user"] == "ana"


def test_a_smaller_body_limit_splits_batches(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # The server takes 16 KiB per batch (as a proxy in front of it might); the cluster
    # sends with the default 32 MiB limit
    database = f"sqlite:///{tmp_path / 'server.db'}"
    open_store(database).close()
    monkeypatch.setenv("DASK_DASKSCOPE__INGEST__MAX_BATCH_BYTES", "16384")
    server = Server(database, free_port(), tmp_path / "server.log")
    server.start()
    monkeypatch.delenv("DASK_DASKSCOPE__INGEST__MAX_BATCH_BYTES")
    try:
        with caplog.at_level(logging.WARNING, logger="daskscope"):
            via, direct, tasks, status = record(tmp_path, server.url, tmp_path / "spool", [])
        assert status["rejected_batches"] == 0
    finally:
        server.stop()
    # the limit was met (and said once)
    assert len([r for r in caplog.records if "as too large" in r.getMessage()]) == 1
    assert_same(database, via, f"sqlite:///{tmp_path / 'direct.db'}", direct, tasks)


def test_a_split_batch_keeps_its_cluster_record_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # On a server with tokens, records are taken only once their cluster is known
    database = f"sqlite:///{tmp_path / 'server.db'}"
    with open_store(database) as store:
        create_account(store, "hep")
        add_user(store, "ana", account="hep")
        token = create_token(store, "ana")
    monkeypatch.setenv("DASK_DASKSCOPE__INGEST__MAX_BATCH_BYTES", "20000")
    server = Server(database, free_port(), tmp_path / "server.log", "--auth")
    server.start()
    monkeypatch.delenv("DASK_DASKSCOPE__INGEST__MAX_BATCH_BYTES")
    try:
        cluster = ClusterRecord(
            id="c", name="split", account="x", user="x", scheduler_address="tcp://s:1",
            dask_version="1", distributed_version="1", python_version="3",
            started_at=1.8e9, last_seen_at=1.8e9,
        )  # fmt: skip
        sink = HttpSink(server.url, token, tmp_path / "spool")
        long_named = (
            make_group("c", f"g-{i}-" + "x" * 2000, id=stable_id("c", "tg", i), tasks_executed=i)
            for i in range(40)
        )
        sink.write([cluster, *long_named])
        assert (sink.rejected_batches, sink.spooled) == (0, 0)
        sink.close()
    finally:
        server.stop()
    with open_store(database) as store:
        assert table_counts(store, "c")["task_groups"] == 40
        stored = {g["id"] for g in cluster_detail(store, "c")["task_groups"]}
        assert stored == {stable_id("c", "tg", i) for i in range(40)}


@contextmanager
def answering_404(port: int, hits: list[str]) -> Iterator[None]:
    """What a reverse proxy says while the server behind it is being redeployed; each
    request's path goes to ``hits``."""
    import uvicorn
    from starlette.applications import Starlette
    from starlette.responses import PlainTextResponse

    app = Starlette()

    def not_found(request: Any) -> PlainTextResponse:
        hits.append(request.url.path)
        return PlainTextResponse("no such page", status_code=404)

    app.add_route("/{path:path}", not_found, methods=["GET", "POST"])
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        assert thread.is_alive(), "the 404 server did not start"
        time.sleep(0.05)
    try:
        yield
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def test_a_redeploy_404_and_a_server_away_lose_nothing(server: Server, tmp_path: Path) -> None:
    spool = tmp_path / "spool"
    hits: list[str] = []
    redeploy = answering_404(server.port, hits)

    def to_404() -> None:
        server.stop()
        redeploy.__enter__()
        deadline = time.monotonic() + 120  # a minute or more at load 50
        while "/api/v1/ingest" not in hits:  # a batch met the 404
            assert time.monotonic() < deadline, "no batch was sent during the redeploy"
            time.sleep(0.2)

    def away() -> None:
        redeploy.__exit__(None, None, None)  # nobody listens now

    def back(client: Client) -> None:
        status = daskscope.flush(client, wait_for_metrics=False)
        assert status["spooled"] > 0 and status["rejected_batches"] == 0
        server.start()
        deadline = time.monotonic() + 120
        while daskscope.flush(client, wait_for_metrics=False)["spooled"]:
            assert time.monotonic() < deadline, "the spool never drained"
            time.sleep(0.5)

    via, direct, tasks, _ = record(tmp_path, server.url, spool, [to_404, away], before_close=back)
    server.stop()
    assert not list(spool.glob("*.rejected"))
    assert_same(server.database, via, f"sqlite:///{tmp_path / 'direct.db'}", direct, tasks)


def test_a_closing_cluster_tries_once_more_whatever_the_backoff(
    server: Server, tmp_path: Path
) -> None:
    spool = tmp_path / "spool"

    def away_a_while() -> None:
        # long enough for the backoff to grow past the time the server takes to start
        server.stop()
        time.sleep(16)  # tries at 0, 1, 3, 7, 15 s: the next one 31 s after the first

    via, direct, tasks, status = record(
        tmp_path, server.url, spool, [away_a_while], before_close=lambda client: server.start()
    )
    assert status["spooled"] > 0
    # the plugin hands the sink's close to its writer thread without waiting for it
    deadline = time.monotonic() + 120  # a minute or more at load 50
    while list(spool.glob("*.batch")):
        assert time.monotonic() < deadline, "batches left behind at close"
        time.sleep(0.2)
    server.stop()
    assert_same(server.database, via, f"sqlite:///{tmp_path / 'direct.db'}", direct, tasks)
