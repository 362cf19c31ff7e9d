"""The store on real SQLite and PostgreSQL databases: schema, writes, queries, errors."""

from __future__ import annotations

import ast
import dataclasses
import json
import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext

import daskscope.store as store_api
from daskscope import model
from daskscope.analysis import fine_metrics_table
from daskscope.model import ClusterRecord, TaskGroupRecord, WorkerSampleRecord, stable_id
from daskscope.shape import Column, record_fields
from daskscope.store import (
    AmbiguousCluster,
    BadDatabaseURL,
    DatabaseUnreachable,
    NotADaskscopeDatabase,
    RecordConflict,
    SchemaTooNew,
    UnknownCluster,
    cluster_detail,
    list_clusters,
    open_store,
    profile_trees,
    resolve_cluster_id,
    table_counts,
    worker_samples,
    write_records,
)
from daskscope.store.schema import TABLE_FOR, TABLES, metadata
from factories import (
    GIB,
    T0,
    make_cluster,
    make_span_metric,
    make_worker_sample,
    recorded_cluster,
)


def stored_rows(store: store_api.Store) -> dict[str, dict[str, dict]]:
    """Every row of every table, keyed by table name and id."""
    with store.engine.connect() as conn:
        return {
            name: {r["id"]: dict(r) for r in conn.execute(sa.select(table)).mappings()}
            for name, table in TABLES.items()
        }


def expected_rows(records: list[model.Record]) -> dict[str, dict[str, dict]]:
    rows: dict[str, dict[str, dict]] = {name: {} for name in TABLES}
    for record in records:
        rows[TABLE_FOR[type(record)].name][record.id] = model.record_to_dict(record)
    return rows


# ---------------------------------------------------------------- schema


def test_migrations_create_exactly_the_schema_module(store: store_api.Store) -> None:
    with store.engine.connect() as conn:
        context = MigrationContext.configure(conn, opts={"compare_type": True})
        assert compare_metadata(context, metadata) == []
    assert store.current_revision() == store.head_revision()


def test_tables_have_one_column_per_record_field() -> None:
    assert set(TABLE_FOR) == set(model.RECORD_TYPES.values())
    for cls, table in TABLE_FOR.items():
        assert [f.name for f in dataclasses.fields(cls)] == list(table.columns.keys())
        assert list(table.primary_key.columns.keys()) == ["id"]


def test_every_table_is_declared_in_the_schema_module_alone() -> None:
    # no import side effect: the tables the migrations make are declared in schema.py,
    # never registered by the module that uses them (identity, alerts, retention, ...);
    # the store package imports its modules for the Store's methods, so this reads the
    # sources rather than sys.modules
    store_dir = Path(store_api.__file__).parent

    def tables_declared(path: Path) -> set[str]:
        found = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "Table"
                and node.args
                and isinstance(node.args[0], ast.Constant)
            ):
                found.add(node.args[0].value)
        return found

    in_schema = tables_declared(store_dir / "schema.py")
    assert {"accounts", "users", "tokens", "sessions", "alerts", "retention_policies"} <= in_schema
    for path in store_dir.glob("*.py"):
        if path.name != "schema.py":
            assert not tables_declared(path), path.name
    script = "from daskscope.store.schema import metadata; print(sorted(metadata.tables))"
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    ).stdout
    assert in_schema <= set(ast.literal_eval(out))


def test_columns_follow_the_declared_shapes() -> None:
    for cls, table in TABLE_FOR.items():
        for f in record_fields(cls):
            column = table.c[f.name]
            assert column.nullable == (f.optional or f.shape.nullable), f.name
            assert column.primary_key == f.shape.primary_key, f.name
        indexed = {
            c.name
            for index in table.indexes
            for c in index.columns
            if not _length_bounded(index, c.name)
        }
        for f in record_fields(cls):
            # text the store indexes must be short on the wire, or PostgreSQL refuses it
            # (unless the index takes only rows where it is short)
            if f.name in indexed and f.shape.column is Column.STRING:
                assert f.shape.short, f"{cls.__name__}.{f.name}"


