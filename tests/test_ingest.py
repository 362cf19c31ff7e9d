"""The ingest API and the collector's HTTP sink: bad input refused whole, and records
delivered exactly once through a server that dies and comes back."""

from __future__ import annotations

import asyncio
import contextlib
import json
import operator
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import dask
import dask.array as da
import httpx
import psutil
import pytest
from distributed import Client, LocalCluster, span
from distributed.protocol.pickle import dumps

import daskscope
from conftest import _admin
from daskscope.collector.http_sink import HttpSink
from daskscope.collector.plugin import DaskscopePlugin
from daskscope.config import CollectorSettings
from daskscope.model import TaskGroupRecord, stamp_revisions
from daskscope.store import cluster_detail, open_store, table_counts
from daskscope.store.identity import add_user, create_account, create_token
from daskscope.web import create_app
from daskscope.wire import encode_batch
from factories import make_cluster, make_group, make_profile
from pgserver import PostgresServer, free_port
from serveproc import launch
from serveproc import stop as end_process

CHILD_TABLES = ("computations", "task_groups", "task_prefixes", "spans", "span_metrics", "errors")


def group(i: int) -> TaskGroupRecord:
    return make_group("c", f"inc-{i}", tasks_executed=i, durations={"compute": 0.5})


def post(app: Any, body: bytes, headers: dict[str, str] | None = None) -> httpx.Response:
    async def call() -> httpx.Response:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            sent = {"content-type": "application/json", **(headers or {})}
            return await client.post("/api/v1/ingest", content=body, headers=sent)

    return asyncio.run(call())


@pytest.fixture
def app(tmp_path: Path) -> Any:
    return create_app(f"sqlite:///{tmp_path / 'server.db'}")


def test_a_batch_posted_twice_is_stored_once(app: Any) -> None:
    records = [group(i) for i in range(50)]
    stamp_revisions(records)  # as a sink numbers them
    batch = encode_batch(records)
    written = {"stored": 50, "superseded": 0, "superseded_by_table": {}}
    replayed = {"stored": 0, "superseded": 50, "superseded_by_table": {"task_groups": 50}}
    for expected in (written, replayed):
        response = post(app, batch)
        assert response.status_code == 200, response.text
        assert response.json() == {**expected, "records": 50, "rejected": []}
    assert table_counts(app.state.store)["task_groups"] == 50


def _document(**changes: Any) -> bytes:
    document = json.loads(encode_batch([group(1), group(2)]))
    for path, value in changes.items():
        target = document
        *parents, last = path.split("__")
        for part in parents:
            target = target[int(part)] if part.isdigit() else target[part]
        target[int(last) if last.isdigit() else last] = value
    return json.dumps(document).encode()


def _profile(tree: Any) -> bytes:
    document = json.loads(encode_batch([make_profile("c", 1.8e9, id="p", samples=1)]))
    document["records"][0]["data"]["tree"] = tree
    return json.dumps(document).encode()


def _nested(depth: int) -> bytes:
    """A profile whose tree is ``depth`` objects deep, past what the parser recurses."""
    return _profile("TREE").replace(b'"TREE"', ('{"a": ' * depth + "1" + "}" * depth).encode())


def _deep_profile(depth: int) -> bytes:
    # Spelled as text: json.dumps itself recurses once per level
    tree = '{"count": 1, "children": {"f": ' * depth + '{"count": 1}' + "}}" * depth
    return _profile("TREE").replace(b'"TREE"', tree.encode())


