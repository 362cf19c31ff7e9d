"""The store on real SQLite and PostgreSQL databases: schema, writes, queries, errors."""

from __future__ import annotations

import dataclasses
import json
import os
import sqlite3
from pathlib import Path

import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext

import daskscope.store as store_api
from daskscope import model
from daskscope.analysis import fine_metrics_table
from daskscope.model import (
    ClusterRecord,
    ComputationRecord,
    ErrorRecord,
    EventRecord,
    ProfileRecord,
    SpanMetricRecord,
    SpanRecord,
    TaskGroupRecord,
    TaskPrefixRecord,
    WorkerSampleRecord,
    stable_id,
)
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

T0 = 1_767_225_600.123456  # 2026-01-01T00:00:00.123456Z: sub-second detail must survive
GIB = 2**30


# ---------------------------------------------------------------- record builders


def cluster_record(
    name: str = "analysis", *, start: float = T0, **changes: object
) -> ClusterRecord:
    values = dict(
        id=stable_id("cluster", "tcp://10.0.0.5:8786", start),
        name=name,
        account="atlas",
        user="alice",
        scheduler_address="tcp://10.0.0.5:8786",
        dask_version="2026.8.0",
        distributed_version="2026.8.0",
        python_version="3.11.9",
        started_at=start,
        stopped_at=start + 3600.5,
        last_seen_at=start + 3600.5,
        workers_peak=4,
        threads_peak=16,
        memory_limit_peak=4 * 16 * GIB,
        core_seconds=16 * 3600.5,
        memory_limit_byte_seconds=4 * 16 * GIB * 3600.5,
        tasks_executed=123_456,
        tasks_erred=2,
        compute_seconds=40_000.25,
        bytes_processed=5 * 2**40,  # 5 TiB: far beyond 32-bit integers
    )
    values.update(changes)
    return ClusterRecord(**values)