def _length_bounded(index: sa.Index, column: str) -> bool:
    """A partial index that holds ``column`` only where it is at most 200 characters
    long (on both databases), as ``ix_task_groups_span_prefix`` does."""
    bound = rf"length\({index.table.name}\.{column}\) <= (\d+)"
    found = [
        re.fullmatch(bound, str(index.dialect_options[dialect]["where"]))
        for dialect in ("sqlite", "postgresql")
    ]
    return all(m is not None and int(m[1]) <= 200 for m in found)


def test_public_api() -> None:
    for name in store_api.__all__:
        assert hasattr(store_api, name), name


# ---------------------------------------------------------------- writing


def test_every_kind_round_trips(store: store_api.Store) -> None:
    records = recorded_cluster(make_cluster())
    assert write_records(store, records) == len(records)
    assert stored_rows(store) == expected_rows(records)


def test_same_batch_twice_is_stored_once_and_new_values_win(store: store_api.Store) -> None:
    cluster = make_cluster()
    records = recorded_cluster(cluster)
    write_records(store, records)
    counts = table_counts(store)
    updated = dataclasses.replace(cluster, last_seen_at=T0 + 7200.0, tasks_executed=2**40)
    samples = [r for r in records if isinstance(r, WorkerSampleRecord)]
    newer = dataclasses.replace(samples[0], memory=None, cpu_percent=99.5)
    write_records(store, [*records[1:], updated, newer])
    assert table_counts(store) == counts
    rows = stored_rows(store)
    assert rows["clusters"][cluster.id]["stopped_at"] == cluster.stopped_at
    assert rows["clusters"][cluster.id]["tasks_executed"] == 2**40
    assert rows["worker_samples"][newer.id] == model.record_to_dict(newer)


def test_duplicates_within_one_batch_keep_the_last(store: store_api.Store) -> None:
    first = make_cluster(name="first")
    last = dataclasses.replace(first, name="last")
    assert write_records(store, [first, last]) == 1
    assert [c["name"] for c in list_clusters(store)] == ["last"]


def test_a_refused_record_leaves_the_rest_of_its_batch(store: store_api.Store) -> None:
    good = recorded_cluster(make_cluster())
    write_records(store, good)
    other = recorded_cluster(make_cluster("other", start=T0 + 86_400))
    changed = dataclasses.replace(good[0], name="renamed")
    # started_at is NOT NULL: both databases refuse this one record, and only it
    broken = dataclasses.replace(other[1], id="broken", started_at=None)
    rejected: list[store_api.Rejected] = []
    assert write_records(store, [changed, *other, broken], rejected=rejected) == len(other) + 1
    assert [(r.table, r.record_id) for r in rejected] == [("computations", "broken")]
    assert "started_at" in rejected[0].reason
    assert stored_rows(store) == expected_rows([changed, *good[1:], *other])


def test_a_record_moving_to_another_cluster_fails_the_whole_batch(
    store: store_api.Store,
) -> None:
    good = recorded_cluster(make_cluster())
    write_records(store, good)
    before = stored_rows(store)
    other = recorded_cluster(make_cluster("other", start=T0 + 86_400))
    moved = dataclasses.replace(good[1], cluster_id=other[0].id)  # an id of another cluster
    with pytest.raises(RecordConflict, match="nothing of this batch was stored") as info:
        write_records(store, [*other, moved])
    assert not info.value.retryable
    assert info.value.record_id == moved.id
    assert stored_rows(store) == before


def test_large_batch_is_chunked_in_one_transaction(store: store_api.Store) -> None:
    cid = stable_id("big")
    samples = [
        make_worker_sample(
            cid, f"tcp://w{i % 50}:1", T0 + i, id=stable_id(cid, i), nthreads=2, memory=i * 1024
        )
        for i in range(12_000)
    ]
    assert write_records(store, samples) == 12_000
    assert table_counts(store, cid)["worker_samples"] == 12_000
    assert write_records(store, []) == 0


def test_write_accepts_an_engine(store: store_api.Store) -> None:
    assert write_records(store.engine, [make_cluster()]) == 1