MALFORMED = [
    ("not json", b"{records: oops", 400, "not JSON"),
    ("not an object", b"[1, 2]", 422, "body"),
    ("wrong version", _document(version=7), 422, "version"),
    ("records not a list", _document(records={"a": 1}), 422, "records"),
    ("unknown kind", _document(records__1__kind="gossip"), 422, "records[1].kind"),
    ("wrong type", _document(records__0__data__tasks_executed="ten"), 422, "tasks_executed"),
    ("out of range", _document(records__1__data__nbytes_total=-5), 422, "nbytes_total"),
    ("not a time", _document(records__0__data__started_at=1e30), 422, "started_at"),
    ("missing field", _document(records__0__data__name=None), 422, "records[0].data.name"),
    # issue 10, point 7: what used to answer 5xx, or stored what broke the pages later
    ("nested past the parser", _nested(5000), 400, "nested too deeply"),
    ("integer past 2^63", _document(records__0__data__tasks_executed=2**63), 422, "tasks_executed"),
    ("id past an index", _document(records__1__data__id="x" * 5000), 422, "records[1].data.id"),
    ("float a sum cannot hold", _document(records__0__data__durations={"compute": 1.7e308}), 422,
     "records[0].data.durations"),
    ("profile count not a number", _profile({"count": "x"}), 422, "records[0].data.tree"),
    ("profile children not nodes", _profile({"count": 1, "children": [1, 2]}), 422, "children"),
    ("profile node not an object", _profile({"count": 1, "children": {"a": 3}}), 422, "depth 1"),
    ("profile deeper than a stack", _deep_profile(300), 422, "records[0].data.tree"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("case", "body", "status", "names"), MALFORMED, ids=[m[0] for m in MALFORMED]
)
def test_malformed_batches_are_refused_whole(
    app: Any, case: str, body: bytes, status: int, names: str
) -> None:
    response = post(app, body, {"content-type": "application/json"})
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert names in error["message"]
    counts = table_counts(app.state.store)
    assert counts["task_groups"] == counts["profiles"] == 0  # nothing partial


def test_oversized_batches_get_413(app: Any) -> None:
    with dask.config.set({"daskscope.ingest.max-batch-bytes": 1000}):
        response = post(app, encode_batch([group(i) for i in range(100)]))
    assert response.status_code == 413
    assert table_counts(app.state.store)["task_groups"] == 0


# -- a real server process, killed in the middle of a recorded computation ---------------


class Server:
    """``daskscope serve`` in its own process, which the test can kill and restart."""

    def __init__(self, database: str, port: int, log: Path, *options: str):
        self.database, self.port, self.log, self.options = database, port, log, options
        self.process: subprocess.Popen | None = None
        self.url = f"http://127.0.0.1:{port}"

    def start(self) -> None:
        command = [sys.executable, "-m", "daskscope.cli.main", "--database", self.database]
        command += ["serve", "--host", "127.0.0.1", "--port", str(self.port), *self.options]
        self.process = launch(command, self.log)
        deadline = time.monotonic() + 120  # a minute at load 50
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{self.url}/openapi.json", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"daskscope serve did not start: {self.log.read_text()[-2000:]}")

    def kill(self) -> None:
        assert self.process is not None
        os.kill(self.process.pid, signal.SIGKILL)
        self.process.wait(10)

    def stop(self) -> None:
        if self.process is not None:
            end_process(self.process)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    url = f"sqlite:///{tmp_path / 'server.db'}"
    open_store(url).close()
    instance = Server(url, free_port(), tmp_path / "server.log")
    try:
        instance.start()
        yield instance
    finally:
        instance.stop()


def slow(x: int) -> int:
    time.sleep(0.05)
    return x + 1


async def _flush_direct(dask_scheduler: Any) -> dict:
    return await dask_scheduler.plugins["daskscope-direct"].handle_flush()


def record_through_a_fault(
    server: Server, tmp_path: Path, fault: tuple[Callable[[], None], Callable[[], None]]
) -> None:
    """One cluster, two recorders: one sends to the server, one writes straight to a
    database. ``fault`` breaks the server's side in the middle of the computation and
    mends it afterwards. In the end both stores must hold the same."""
    direct_url = f"sqlite:///{tmp_path / 'direct.db'}"
    spool = tmp_path / "spool"
    breaks, mends = fault
    with (
        LocalCluster(
            n_workers=2, threads_per_worker=2, processes=False, dashboard_address=":0"
        ) as cluster,
        Client(cluster) as client,
    ):
        fast = dict(flush_interval=0.2, worker_sampling_interval=0.2, profile_interval=0.5)
        via_server = daskscope.register(
            client, server=server.url, spool_dir=str(spool), name="via server", **fast
        )
        direct = DaskscopePlugin(CollectorSettings.from_config(database=direct_url, **fast))
        client.sync(
            client.scheduler.register_scheduler_plugin,
            plugin=dumps(direct),
            name="daskscope-direct",
            idempotent=False,
        )
        with dask.config.set({"optimization.fuse.active": False}), span("before"):
            assert client.gather(client.map(slow, range(40))) == list(range(1, 41))
        futures = client.map(slow, range(100, 200))
        time.sleep(0.3)
        breaks()  # in the middle of the computation
        with dask.config.set({"optimization.fuse.active": False}), span("during outage"):
            x = da.ones((200, 200), chunks=50)
            assert (x + 1).sum().compute() == 2 * 200 * 200
        assert len(client.gather(futures)) == 100
        status = daskscope.flush(client)
        assert status["spooled"] > 0  # the outage was real: batches are waiting
        assert status["rejected_batches"] == 0
        mends()
        deadline = time.monotonic() + 120  # a minute or more at load 50
        while daskscope.flush(client, wait_for_metrics=False)["spooled"]:
            assert time.monotonic() < deadline, "the spool never drained"
            time.sleep(0.5)
        assert daskscope.flush(client, wait_for_metrics=False)["delivered_batches"] > 0
        client.run_on_scheduler(_flush_direct)
    server.stop()

    served, direct_store = open_store(server.database), open_store(direct_url)
    direct_id = direct.cluster_id
    mine, theirs = table_counts(served, via_server), table_counts(direct_store, direct_id)
    for table in CHILD_TABLES:
        assert mine[table] == theirs[table], table
    mine, theirs = cluster_detail(served, via_server), cluster_detail(direct_store, direct_id)
    for key in ("tasks_executed", "tasks_erred", "bytes_processed", "workers_peak"):
        assert mine["cluster"][key] == theirs["cluster"][key], key
    assert mine["cluster"]["stopped_at"] is not None  # the close was delivered too
    assert sorted(s["name"] for s in mine["spans"]) == sorted(s["name"] for s in theirs["spans"])


def test_server_killed_mid_computation_loses_and_duplicates_nothing(
    server: Server, tmp_path: Path
) -> None:
    record_through_a_fault(server, tmp_path, (server.kill, server.start))


def test_postgres_restarted_mid_ingest_loses_and_duplicates_nothing(
    own_postgres: PostgresServer, tmp_path: Path
) -> None:
    _admin(own_postgres.url, "CREATE DATABASE ingest")
    database = f"{own_postgres.url}/ingest"
    open_store(database).close()
    server = Server(database, free_port(), tmp_path / "server.log")
    server.start()
    try:
        record_through_a_fault(server, tmp_path, (own_postgres.stop, own_postgres.start))
    finally:
        server.stop()


# -- a scheduler that dies abruptly ---------------------------------------------------


class DaskProcesses:
    """A ``dask scheduler --preload daskscope`` and one ``dask worker``, in processes."""

    def __init__(self, env: dict[str, str], log: Path):
        self.env, self.log = env, log
        self.port = free_port()
        self.address = f"tcp://127.0.0.1:{self.port}"
        self.processes: list[subprocess.Popen] = []

    def start(self, *, worker: bool = True) -> None:
        bin_dir = Path(sys.executable).parent
        commands = [
            [bin_dir / "dask", "scheduler", "--port", str(self.port), "--no-dashboard", "--preload"]
        ]
        commands[0].append("daskscope")
        if worker:
            commands.append([bin_dir / "dask", "worker", self.address, "--nthreads", "2"])
            commands[-1] += ["--no-dashboard", "--nworkers", "1"]
        with self.log.open("a") as log:
            for command in commands:
                self.processes.append(
                    subprocess.Popen(
                        [str(c) for c in command],
                        env={**os.environ, **self.env},
                        stdout=log,
                        stderr=subprocess.STDOUT,
                    )
                )
                time.sleep(0.5)

    def kill(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                # the worker's own process too (dask worker runs it under a nanny)
                under = psutil.Process(process.pid).children(recursive=True)
                os.kill(process.pid, signal.SIGKILL)
                process.wait(10)
                for child in under:
                    with contextlib.suppress(psutil.Error):
                        child.kill()
                psutil.wait_procs(under, timeout=10)


def _run_and_die(processes: DaskProcesses) -> tuple[str, dict]:
    """Run 50 tasks, write, then kill the scheduler without warning."""
    processes.start()
    try:
        # processes just started: at load 50 they may take a minute to listen
        with Client(processes.address, timeout=120) as client:
            client.wait_for_workers(1, timeout=120)
            # a builtin: these processes cannot import the test module
            results = client.gather(client.map(operator.add, range(50), [1] * 50))
            assert results == list(range(1, 51))
            status = daskscope.flush(client)
    finally:
        processes.kill()
    return status["cluster_id"], status


def _wait_for(predicate: Any, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.3)


def test_records_flushed_before_an_abrupt_death_are_kept(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'direct.db'}"
    env = {"DASK_DASKSCOPE__DATABASE": url, "DASK_DASKSCOPE__FLUSH_INTERVAL": "0.2s"}
    cluster_id, _ = _run_and_die(DaskProcesses(env, tmp_path / "dask.log"))
    detail = cluster_detail(open_store(url), cluster_id)
    assert detail["cluster"]["tasks_executed"] == 50
    assert detail["cluster"]["stopped_at"] is None  # it never closed
    assert detail["cluster"]["last_seen_at"] > detail["cluster"]["started_at"]


def test_the_spool_delivers_on_the_next_scheduler_start(tmp_path: Path) -> None:
    database = f"sqlite:///{tmp_path / 'server.db'}"
    server = Server(database, free_port(), tmp_path / "server.log")  # not started: down
    env = {
        "DASK_DASKSCOPE__SERVER": server.url,
        "DASK_DASKSCOPE__SPOOL_DIR": str(tmp_path / "spool"),
        "DASK_DASKSCOPE__FLUSH_INTERVAL": "0.2s",
    }
    cluster_id, status = _run_and_die(DaskProcesses(env, tmp_path / "dask-1.log"))
    assert status["spooled"] > 0
    server.start()
    try:
        # a new scheduler on this host drains what the dead one left behind
        second = DaskProcesses(env, tmp_path / "dask-2.log")
        second.start(worker=False)
        try:
            store = open_store(database)
            _wait_for(lambda: table_counts(store, cluster_id)["clusters"] == 1)
            _wait_for(lambda: not list((tmp_path / "spool").glob("*.batch")))
            detail = cluster_detail(store, cluster_id)
            assert detail["cluster"]["tasks_executed"] == 50
            assert sum(g["tasks_executed"] for g in detail["task_groups"]) == 50
        finally:
            second.kill()
    finally:
        server.stop()


def test_the_sink_splits_large_batches_within_the_servers_limits(tmp_path: Path) -> None:
    # A team server (tokens required) takes a cluster's records only once it knows the
    # cluster: the sink sends the cluster row first, whatever its place in the flush.
    database = f"sqlite:///{tmp_path / 'server.db'}"
    with open_store(database) as store:
        create_account(store, "hep")
        add_user(store, "ana", account="hep")
        token = create_token(store, "ana")
    server = Server(database, free_port(), tmp_path / "server.log", "--auth")
    server.start()
    try:
        cluster = make_cluster("big flush", start=1.8e9, id="c", account="claimed", user="claimed")
        sink = HttpSink(server.url, token, tmp_path / "spool")
        with dask.config.set({"daskscope.ingest.max-batch-records": 7}):
            sink.write([*(group(i) for i in range(30)), cluster])
        assert (sink.delivered_batches, sink.rejected_batches, sink.spooled) == (5, 0, 0)
        sink.close()
    finally:
        server.stop()
    with open_store(database) as store:
        assert table_counts(store, "c")["task_groups"] == 30
        assert cluster_detail(store, "c")["cluster"]["account"] == "hep"


def count_events(start: int, stop: int) -> int:
    from daskscope.workflow import current_chunk

    chunk = current_chunk()
    if chunk is not None:
        chunk.report_events(stop - start)
    return stop - start


def test_workflow_runs_reach_the_server_too(server: Server, tmp_path: Path) -> None:
    from daskscope import MetricsCollector, track_metrics
    from daskscope.store.runs import list_runs, run_detail

    tracked = track_metrics(count_events)
    settings = {"daskscope.server": server.url, "daskscope.spool-dir": str(tmp_path / "spool")}
    with (
        dask.config.set(settings),
        LocalCluster(n_workers=1, processes=False, dashboard_address=":0") as cluster,
        Client(cluster) as client,
    ):
        with MetricsCollector(client, name="to the server") as collector:
            futures = client.map(tracked, [0, 10, 20], [10, 20, 25])
            assert sum(client.gather(futures)) == 25
        run_id = collector.wait_stored()
    store = open_store(server.database)
    assert [r["id"] for r in list_runs(store)] == [run_id]
    detail = run_detail(store, run_id)
    assert detail["run"]["name"] == "to the server"
    assert sum(c["events"] for c in detail["chunks"]) == 25
