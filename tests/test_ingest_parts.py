"""A batch is decoded, checked and written a part at a time (wire.WireBatch), in one
transaction: what the server answers and stores must not depend on where the parts
fall. Each case is run with parts of a few records and with the whole batch as one part,
and the two must store the same rows and answer the same (indices as sent)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy as sa

from daskscope import wire
from daskscope.model import record_to_dict, stamp_revisions
from daskscope.store import WriteFailed, open_store, table_counts, write_parts
from daskscope.store import schema as s
from daskscope.store.identity import add_user, create_account, create_token
from daskscope.web import create_app
from daskscope.wire import encode_batch
from factories import make_cluster, make_group, make_profile, make_workflow_chunk, make_workflow_run

#: A part of a few records (records here are 400-800 bytes of JSON each)
SMALL_PARTS = 2_000
WHOLE = 1 << 40


@pytest.fixture(params=[SMALL_PARTS, WHOLE], ids=["small parts", "one part"])
def part_bytes(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> int:
    monkeypatch.setattr(wire, "PART_BYTES", request.param)
    return int(request.param)


@pytest.fixture
def team(tmp_path: Path) -> Iterator[tuple[Any, dict[str, str], str]]:
    url = f"sqlite:///{tmp_path / 'server.db'}"
    with open_store(url) as store:
        create_account(store, "atlas")
        create_account(store, "cms")
        add_user(store, "alice", account="atlas")
        add_user(store, "carol", account="cms")
        tokens = {name: create_token(store, name) for name in ("alice", "carol")}
    yield create_app(url, auth=True), tokens, url


def post(app: Any, token: str, body: bytes) -> httpx.Response:
    async def call() -> httpx.Response:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            headers = {"content-type": "application/json", "authorization": f"Bearer {token}"}
            return await client.post("/api/v1/ingest", content=body, headers=headers)

    return asyncio.run(call())


def groups(cluster_id: str, n: int) -> list[Any]:
    return [make_group(cluster_id, f"inc-{i}", tasks_executed=i) for i in range(n)]


def stored(url: str) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of the tables a batch writes, sorted: what two runs must share."""
    with open_store(url) as store, store.engine.connect() as conn:
        return {
            table.name: sorted(
                tuple(v for k, v in row._mapping.items() if k != "revision")
                for row in conn.execute(sa.select(table))
            )
            for table in (s.clusters, s.task_groups, s.profiles, s.workflow_runs)
        }


def test_the_cluster_sent_last_is_taken_first(team: Any, part_bytes: int) -> None:
    """A cluster record after the records that refer to it (any sender may order a batch
    so): the records of later parts find their cluster, whatever the part size."""
    app, tokens, url = team
    records = [*groups("c1", 30), make_profile("c1", 1.8e9, id="p1", samples=3)]
    records.append(make_cluster("c1", start=1.8e9, id="c1"))
    stamp_revisions(records)
    answer = post(app, tokens["alice"], encode_batch(records))
    assert answer.status_code == 200, answer.text
    assert answer.json()["stored"] == answer.json()["records"] == 32
    with open_store(url) as store:
        counts = table_counts(store, "c1")
    assert counts["task_groups"] == 30 and counts["profiles"] == 1


def test_a_bad_record_in_a_late_part_stores_nothing(team: Any, part_bytes: int) -> None:
    """Parts before a record that fails its check were written in the same transaction:
    the answer names the record as sent, and nothing of the batch is kept."""
    app, tokens, url = team
    records = [make_cluster("c1", start=1.8e9, id="c1"), *groups("c1", 40)]
    document = json.loads(encode_batch(records))
    document["records"][37]["data"]["tasks_executed"] = -1
    answer = post(app, tokens["alice"], json.dumps(document).encode())
    assert answer.status_code == 422, answer.text
    assert "records[37].data.tasks_executed" in answer.json()["error"]["message"]
    with open_store(url) as store:
        assert table_counts(store)["clusters"] == 0
        assert table_counts(store)["task_groups"] == 0