def cluster_records(cluster: ClusterRecord) -> list[model.Record]:
    """One record of every kind (several of some) belonging to ``cluster``."""
    cid, t = cluster.id, cluster.started_at
    comp = ComputationRecord(
        id=stable_id(cid, "computation", 0),
        cluster_id=cid,
        started_at=t + 1.5,
        stopped_at=t + 61.25,
        code=["import dask.array as da\nx = da.random.random((10_000, 10_000))\nx.sum().compute()"],
        annotations={"retries": 2, "span": {"name": [["load"], ["reduce"]]}},
        tasks_executed=1_100,
        tasks_erred=2,
        group_count=2,
    )
    span_id = "b6c9e2f0-0c4a-4cf5-9f7e-7f0e2c1d9a11"
    groups = [
        TaskGroupRecord(
            id=stable_id(cid, "group", name),
            cluster_id=cid,
            name=name,
            prefix=prefix,
            computation_id=comp.id,
            span_id=span_id,
            dependencies=deps,
            states={"memory": n, "erred": erred, "released": 0},
            tasks_total=n,
            tasks_executed=n - erred,
            tasks_erred=erred,
            nbytes_total=n * 80 * 2**20,
            duration_s=n * 0.05,
            durations={"compute": n * 0.045, "transfer": n * 0.005, "deserialize": 0.0},
            types=["numpy.ndarray"],
            started_at=t + 2.0 + i,
            stopped_at=t + 60.0,
        )
        for i, (name, prefix, deps, n, erred) in enumerate(
            [
                ("random_sample-5d7e", "random_sample", [], 1_000, 0),
                ("sum-aggregate-9f1a", "sum-aggregate", ["random_sample-5d7e"], 100, 2),
            ]
        )
    ]
    prefixes = [
        TaskPrefixRecord(
            id=stable_id(cid, "prefix", g.prefix),
            cluster_id=cid,
            name=g.prefix,
            group_count=1,
            tasks_executed=g.tasks_executed,
            tasks_erred=g.tasks_erred,
            nbytes_total=g.nbytes_total,
            duration_s=g.duration_s,
            durations=dict(g.durations),
        )
        for g in groups
    ]
    span = SpanRecord(
        id=stable_id(cid, "span", span_id),
        cluster_id=cid,
        span_id=span_id,
        parent_span_id=None,
        name=["default"],
        enqueued_at=t + 1.0,
        started_at=t + 2.0,
        stopped_at=t + 60.0,
        done=True,
        states={"memory": 1_098, "erred": 2},
        nbytes_total=sum(g.nbytes_total for g in groups),
        duration_s=55.0,
        durations={"compute": 49.5, "transfer": 5.5},
        active_cpu_seconds=49.75,
        code=["x.sum().compute()"],
        group_count=2,
    )
    metrics = [
        SpanMetricRecord(
            id=stable_id(cid, "metric", span_id, "execute", prefix, activity, unit),
            cluster_id=cid,
            span_id=span_id,
            context="execute",
            prefix=prefix,
            activity=activity,
            unit=unit,
            value=value,
        )
        for prefix, activity, unit, value in [
            ("random_sample", "thread-cpu", "seconds", 44.125),
            ("random_sample", "thread-noncpu", "seconds", 0.875),
            ("random_sample", "memory-read", "bytes", 3.0 * 2**33),
            ("N/A", "idle or other spans", "seconds", 12.5),
        ]
    ]
    samples = [
        WorkerSampleRecord(
            id=stable_id(cid, "sample", worker, t + k * 5.0),
            cluster_id=cid,
            worker=worker,
            sampled_at=t + k * 5.0,
            nthreads=4,
            memory_limit=16 * GIB,
            memory=(k + w) * GIB + 12_345,
            managed_bytes=k * GIB,
            spilled_bytes=None if k == 0 else 0,
            cpu_percent=[0.0, 395.5, 12.25][k],
            executing=[0, 4, 1][k],
            processing=[0, 12, 3][k],
            transfer_incoming_bytes=0,
            transfer_outgoing_bytes=k * 2**20,
            net_read_bps=1.5e6 * k,
            net_write_bps=None,
            disk_read_bps=0.0,
            disk_write_bps=2.5e7,
        )
        for w, worker in enumerate(["tcp://10.0.0.6:40001", "tcp://10.0.0.7:40001"])
        for k in range(3)
    ]
    events = [
        EventRecord(
            id=stable_id(cid, "event", kind, worker, at),
            cluster_id=cid,
            at=at,
            kind=kind,
            worker=worker,
            detail=detail,
        )
        for at, kind, worker, detail in [
            (t, "cluster-started", None, {"address": "tcp://10.0.0.5:8786"}),
            (t + 0.5, "worker-added", "tcp://10.0.0.6:40001", {"nthreads": 4, "limit": 16 * GIB}),
            (t + 3600.5, "cluster-closed", None, {}),
        ]
    ]  # fmt: skip
    errors = [
        ErrorRecord(
            id=stable_id(cid, "error", key),
            cluster_id=cid,
            key=key,
            at=t + 30.0 + i,
            group="sum-aggregate-9f1a",
            group_id=groups[1].id,
            prefix="sum-aggregate",
            worker="tcp://10.0.0.7:40001",
            exception="ZeroDivisionError('division by zero')",
            traceback='  File "analysis.py", line 12, in kernel\n    return a / b\n' * 20,
        )
        for i, key in enumerate(["('sum-aggregate-9f1a', 3)", "('sum-aggregate-9f1a', 7)"])
    ]
    tree = {
        "identifier": "root",
        "count": 500,
        "description": {"filename": "", "name": "", "line_number": 0, "line": ""},
        "children": {
            "kernel;analysis.py;12": {
                "identifier": "kernel;analysis.py;12",
                "count": 480,
                "description": {
                    "filename": "analysis.py",
                    "name": "kernel",
                    "line_number": 12,
                    "line": "return a / b",
                },
                "children": {},
            }
        },
    }
    profiles = [
        ProfileRecord(
            id=stable_id(cid, "profile", t + start),
            cluster_id=cid,
            started_at=t + start,
            stopped_at=t + start + 60.0,
            samples=500 + start,
            tree=tree,
        )
        for start in (0, 60, 120)
    ]
    return [
        cluster, comp, *groups, *prefixes, span, *metrics, *samples, *events, *errors, *profiles,
    ]  # fmt: skip


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


def test_public_api() -> None:
    for name in store_api.__all__:
        assert hasattr(store_api, name), name


# ---------------------------------------------------------------- writing


def test_every_kind_round_trips(store: store_api.Store) -> None:
    records = cluster_records(cluster_record())
    assert write_records(store, records) == len(records)
    assert stored_rows(store) == expected_rows(records)


def test_same_batch_twice_is_stored_once_and_new_values_win(store: store_api.Store) -> None:
    cluster = cluster_record()
    records = cluster_records(cluster)
    write_records(store, records)
    counts = table_counts(store)
    updated = dataclasses.replace(
        cluster, stopped_at=None, last_seen_at=T0 + 7200.0, tasks_executed=2**40
    )
    samples = [r for r in records if isinstance(r, WorkerSampleRecord)]
    newer = dataclasses.replace(samples[0], memory=None, cpu_percent=99.5)
    write_records(store, [*records[1:], updated, newer])
    assert table_counts(store) == counts
    rows = stored_rows(store)
    assert rows["clusters"][cluster.id]["stopped_at"] is None
    assert rows["clusters"][cluster.id]["tasks_executed"] == 2**40
    assert rows["worker_samples"][newer.id] == model.record_to_dict(newer)