# ---------------------------------------------------------------- queries


@pytest.fixture
def three_clusters(store: store_api.Store) -> list[ClusterRecord]:
    clusters = [
        make_cluster("a", start=T0),
        make_cluster("b", start=T0 + 100, user="bob", stopped_at=None, last_seen_at=T0 + 160),
        make_cluster("c", start=T0 + 200, account="cms"),
    ]
    write_records(store, [r for c in clusters for r in recorded_cluster(c)])
    return clusters


def test_list_clusters(store: store_api.Store, three_clusters: list[ClusterRecord]) -> None:
    listed = list_clusters(store)
    assert [c["name"] for c in listed] == ["c", "b", "a"]
    assert listed[1]["duration_s"] == pytest.approx(60.0)
    assert listed[0]["duration_s"] == pytest.approx(3600.5)
    assert listed[2]["bytes_processed"] == 5 * 2**40
    assert [c["name"] for c in list_clusters(store, limit=1)] == ["c"]
    assert [c["name"] for c in list_clusters(store, account="atlas")] == ["b", "a"]
    assert [c["name"] for c in list_clusters(store, user="bob")] == ["b"]
    assert [c["name"] for c in list_clusters(store, since=T0 + 50, until=T0 + 200)] == ["b"]
    json.dumps(listed)


def test_resolve_cluster_id(store: store_api.Store, three_clusters: list[ClusterRecord]) -> None:
    full = three_clusters[0].id
    assert resolve_cluster_id(store, full) == full
    assert resolve_cluster_id(store, full[:8]) == full
    with pytest.raises(UnknownCluster, match="no cluster with id") as unknown:
        resolve_cluster_id(store, "ffff-no-such-cluster")
    assert unknown.value.cluster_id == "ffff-no-such-cluster"  # the CLI adds its own hint
    with pytest.raises(UnknownCluster, match="at least 4"):
        resolve_cluster_id(store, full[:3])
    twins = [make_cluster(f"twin{i}", id=f"abcd{i}000-twin", start=T0 + 500 + i) for i in (1, 2)]
    write_records(store, twins)
    with pytest.raises(AmbiguousCluster, match="abcd1000-twin, abcd2000-twin") as info:
        resolve_cluster_id(store, "abcd")
    assert info.value.candidates == ["abcd1000-twin", "abcd2000-twin"]
    assert resolve_cluster_id(store, "abcd2") == "abcd2000-twin"
    # LIKE wildcards in the prefix are literal characters
    with pytest.raises(UnknownCluster):
        resolve_cluster_id(store, "abc%")


def test_cluster_detail(store: store_api.Store, three_clusters: list[ClusterRecord]) -> None:
    cluster = three_clusters[0]
    records = recorded_cluster(cluster)
    detail = cluster_detail(store, cluster.id)
    json.dumps(detail)
    assert detail["cluster"]["name"] == "a"
    assert detail["cluster"]["duration_s"] == pytest.approx(3600.5)
    (comp,) = detail["computations"]
    assert comp["task_groups"] == ["random_sample-5d7e", "sum-aggregate-9f1a"]
    assert comp["annotations"] == {"retries": 2, "span": {"name": [["load"], ["reduce"]]}}
    assert [g["name"] for g in detail["task_groups"]] == comp["task_groups"]
    assert [p["name"] for p in detail["task_prefixes"]] == ["random_sample", "sum-aggregate"]
    assert [s["name"] for s in detail["spans"]] == [["default"]]
    assert {m["activity"] for m in detail["fine_metrics"]} >= {"thread-cpu", "memory-read"}
    assert [e["kind"] for e in detail["events"]] == [
        "cluster-started", "worker-added", "cluster-closed",
    ]  # fmt: skip
    assert [e["key"] for e in detail["errors"]] == [
        "('sum-aggregate-9f1a', 3)", "('sum-aggregate-9f1a', 7)",
    ]  # fmt: skip
    assert detail["workers"] == [
        {
            "worker": "tcp://10.0.0.6:40001", "first_sample_at": T0, "last_sample_at": T0 + 10.0,
            "peak_memory": 2 * GIB + 12_345, "samples": 3, "nthreads": 4, "memory_limit": 16 * GIB,
            # the last sample's memory split and other metrics (none recorded here)
            "memory": 2 * GIB + 12_345, "managed_bytes": 2 * GIB, "unmanaged_bytes": None,
            "spilled_bytes": 0, "metrics": {},
        },
        {
            "worker": "tcp://10.0.0.7:40001", "first_sample_at": T0, "last_sample_at": T0 + 10.0,
            "peak_memory": 3 * GIB + 12_345, "samples": 3, "nthreads": 4, "memory_limit": 16 * GIB,
            "memory": 3 * GIB + 12_345, "managed_bytes": 2 * GIB, "unmanaged_bytes": None,
            "spilled_bytes": 0, "metrics": {},
        },
    ]  # fmt: skip
    assert [set(p) for p in detail["profiles"]] == [
        {"id", "started_at", "stopped_at", "samples"}
    ] * 3
    assert [p["samples"] for p in detail["profiles"]] == [500, 560, 620]
    # nothing of another cluster leaks in
    assert len(detail["task_groups"]) == sum(isinstance(r, TaskGroupRecord) for r in records)
    with pytest.raises(UnknownCluster):
        cluster_detail(store, "no-such-id")


