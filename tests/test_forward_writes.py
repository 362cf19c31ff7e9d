"""Every write moves forward (issue 24, points 1 and 2), against real ``daskscope serve``
processes on SQLite and PostgreSQL: an older batch delivered late (a retry, ``spool send
--rejected``, a replay) changes no row and never reopens a closed cluster, also when
two server processes take a cluster's batches out of order; and a batch that reaches
the server before its cluster's record is kept and delivered, never refused."""

from __future__ import annotations

import random
import shutil
import threading
from pathlib import Path
from typing import Any

import dask
import httpx
import pytest
import sqlalchemy as sa
from distributed import Client, LocalCluster

import daskscope
from daskscope import MetricsCollector, track_metrics
from daskscope.collector.http_sink import HttpSink
from daskscope.model import Record, record_to_dict
from daskscope.store import cluster_detail, open_store, table_counts, write_records, write_rows
from daskscope.store.identity import add_user, create_account, create_token
from daskscope.store.runs import run_detail
from daskscope.store.schema import TABLES, clusters, span_tags
from daskscope.wire import encode_batch
from factories import make_cluster, make_group, make_workflow_chunk, make_workflow_run
from pgserver import free_port
from test_delivery import spool_cli
from test_ingest import Server, count_events
from test_serve_workers import team_database, two_workers  # noqa: F401  fixtures


def every_table(database: str) -> dict[str, list[tuple]]:
    """Every row of every table of records (and their span-tag index), in key order:
    what "byte for byte" compares."""
    with open_store(database) as store, store.engine.connect() as conn:
        return {
            table.name: [tuple(row) for row in conn.execute(sa.select(table).order_by(table.c.id))]
            for table in [*TABLES.values(), span_tags]
        }


def inc(x: int) -> int:
    return x + 1


# -- 1. no batch undoes a newer one --------------------------------------------------


def test_every_earlier_batch_of_a_closed_cluster_replayed_changes_nothing(
    database_url: str, tmp_path: Path
) -> None:
    """A real recorder's batches, kept in its spool while the server was away, sent in
    order; then every one of them again, as ``spool send --rejected`` and in random
    order: every table stays byte-for-byte what it was, the cluster stays closed."""
    open_store(database_url).close()
    server = Server(database_url, free_port(), tmp_path / "server.log")  # down for now
    spool = tmp_path / "spool"
    sizes = (10, 500, 1000)
    with (
        LocalCluster(
            n_workers=1, threads_per_worker=2, processes=False, dashboard_address=":0"
        ) as cluster,
        Client(cluster) as client,
    ):
        cluster_id = daskscope.register(
            client, server=server.url, spool_dir=str(spool), flush_interval=3600
        )
        for n in sizes:  # a flush after each: a batch a snapshot
            assert client.gather(client.map(inc, range(n), key=[f"inc-{n}-{i}" for i in range(n)]))
            assert daskscope.flush(client, wait_for_metrics=False)["spooled"] > 0
    batches = sorted(spool.glob("*.batch"))
    assert len(batches) >= len(sizes) + 1  # the close wrote one more
    kept = tmp_path / "kept"
    kept.mkdir()
    for path in batches:
        shutil.copy(path, kept / path.name)

    server.start()
    try:
        sent = spool_cli("send", "--spool-dir", str(spool), "--server", server.url)
        assert sent.returncode == 0, sent.stderr
        stored = every_table(database_url)
        with open_store(database_url) as store:
            detail = cluster_detail(store, cluster_id)
        assert detail["cluster"]["tasks_executed"] == sum(sizes)
        assert detail["cluster"]["stopped_at"] is not None
        assert sum(g["tasks_executed"] for g in detail["task_groups"]) == sum(sizes)

        # the documented recovery step, with every batch older than the last
        earlier = sorted(kept.iterdir())[:-1]
        for path in earlier:
            shutil.copy(path, spool / path.with_suffix(".rejected").name)
        again = spool_cli("send", "--rejected", "--spool-dir", str(spool), "--server", server.url)
        assert again.returncode == 0, again.stderr
        assert every_table(database_url) == stored
        said = [line for line in again.stdout.splitlines() if ".rejected:" in line]
        assert len(said) == len(earlier)
        assert all("nothing changed" in line for line in said), again.stdout

        # a proxy replaying each of them, in any order: no table moves at any point
        order = list(earlier)
        random.Random(24).shuffle(order)
        for path in order:
            response = httpx.post(
                f"{server.url}/api/v1/ingest",
                content=path.read_bytes(),
                headers={"content-type": "application/json"},
                timeout=60,
            )
            assert response.status_code == 200, response.text
            answer = response.json()
            assert (answer["stored"], answer["superseded"]) == (0, answer["records"])
            assert every_table(database_url) == stored, path.name
    finally:
        server.stop()


