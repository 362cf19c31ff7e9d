"""Text that Dask allows is stored: NUL, lone surrogates, long and exotic strings, on
SQLite, PostgreSQL and through the server; one odd record never fails its batch."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from pathlib import Path
from typing import Any

import distributed
import httpx
import pytest
import sqlalchemy as sa
from distributed import Client, LocalCluster

import daskscope
from daskscope import model
from daskscope.model import stable_id
from daskscope.store import Rejected, Store, open_store, write_records
from daskscope.store.schema import TABLES
from daskscope.text import escape_text, escape_value
from daskscope.web import create_app
from daskscope.wire import decode_batch, encode_batch
from factories import (
    make_cluster,
    make_computation,
    make_error,
    make_event,
    make_group,
    make_span,
)

T0 = 1_767_225_600.5

#: Text Dask allows in keys, span tags, code and exceptions
ODD = [
    "nul\x00inside",
    "lone high \ud800 surrogate",
    "lone low \udfff surrogate",
    "pair 😀 and \U0010ffff",
    "ordinary \\u0000 six characters",
    "עברית · 中文 · e\u0301 · \u200b · \x01\x1f\x7f",
    "tab\tnew\nline\r",
    "long " + "ab\x00" * 70_000,
]


def test_escape_text_is_documented_notation() -> None:
    assert escape_text("a\x00b") == "a\\u0000b"
    assert escape_text("\ud800x\udfff") == "\\ud800x\\udfff"
    assert escape_text("😀 \\u0000") == "😀 \\u0000"  # storable text is kept as it is
    assert escape_value({"k\x00": ["\ud800", ("t\x00",)], "n": 3}) == {
        "k\\u0000": ["\\ud800", ["t\\u0000"]],
        "n": 3,
    }


def odd_records(cid: str, text: str, i: int) -> list[model.Record]:
    """Records of several kinds with ``text`` in every text field Dask feeds."""
    return [
        make_cluster(f"cluster {text}", start=T0, id=cid, account="acc", user="u"),
        make_group(
            cid, f"group-{text}", prefix=text, dependencies=[text], states={text: 1},
            types=[text], durations={text: 0.5},
        ),
        make_span(cid, stable_id("s", i), name=["outer", text], enqueued_at=T0, code=[text]),
        make_computation(
            cid, i, started_at=T0, code=[text], annotations={"span": {"name": [[text]]}, text: text}
        ),
        make_error(
            cid, f"('{text}', 0)", at=T0, group=text, prefix=text,
            exception=f"ValueError('{text}')", traceback=text,
        ),
        make_event(cid, "x", T0, detail={"t": text}),
    ]  # fmt: skip


def stored(store: Store, ids: set[str]) -> dict[str, dict[str, Any]]:
    """The rows with these ids, from every table, as the database returns them."""
    out: dict[str, dict[str, Any]] = {}
    with store.engine.connect() as conn:
        for table in TABLES.values():
            for row in conn.execute(sa.select(table).where(table.c.id.in_(ids))).mappings():
                out[row["id"]] = dict(row)
    return out


def expected(records: list[model.Record]) -> dict[str, dict[str, Any]]:
    """What must be read back: every field as sent, text escaped (JSON turns tuples to
    lists)."""
    return {r.id: escape_value(model.record_to_dict(r)) for r in records}


def test_odd_text_is_stored_on_both_databases(store: Store) -> None:
    records = [r for i, text in enumerate(ODD) for r in odd_records(f"c{i}", text, i)]
    rejected: list[Rejected] = []
    assert write_records(store, records, rejected=rejected) == len(records)
    assert rejected == []
    assert stored(store, {r.id for r in records}) == expected(records)
    # nothing stored holds a character a database cannot hold
    with store.engine.connect() as conn:
        texts = conn.execute(sa.select(TABLES["errors"].c.exception)).scalars().all()
    assert all("\x00" not in t and escape_text(t) == t for t in texts)


def test_one_record_the_database_refuses_leaves_the_rest_of_the_batch(
    store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    good = [r for i, text in enumerate(ODD[:3]) for r in odd_records(f"c{i}", text, i)]
    # beyond a 64-bit integer: both databases refuse it, with nothing odd about its text
    too_big = make_group("c0", "g", id="too-big", prefix="p", nbytes_total=2**70)
    missing = dataclasses.replace(good[0], id="no-name")
    missing.name = None  # type: ignore[assignment]  # NOT NULL
    batch = [*good[:5], too_big, *good[5:], missing]
    rejected: list[Rejected] = []
    with caplog.at_level(logging.WARNING, logger="daskscope"):
        assert write_records(store, batch, rejected=rejected) == len(good)
    assert {(r.table, r.record_id) for r in rejected} == {
        ("task_groups", "too-big"),
        ("clusters", "no-name"),
    }
    assert all(r.reason for r in rejected)
    assert "too-big" in caplog.text and "no-name" in caplog.text
    assert stored(store, {r.id for r in batch}) == expected(good)


# -- through the server's ingest route -------------------------------------------------


def post(app: Any, body: bytes) -> httpx.Response:
    async def call() -> httpx.Response:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            headers = {"Content-Type": "application/json"}
            return await client.post("/api/v1/ingest", content=body, headers=headers)

    return asyncio.run(call())


def test_odd_text_through_ingest_and_a_number_no_database_holds(database_url: str) -> None:
    app = create_app(database_url)
    records = [r for i, text in enumerate(ODD) for r in odd_records(f"c{i}", text, i)]
    # beyond what a database holds
    too_big = make_group("c0", "g", id="too-big", prefix="p", nbytes_total=2**70)
    batch = [*records[:3], too_big, *records[3:]]
    body = encode_batch(batch)
    # a lone surrogate has no UTF-8 form: its batch travels escaped; without one, text
    # (NUL included, as JSON's \u0000) travels as it is and the store escapes it
    assert decode_batch(encode_batch(records[:6])) == records[:6]
    # the server names a number no database holds, and stores nothing of that batch
    response = post(app, body)
    assert response.status_code == 422, response.text
    assert "records[3].data.nbytes_total" in response.json()["error"]["message"]
    assert stored(app.state.store, {r.id for r in batch}) == {}
    # every odd text Dask allows goes through whole
    response = post(app, encode_batch(records))
    assert response.status_code == 200, response.text
    assert response.json() == {
        "stored": len(records),
        "records": len(records),
        "superseded": 0,
        "superseded_by_table": {},
        "rejected": [],
    }
    assert stored(app.state.store, {r.id for r in records}) == expected(records)
    app.state.store.close()


def test_a_lone_surrogate_escape_from_another_client_is_explained(tmp_path: Path) -> None:
    app = create_app(f"sqlite:///{tmp_path / 'server.db'}")
    body = encode_batch(odd_records("c", "x", 0)).replace(b'"cluster x"', b'"\\ud800"')
    response = post(app, body)
    assert response.status_code == 400
    assert "lone surrogate" in response.json()["error"]["message"]


def escaped(record: model.Record) -> model.Record:
    return type(record)(**escape_value(model.record_to_dict(record)))


# -- a real cluster whose keys, span tags and exceptions carry such text ----------------

#: key, span tag and exception text of one computation each (long text in keys and tags:
#: exception text is cut to max-code-chars by the recorder)
CLUSTER_TEXTS = ["nul\x00key", "lone\ud800high", "lone\udc00low", "😀\U0010ffff", "L" * 20_000]


def fail_with(x: int, text: str) -> int:
    raise ValueError(f"cannot {text[:50]}")


def inc(x: int) -> int:
    return x + 1


async def record_odd_cluster(**register: Any) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """Run tasks keyed, tagged and failing with odd text; return the cluster id, the
    flush status and Dask's own view (keys, group names, span names, exception text)."""
    async with (
        LocalCluster(
            n_workers=1,
            threads_per_worker=2,
            processes=False,
            asynchronous=True,
            dashboard_address=":0",
        ) as cluster,
        Client(cluster, asynchronous=True) as client,
    ):
        cluster_id = await daskscope.register(client, **register)
        futures = []
        for i, text in enumerate(CLUSTER_TEXTS):
            with distributed.span(f"tag {text}"):
                futures.append(client.submit(inc, i, key=f"ok-{text}"))
                futures.append(client.submit(fail_with, i, text, key=f"bad-{text}"))
        await distributed.wait(futures)
        status = await daskscope.flush(client)
        scheduler = cluster.scheduler
        tasks = [scheduler.tasks[f.key] for f in futures]
        truth = {
            "errors": {ts.key: ts.exception_text for ts in tasks if ts.state == "erred"},
            "groups": {ts.group.name for ts in tasks},
            "spans": {tuple(s.name) for s in scheduler.extensions["spans"].spans.values()},
        }
        assert len(truth["errors"]) == len(CLUSTER_TEXTS)
        return cluster_id, status, truth