def test_cluster_detail_sums_fine_metrics_as_python_would(
    store: store_api.Store, three_clusters: list[ClusterRecord]
) -> None:
    from daskscope.store.analytics import span_rows

    cluster = three_clusters[0]
    extra = make_span_metric(
        cluster, "another-span", "random_sample", "thread-cpu", "seconds", 0.125, id="extra-metric"
    )
    write_records(store, [extra])  # the same key in a second span: summed with the first
    full = cluster_detail(store, cluster.id)
    page = cluster_detail(store, cluster.id, max_groups=0)
    assert page["task_groups"] == [] and page["computations"] == full["computations"]
    _, span_metrics = span_rows(store, cluster.id)
    expected = fine_metrics_table(span_metrics)
    assert len(expected) == 4 < len(span_metrics)
    assert [{**r, "value": pytest.approx(r["value"])} for r in expected] == page["fine_metrics"]
    for key in ("cluster", "task_prefixes", "spans", "errors", "events", "workers", "profiles"):
        assert page[key] == full[key]


def test_worker_samples_and_profile_trees(
    store: store_api.Store, three_clusters: list[ClusterRecord]
) -> None:
    cid = three_clusters[1].id
    samples = worker_samples(store, cid)
    assert [s["sampled_at"] for s in samples] == sorted(s["sampled_at"] for s in samples)
    assert len(samples) == 6
    t = three_clusters[1].started_at
    assert len(profile_trees(store, cid)) == 3
    windows = profile_trees(store, cid, start=t + 70, stop=t + 130)
    assert [p["started_at"] for p in windows] == [t + 60, t + 120]
    assert windows[0]["tree"]["children"]["kernel;analysis.py;12"]["count"] == 480
    assert profile_trees(store, cid, start=t + 1000) == []


def test_table_counts(store: store_api.Store, three_clusters: list[ClusterRecord]) -> None:
    per_cluster = table_counts(store, three_clusters[0].id)
    assert per_cluster == {
        "clusters": 1, "computations": 1, "task_groups": 2, "task_prefixes": 2, "spans": 1,
        "span_metrics": 4, "fine_metric_intervals": 0, "worker_samples": 6, "events": 3,
        "errors": 2, "profiles": 3,
        "workflow_runs": 0, "workflow_chunks": 0, "task_segments": 0,
    }  # fmt: skip
    assert table_counts(store) == {k: 3 * v for k, v in per_cluster.items()}


# ---------------------------------------------------------------- opening


def test_reopening_keeps_the_data(database_url: str) -> None:
    records = recorded_cluster(make_cluster())
    with open_store(database_url) as first:
        write_records(first, records)
    for _ in range(2):
        with open_store(database_url) as again:
            assert again.current_revision() == again.head_revision()
            assert stored_rows(again) == expected_rows(records)