def _snapshot(cluster_id: str, version: int, *, closed: bool) -> list[Record]:
    """A cluster's records as its recorder's ``version``-th write would send them:
    more tasks each time, the last one closed."""
    tasks = {1: 10, 2: 500, 3: 1000}[version]
    cluster = make_cluster(
        cluster_id,
        start=1.8e9,
        id=cluster_id,
        stopped_at=1.8e9 + 3600 if closed else None,
        last_seen_at=1.8e9 + version,
        tasks_executed=tasks,
        core_seconds=float(tasks),
    )
    groups = [
        make_group(cluster_id, "inc-1", tasks_executed=tasks, tasks_total=tasks),
        make_group(cluster_id, f"only-in-{version}", tasks_executed=1),
    ]
    records: list[Record] = [cluster, *groups]
    for record in records:
        record.revision = version  # as stamp_revisions numbers them, in order
    return records


def _post(base: str, token: str, records: list[Record]) -> dict[str, Any]:
    headers = {"authorization": f"Bearer {token}", "content-type": "application/json"}
    with httpx.Client(base_url=base, headers=headers, timeout=60) as client:  # a new connection
        response = client.post("/api/v1/ingest", content=encode_batch(records))
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer


def test_two_server_processes_keep_the_newest_whatever_the_order(
    two_workers: str,  # noqa: F811
    team_database: tuple[str, str],  # noqa: F811
) -> None:
    url, token = team_database
    newest = _snapshot("race", 3, closed=True)
    # the newest first, then the older ones over and over from connections in parallel
    # (each on a new connection, which either process may take), and the newest again
    assert _post(two_workers, token, newest)["superseded"] == 0
    after_newest = every_table(url)
    answers: list[dict[str, Any]] = []
    older = [_snapshot("race", v, closed=False) for v in (1, 2)]

    def replay(i: int) -> None:
        for _ in range(10):
            answers.append(_post(two_workers, token, older[i % 2]))

    threads = [threading.Thread(target=replay, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(answers) == 40
    # the older groups that only they name are new rows; every other record is older
    for answer in answers:
        assert answer["superseded"] in (answer["records"] - 1, answer["records"])
    assert _post(two_workers, token, newest)["superseded"] == len(newest)

    with open_store(url) as store:
        detail = cluster_detail(store, "race")
    assert detail["cluster"]["tasks_executed"] == 1000
    assert detail["cluster"]["stopped_at"] == 1.8e9 + 3600  # still closed
    groups = {g["name"]: g["tasks_executed"] for g in detail["task_groups"]}
    assert groups == {"inc-1": 1000, "only-in-3": 1, "only-in-1": 1, "only-in-2": 1}
    now = every_table(url)
    for table in ("clusters", "computations", "task_prefixes", "spans", "span_tags"):
        assert now[table] == after_newest[table], table


def test_racing_versions_of_one_row_end_at_the_newest(
    two_workers: str,  # noqa: F811
    team_database: tuple[str, str],  # noqa: F811
) -> None:
    """Versions 1 to 3 of a cluster sent at once from many connections, in shuffled
    orders: whichever process writes last, the row holds version 3."""
    url, token = team_database
    versions = {v: _snapshot("racing", v, closed=v == 3) for v in (1, 2, 3)}
    _post(two_workers, token, versions[1])  # the cluster is known from here on

    def send(seed: int) -> None:
        order = [1, 2, 3] * 3
        random.Random(seed).shuffle(order)
        for version in order:
            _post(two_workers, token, versions[version])

    threads = [threading.Thread(target=send, args=(seed,)) for seed in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    with open_store(url) as store:
        detail = cluster_detail(store, "racing")
    assert detail["cluster"]["tasks_executed"] == 1000
    assert detail["cluster"]["stopped_at"] is not None
    assert {g["name"]: g["tasks_executed"] for g in detail["task_groups"]}["inc-1"] == 1000


def test_unnumbered_writes_never_replace_a_numbered_row(store: Any) -> None:
    """Records of a writer that does not number them (revision 0: an older collector,
    a script writing records) replace only rows of their own kind."""
    numbered = make_cluster("numbered", start=1.8e9, tasks_executed=7)
    numbered.revision = 5
    write_records(store, [numbered])
    unnumbered = make_cluster("numbered", start=1.8e9, tasks_executed=1)
    superseded: dict[str, int] = {}
    as_row = record_to_dict(unnumbered)
    assert write_rows(store, {clusters: [as_row]}, superseded=superseded) == 0
    assert superseded == {"clusters": 1}
    assert cluster_detail(store, numbered.id)["cluster"]["tasks_executed"] == 7
    plain = make_cluster("plain", start=1.9e9, tasks_executed=1)
    write_records(store, [plain])
    write_records(store, [make_cluster("plain", start=1.9e9, tasks_executed=2)])
    assert cluster_detail(store, plain.id)["cluster"]["tasks_executed"] == 2


# -- 2. order does not matter: a batch before its cluster is kept ----------------------


@pytest.fixture
def team(database_url: str, tmp_path: Path) -> Any:
    with open_store(database_url) as store:
        create_account(store, "atlas")
        add_user(store, "bob", account="atlas")
        token = create_token(store, "bob")
    server = Server(database_url, free_port(), tmp_path / "server.log", "--auth")
    server.start()
    try:
        yield server, token
    finally:
        server.stop()


def test_a_run_before_its_cluster_is_kept_and_delivered(team: Any, tmp_path: Path) -> None:
    server, token = team
    run = make_workflow_run("early", id="run-early", chunk_count=3)
    chunks = [make_workflow_chunk(run, i, events=10) for i in range(3)]
    headers = {"authorization": f"Bearer {token}", "content-type": "application/json"}
    answer = httpx.post(
        f"{server.url}/api/v1/ingest",
        content=encode_batch([run, *chunks]),
        headers=headers,
        timeout=30,
    )
    assert answer.status_code == 425, answer.text  # come back later, not a refusal
    assert int(answer.headers["retry-after"]) > 0
    assert "has not arrived yet" in answer.json()["error"]["message"]
    with open_store(server.database) as store:
        assert table_counts(store)["workflow_runs"] == 0

    # the run's collector spools it as waiting (not rejected); the recorder, sharing
    # the spool, sends its cluster past it; the run goes once the cluster is there
    spool = tmp_path / "spool"
    run_sink = HttpSink(server.url, token, spool)
    run_sink.write([run, *chunks])
    assert run_sink.rejected_batches == 0
    assert len(list(spool.glob("*.batch"))) == 1 and not list(spool.glob("*.rejected"))
    recorder = HttpSink(server.url, token, spool)
    recorder.write([make_cluster("early", start=1.8e9, id="early")])
    assert recorder.delivered_batches == 1
    assert run_sink.wait_for_cluster(timeout=120)
    run_sink.close()
    recorder.close()
    assert not list(spool.glob("*.batch")) and not list(spool.glob("*.rejected"))
    with open_store(server.database) as store:
        detail = run_detail(store, "run-early")
    assert [c["events"] for c in detail["chunks"]] == [10, 10, 10]
    assert detail["run"]["account"] == "atlas"


def test_a_run_that_ends_before_the_first_interval_reaches_the_server(
    team: Any, tmp_path: Path
) -> None:
    server, token = team
    spool = tmp_path / "spool"
    tracked = track_metrics(count_events)
    with (
        dask.config.set({"daskscope.spool-dir": str(spool)}),
        LocalCluster(n_workers=1, processes=False, dashboard_address=":0") as cluster,
        Client(cluster) as client,
    ):
        # no flush asked for, and the first interval an hour away
        daskscope.register(
            client, server=server.url, token=token, spool_dir=str(spool), flush_interval=3600
        )
        with MetricsCollector(client, name="quick") as collector:
            assert sum(client.gather(client.map(tracked, [0, 10], [10, 25]))) == 25
        run_id = collector.wait_stored(timeout=120)
        with open_store(server.database) as store:
            detail = run_detail(store, run_id)
        assert sum(c["events"] for c in detail["chunks"]) == 25
    assert not list(spool.glob("*.rejected"))