def test_another_accounts_cluster_in_a_late_part_is_named(team: Any, part_bytes: int) -> None:
    app, tokens, url = team
    theirs = encode_batch([make_cluster("x", start=1.8e9, id="cms-c")])
    assert post(app, tokens["carol"], theirs).is_success
    before = stored(url)
    records = [make_cluster("c1", start=1.8e9, id="c1"), *groups("c1", 40)]
    records[33] = make_group("cms-c", "theirs")
    answer = post(app, tokens["alice"], encode_batch(records))
    assert answer.status_code == 409, answer.text
    assert "records[33].data.cluster_id" in answer.json()["error"]["message"]
    assert stored(url) == before  # alice's cluster and groups of the earlier parts too


def test_a_run_and_its_chunks_across_parts(team: Any, part_bytes: int) -> None:
    """Chunks sent before their run, with the run at the end: the run is taken with the
    clusters, before any chunk is checked against it."""
    app, tokens, url = team
    run = make_workflow_run("c1")
    records = [make_workflow_chunk(run, i) for i in range(12)]
    records += [run, make_cluster("c1", start=1.8e9, id="c1")]
    answer = post(app, tokens["alice"], encode_batch(records))
    assert answer.status_code == 200, answer.text
    with open_store(url) as store, store.engine.connect() as conn:
        chunks = conn.execute(sa.select(sa.func.count()).select_from(s.workflow_chunks))
        assert chunks.scalar() == 12


def test_the_same_batch_stores_the_same_rows_in_parts_or_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One batch of every shape above, with ids repeated (the last wins within a part,
    the newest revision across parts), posted to two servers: one with parts of a few
    records, one with the batch whole. Their tables are equal."""
    records: list[Any] = [make_cluster("c1", start=1.8e9, id="c1"), *groups("c1", 25)]
    records += [make_group("c1", "inc-3", tasks_executed=99, durations={"compute": 2.0})]
    records += [make_profile("c1", 1.8e9, id="p1", samples=2), make_workflow_run("c1")]
    stamp_revisions(records)
    body = encode_batch(records)
    answers, tables = [], []
    for size in (SMALL_PARTS, WHOLE):
        monkeypatch.setattr(wire, "PART_BYTES", size)
        url = f"sqlite:///{tmp_path / f'{size}.db'}"
        answers.append(post(create_app(url), "none", body).json())
        tables.append(stored(url))
    assert answers[0] == answers[1]
    assert tables[0] == tables[1]
    (inc3,) = [row for row in tables[0]["task_groups"] if "inc-3" in row]
    assert 99 in inc3  # the later record of the same id


def test_what_the_parts_raise_reaches_the_caller_and_the_databases_errors_stay_its(
    tmp_path: Path,
) -> None:
    """A check of the caller's own (a part that fails to decode) reaches it as raised; a
    query of the check that the database fails is a write failure like any other (the
    ingest route answers 503 for it, not 500), and nothing of the batch is kept."""
    url = f"sqlite:///{tmp_path / 'store.db'}"
    first = {s.clusters: [record_to_dict(make_cluster("c1", start=1.8e9, id="c1"))]}
    with open_store(url) as store:

        def then_bad_record(conn: sa.Connection) -> Iterator[Any]:
            yield first
            raise wire.WireError("records[1].data.x", "made up")

        with pytest.raises(wire.WireError, match="made up"):
            write_parts(store, then_bad_record, 2)

        def then_bad_query(conn: sa.Connection) -> Iterator[Any]:
            yield first
            conn.exec_driver_sql("SELECT * FROM no_such_table")
            yield {s.task_groups: []}

        with pytest.raises(WriteFailed, match="nothing of this batch was stored"):
            write_parts(store, then_bad_query, 2)
        assert table_counts(store)["clusters"] == 0