def test_open_without_upgrade_leaves_an_empty_database_empty(database_url: str) -> None:
    with open_store(database_url, upgrade=False) as opened:
        assert opened.current_revision() is None
        assert sa.inspect(opened.engine).get_table_names() == []


@pytest.mark.parametrize("url", ["foo", "mysql://me@db/x", "postgresql+psycopg2://me@db/x"])
def test_bad_url(url: str) -> None:
    with pytest.raises(BadDatabaseURL, match=r"; use .*postgresql://"):
        open_store(url)


def test_unreachable_postgres_hides_the_password(unused_port: int) -> None:
    url = f"postgresql://me:s3cret@127.0.0.1:{unused_port}/x"
    with pytest.raises(DatabaseUnreachable) as info:
        open_store(url)
    message = str(info.value)
    assert "connection refused" in message
    assert "check that the server is running" in message
    assert "s3cret" not in message and "\n" not in message


def test_postgres_url_forms_use_psycopg(postgres_url: str) -> None:
    rest = postgres_url.split("://", 1)[1]
    for scheme in ("postgresql", "postgres"):
        with open_store(f"{scheme}://{rest}") as opened:
            assert opened.engine.url.drivername == "postgresql+psycopg"
            assert opened.current_revision() == opened.head_revision()


def test_corrupt_sqlite_file_is_refused_and_untouched(tmp_path: Path) -> None:
    path = tmp_path / "random.db"
    content = os.urandom(64 * 1024)
    path.write_bytes(content)
    with pytest.raises(NotADaskscopeDatabase, match="move the file aside") as info:
        open_store(f"sqlite:///{path}")
    assert "file is not a database" in str(info.value)
    assert path.read_bytes() == content
    assert sorted(p.name for p in tmp_path.iterdir()) == ["random.db"]


def test_foreign_sqlite_database_is_refused_and_untouched(tmp_path: Path) -> None:
    path = tmp_path / "other.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE clusters (name TEXT)")
        conn.execute("INSERT INTO clusters VALUES ('theirs')")
    conn.close()
    content = path.read_bytes()
    with pytest.raises(NotADaskscopeDatabase, match="holds other tables"):
        open_store(f"sqlite:///{path}")
    assert path.read_bytes() == content


def test_database_of_another_application_is_refused(database_url: str) -> None:
    if database_url.startswith("sqlite:///"):
        Path(database_url.removeprefix("sqlite:///")).parent.mkdir(parents=True)
    engine = sa.create_engine(database_url)
    with engine.begin() as conn:
        conn.execute(sa.text("CREATE TABLE inventory (item TEXT)"))
    with pytest.raises(NotADaskscopeDatabase, match="is not a daskscope database") as info:
        open_store(database_url)
    # the error states the fact and carries the URL; the CLI adds its own hint
    assert "--database" not in str(info.value)
    assert info.value.data()["url"] == info.value.url and "inventory" not in info.value.url
    assert sa.inspect(engine).get_table_names() == ["inventory"]
    engine.dispose()


def test_newer_schema_asks_to_upgrade_daskscope(database_url: str) -> None:
    with open_store(database_url) as opened:
        write_records(opened, [make_cluster()])
        with opened.engine.begin() as conn:
            conn.execute(sa.text("UPDATE alembic_version SET version_num = '9999'"))
    with pytest.raises(SchemaTooNew, match="upgrade daskscope"):
        open_store(database_url)


def test_sqlite_uses_wal(tmp_path: Path) -> None:
    with open_store(f"sqlite:///{tmp_path / 'deep' / 'er' / 'x.db'}") as opened:
        with opened.engine.connect() as conn:
            assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
            assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar() == 30000
        assert "sqlite" in repr(opened)


def test_fast_path_revision_is_the_migrations_head(tmp_path: Path) -> None:
    from daskscope.store.engine import HEAD_REVISION

    with open_store(f"sqlite:///{tmp_path / 'head.db'}") as store:
        assert store.head_revision() == HEAD_REVISION == store.current_revision()