def check_stored(store: Store, cluster_id: str, status: dict[str, Any], truth: dict) -> None:
    assert status["write_failures"] == 0, status["last_write_error"]
    with store.engine.connect() as conn:
        errors = {
            row.key: row.exception
            for row in conn.execute(
                sa.select(TABLES["errors"]).where(TABLES["errors"].c.cluster_id == cluster_id)
            )
        }
        groups = set(
            conn.execute(
                sa.select(TABLES["task_groups"].c.name).where(
                    TABLES["task_groups"].c.cluster_id == cluster_id
                )
            ).scalars()
        )
        spans = {
            tuple(name)
            for name in conn.execute(
                sa.select(TABLES["spans"].c.name).where(TABLES["spans"].c.cluster_id == cluster_id)
            ).scalars()
        }
    assert errors == {escape_text(k): escape_text(v) for k, v in truth["errors"].items()}
    assert groups == {escape_text(g) for g in truth["groups"]}
    assert spans == {tuple(escape_text(part) for part in name) for name in truth["spans"]}


def test_a_cluster_with_odd_text_is_recorded_whole(database_url: str) -> None:
    cluster_id, status, truth = asyncio.run(record_odd_cluster(database=database_url))
    with open_store(database_url) as store:
        check_stored(store, cluster_id, status, truth)


def test_a_cluster_with_odd_text_is_recorded_through_the_server(tmp_path: Path) -> None:
    from test_ingest import Server, free_port

    url = f"sqlite:///{tmp_path / 'server.db'}"
    open_store(url).close()
    server = Server(url, free_port(), tmp_path / "server.log")
    server.start()
    try:
        cluster_id, status, truth = asyncio.run(
            record_odd_cluster(server=server.url, spool_dir=str(tmp_path / "spool"))
        )
    finally:
        server.stop()
    assert status["spooled"] == 0 and status["rejected_batches"] == 0
    with open_store(url) as store:
        check_stored(store, cluster_id, status, truth)