def test_duplicates_within_one_batch_keep_the_last(store: store_api.Store) -> None:
    first = cluster_record(name="first")
    last = dataclasses.replace(first, name="last")
    assert write_records(store, [first, last]) == 1
    assert [c["name"] for c in list_clusters(store)] == ["last"]


def test_a_refused_record_leaves_the_rest_of_its_batch(store: store_api.Store) -> None:
    good = cluster_records(cluster_record())
    write_records(store, good)
    other = cluster_records(cluster_record("other", start=T0 + 86_400))
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
    good = cluster_records(cluster_record())
    write_records(store, good)
    before = stored_rows(store)
    other = cluster_records(cluster_record("other", start=T0 + 86_400))
    moved = dataclasses.replace(good[1], cluster_id=other[0].id)  # an id of another cluster
    with pytest.raises(RecordConflict, match="nothing of this batch was stored") as info:
        write_records(store, [*other, moved])
    assert not info.value.retryable
    assert info.value.record_id == moved.id
    assert stored_rows(store) == before


def test_large_batch_is_chunked_in_one_transaction(store: store_api.Store) -> None:
    cid = stable_id("big")
    samples = [
        WorkerSampleRecord(
            id=stable_id(cid, i), cluster_id=cid, worker=f"tcp://w{i % 50}:1", sampled_at=T0 + i,
            nthreads=2, memory=i * 1024,
        )
        for i in range(12_000)
    ]  # fmt: skip
    assert write_records(store, samples) == 12_000
    assert table_counts(store, cid)["worker_samples"] == 12_000
    assert write_records(store, []) == 0


def test_write_accepts_an_engine(store: store_api.Store) -> None:
    assert write_records(store.engine, [cluster_record()]) == 1


# ---------------------------------------------------------------- queries


@pytest.fixture
def three_clusters(store: store_api.Store) -> list[ClusterRecord]:
    clusters = [
        cluster_record("a", start=T0),
        cluster_record("b", start=T0 + 100, user="bob", stopped_at=None, last_seen_at=T0 + 160),
        cluster_record("c", start=T0 + 200, account="cms"),
    ]
    write_records(store, [r for c in clusters for r in cluster_records(c)])
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
    with pytest.raises(UnknownCluster, match="daskscope clusters"):
        resolve_cluster_id(store, "ffff-no-such-cluster")
    with pytest.raises(UnknownCluster, match="at least 4"):
        resolve_cluster_id(store, full[:3])
    twins = [cluster_record(f"twin{i}", id=f"abcd{i}000-twin", start=T0 + 500 + i) for i in (1, 2)]
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
    records = cluster_records(cluster)
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
    assert len(detail["span_metrics"]) == 4
    assert {m["activity"] for m in detail["span_metrics"]} >= {"thread-cpu", "memory-read"}
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


def test_compact_cluster_detail_is_the_full_one_summed(
    store: store_api.Store, three_clusters: list[ClusterRecord]
) -> None:
    cluster = three_clusters[0]
    extra = SpanMetricRecord(
        id="extra-metric", cluster_id=cluster.id, span_id="another-span", context="execute",
        prefix="random_sample", activity="thread-cpu", unit="seconds", value=0.125,
    )  # fmt: skip
    write_records(store, [extra])  # the same key in a second span: summed with the first
    full = cluster_detail(store, cluster.id)
    compact = cluster_detail(store, cluster.id, compact=True)
    assert compact["task_groups"] == [] and compact["span_metrics"] == []
    assert compact["computations"] == full["computations"]
    expected = fine_metrics_table(full["span_metrics"])
    assert len(expected) == 4 < len(full["span_metrics"])
    assert [{**r, "value": pytest.approx(r["value"])} for r in expected] == compact["fine_metrics"]
    for key in ("cluster", "task_prefixes", "spans", "errors", "events", "workers", "profiles"):
        assert compact[key] == full[key]


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
        "span_metrics": 4, "worker_samples": 6, "events": 3, "errors": 2, "profiles": 3,
        "workflow_runs": 0, "workflow_chunks": 0,
    }  # fmt: skip
    assert table_counts(store) == {k: 3 * v for k, v in per_cluster.items()}


# ---------------------------------------------------------------- opening


def test_reopening_keeps_the_data(database_url: str) -> None:
    records = cluster_records(cluster_record())
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
    with pytest.raises(NotADaskscopeDatabase, match="pass another --database"):
        open_store(database_url)
    assert sa.inspect(engine).get_table_names() == ["inventory"]
    engine.dispose()


def test_newer_schema_asks_to_upgrade_daskscope(database_url: str) -> None:
    with open_store(database_url) as opened:
        write_records(opened, [cluster_record()])
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
