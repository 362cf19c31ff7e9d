"""Retention of the task log on SQLite and PostgreSQL: real recorded clusters, aged;
``daskscope prune --dry-run`` changes nothing and counts what an independent count
finds; ``daskscope prune`` removes exactly the task log past each account's policy, and
every other row of every table is as it was; a pruned cluster's timeline says so."""

from __future__ import annotations

import datetime as dt
import json
import time
import uuid
from typing import Any

import dask
import dask.bag as db
import pytest
import sqlalchemy as sa
from click.testing import CliRunner
from distributed import Client, LocalCluster
from fastapi.testclient import TestClient

import daskscope
from conftest import _admin
from daskscope.cli.main import cli
from daskscope.store import open_store
from daskscope.store import schema as s
from daskscope.store.identity import add_user, create_account
from daskscope.store.partitions import create_partition, is_partitioned, month_of, month_partition
from daskscope.store.retention import (
    RetentionError,
    expired_clusters,
    prune_task_log,
    pruned_task_log,
    set_task_log_days,
    task_log_days,
)
from daskscope.store.schema import PARTITION_SCHEMA
from daskscope.views.timeline import timeline_view
from daskscope.web.app import create_app

DAY = 86400.0
#: How many days ago each recorded cluster ended, and its account
AGES = {"physics-old": 100, "physics-new": 5, "astro-old": 200, "astro-ancient": 500}


def record(url: str, account: str, tasks: int) -> str:
    with (
        LocalCluster(
            n_workers=1, threads_per_worker=2, processes=False, dashboard_address=":0"
        ) as cluster,
        Client(cluster) as client,
    ):
        cluster_id = daskscope.register(client, database=url, account=account)
        assert (
            db.from_sequence(range(tasks), npartitions=tasks).map(lambda x: x + 1).sum().compute()
        )
        daskscope.flush(client)
    return str(cluster_id)


def age(url: str, cluster_id: str, days: float) -> None:
    """Move the cluster's times back so that it ended ``days`` ago."""
    with open_store(url) as store, store.engine.begin() as conn:
        end = conn.execute(
            sa.select(sa.func.coalesce(s.clusters.c.stopped_at, s.clusters.c.last_seen_at)).where(
                s.clusters.c.id == cluster_id
            )
        ).scalar_one()
        shift = end - (time.time() - days * DAY)
        c = s.clusters.c
        conn.execute(
            s.clusters.update()
            .where(c.id == cluster_id)
            .values(
                started_at=c.started_at - shift,
                stopped_at=c.stopped_at - shift,
                last_seen_at=c.last_seen_at - shift,
            )
        )


def dump(url: str) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every daskscope table, sorted: what must not change."""
    with open_store(url) as store, store.engine.connect() as conn:
        out = {}
        for table in s.metadata.sorted_tables:
            rows = conn.execute(sa.select(table)).all()
            out[table.name] = sorted((tuple(r) for r in rows), key=repr)
        return out


@pytest.fixture
def recorded(database_url: str) -> dict[str, Any]:
    ids = {}
    for n, name in enumerate(AGES):
        ids[name] = record(database_url, name.split("-")[0], tasks=10 + n)
    with open_store(database_url) as store:
        create_account(store, "physics")
        add_user(store, "ada", account="physics", admin=True)
        add_user(store, "bob", account="physics")
        with pytest.raises(RetentionError, match="not an admin"):
            set_task_log_days(store, "physics", 30, by="bob")
        with pytest.raises(RetentionError, match="positive number of days"):
            set_task_log_days(store, "physics", -1, by="ada")
        set_task_log_days(store, "physics", 30, by="ada")
    for name, days in AGES.items():
        age(database_url, ids[name], days)
    return {"url": database_url, "ids": ids}


def segment_totals(rows: list[tuple[Any, ...]], cluster_ids: set[str]) -> tuple[int, int, int]:
    """Segments, executions and bytes of ``cluster_ids`` counted from the dumped rows."""
    cols = [c.name for c in s.task_segments.columns]
    mine = [dict(zip(cols, r, strict=True)) for r in rows]
    mine = [r for r in mine if r["cluster_id"] in cluster_ids]
    size = sum(len(r["payload"]) + len(r["summary"]) + len(r["key_filter"]) for r in mine)
    return len(mine), sum(r["executions"] for r in mine), size


def test_prune_removes_exactly_the_task_log_past_each_accounts_policy(
    recorded: dict[str, Any],
) -> None:
    url, ids = recorded["url"], recorded["ids"]
    # physics keeps 30 days (its own), astro follows the setting: 365 days
    with dask.config.set({"daskscope.retention.task-log-days": 365}):
        before = dump(url)
        expired = {ids["physics-old"], ids["astro-ancient"]}
        # an independent count, in SQL, of what the policy puts out
        with open_store(url) as store, store.engine.connect() as conn:
            counted = conn.execute(
                sa.text(
                    "SELECT count(*), sum(executions) FROM task_segments "
                    "WHERE cluster_id IN (:a, :b)"
                ),
                {"a": ids["physics-old"], "b": ids["astro-ancient"]},
            ).one()
            assert task_log_days(store, "physics") == 30 and task_log_days(store, "astro") == 365
        segments, executions, _ = segment_totals(before["task_segments"], expired)
        assert counted == (segments, executions) and segments >= 2 and executions >= 20

        dry = CliRunner().invoke(cli, ["--database", url, "prune", "--dry-run", "--json"])
        assert dry.exit_code == 0, dry.output
        report = {a["account"]: a for a in json.loads(dry.output)["accounts"]}
        assert set(report) == {"physics", "astro"}
        for account, name in (("physics", "physics-old"), ("astro", "astro-ancient")):
            one = segment_totals(before["task_segments"], {ids[name]})
            got = report[account]
            assert (got["clusters"], got["segments"], got["executions"], got["bytes"]) == (1, *one)
        assert dump(url) == before  # a dry run changes nothing
        text = CliRunner().invoke(cli, ["--database", url, "prune", "--dry-run"])
        assert "would remove" in text.output and "physics" in text.output

        done = CliRunner().invoke(cli, ["--database", url, "prune", "--json"])
        assert done.exit_code == 0, done.output
        assert {a["account"]: a for a in json.loads(done.output)["accounts"]} == report
        after = dump(url)

    # exactly the expired clusters' task log went, everything else is as it was
    kept = [r for r in before["task_segments"] if r[1] not in expired]
    assert after["task_segments"] == kept and kept
    assert segment_totals(after["task_segments"], expired) == (0, 0, 0)
    changed = {name for name in before if before[name] != after[name]}
    assert changed == {"task_segments", "task_log_prunes"}
    assert sorted(r[0] for r in after["task_log_prunes"]) == sorted(expired)
    for table in ("clusters", "computations", "task_groups", "task_prefixes", "spans"):
        assert before[table], table  # the aggregates were there, and are untouched

    with open_store(url) as store:
        mark = pruned_task_log(store, ids["physics-old"])
        assert mark is not None and mark.task_log_days == 30
        assert mark.executions == segment_totals(before["task_segments"], {mark.cluster_id})[1]
        assert pruned_task_log(store, ids["physics-new"]) is None
        assert expired_clusters(store) == []  # nothing left past the policy
        assert not timeline_view(store, ids["physics-old"]).recorded
        assert timeline_view(store, ids["physics-new"]).recorded
        with TestClient(create_app(store)) as http:
            page = http.get(f"/clusters/{ids['physics-old']}/timeline")
            assert page.status_code == 200
            assert 'id="task-log-pruned"' in page.text and "pruned on" in page.text
            fresh = http.get(f"/clusters/{ids['physics-new']}/timeline")
            assert "task-log-pruned" not in fresh.text and "not-recorded" not in fresh.text
    read = CliRunner().invoke(cli, ["--database", url, "timeline", ids["physics-old"]])
    assert read.exit_code == 2
    assert "was pruned on" in read.output and "kept 30 days" in read.output
    as_json = CliRunner().invoke(cli, ["--database", url, "timeline", ids["physics-old"], "--json"])
    assert as_json.exit_code == 0 and "note: the task log" in as_json.stderr
    assert json.loads(as_json.stdout)["recorded"] is False

    again = CliRunner().invoke(cli, ["--database", url, "prune"])
    assert again.exit_code == 0 and "nothing to prune" in again.output
    assert dump(url) == after


def refuse_deletes_of(url: str, cluster_id: str) -> None:
    """A trigger that fails the deletion of the cluster's task log: a prune that stops
    half-way, as if the server went away."""
    with open_store(url) as store, store.engine.begin() as conn:
        if conn.dialect.name == "sqlite":
            conn.exec_driver_sql(
                "CREATE TRIGGER refuse BEFORE DELETE ON task_segments "
                f"WHEN old.cluster_id = '{cluster_id}' BEGIN SELECT RAISE(ABORT, 'refused'); END"
            )
            return
        conn.exec_driver_sql(
            "CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
            "RAISE EXCEPTION 'refused'; END $$"
        )
        conn.exec_driver_sql(
            "CREATE TRIGGER refuse BEFORE DELETE ON task_segments FOR EACH ROW "
            f"WHEN (old.cluster_id = '{cluster_id}') EXECUTE FUNCTION refuse()"
        )


def test_a_prune_that_fails_half_way_leaves_each_cluster_whole_or_pruned(
    recorded: dict[str, Any],
) -> None:
    url, ids = recorded["url"], recorded["ids"]
    with dask.config.set({"daskscope.retention.task-log-days": 365}):
        before = dump(url)
        # astro's cluster comes first, physics's second: the second one fails
        refuse_deletes_of(url, ids["physics-old"])
        with (
            open_store(url) as store,
            pytest.raises(RetentionError, match=r"pruned before it \(1\)"),
        ):
            prune_task_log(store)
        after = dump(url)
        gone = {ids["astro-ancient"]}
        assert after["task_segments"] == [r for r in before["task_segments"] if r[1] not in gone]
        assert [r[0] for r in after["task_log_prunes"]] == [ids["astro-ancient"]]
        assert {n for n in before if before[n] != after[n]} == {"task_segments", "task_log_prunes"}
        with open_store(url) as store, store.engine.begin() as conn:
            conn.exec_driver_sql(
                "DROP TRIGGER refuse"
                + (" ON task_segments" if conn.dialect.name == "postgresql" else "")
            )
        with open_store(url) as store:
            (report,) = prune_task_log(store).accounts  # the rest, at the next run
        assert report.account == "physics" and report.clusters == 1
    final = dump(url)
    gone.add(ids["physics-old"])
    assert final["task_segments"] == [r for r in before["task_segments"] if r[1] not in gone]
    assert sorted(r[0] for r in final["task_log_prunes"]) == sorted(gone)


def test_keep_for_ever_is_the_default_and_an_account_may_opt_out(
    recorded: dict[str, Any],
) -> None:
    url = recorded["url"]
    before = dump(url)
    # no setting: astro keeps its task log for ever; physics's own 30 days still apply
    dry = CliRunner().invoke(cli, ["--database", url, "prune", "--dry-run", "--json"])
    assert [a["account"] for a in json.loads(dry.output)["accounts"]] == ["physics"]
    shown = CliRunner().invoke(cli, ["--database", url, "retention", "show", "--json"])
    policies = {p["account"]: (p["task_log_days"], p["own"]) for p in json.loads(shown.output)}
    assert policies["physics"] == (30, True) and policies["astro"] == (None, False)
    forever = CliRunner().invoke(cli, ["--database", url, "retention", "set", "physics", "forever"])
    assert forever.exit_code == 0, forever.output
    shown = CliRunner().invoke(cli, ["--database", url, "retention", "show", "--json"])
    policies = {p["account"]: (p["task_log_days"], p["own"]) for p in json.loads(shown.output)}
    assert policies["physics"] == (None, True) and policies["astro"] == (None, False)
    done = CliRunner().invoke(cli, ["--database", url, "prune", "--account", "physics"])
    assert "nothing to prune" in done.output
    bad = CliRunner().invoke(cli, ["--database", url, "retention", "set", "physics", "soon"])
    assert bad.exit_code == 2 and "number of days" in bad.output
    after = dump(url)
    assert {n for n in before if before[n] != after[n]} == {"retention_policies"}


# -- PostgreSQL: the task log partitioned by month ------------------------------------


@pytest.fixture
def pg_url(postgres_server: str) -> Any:
    name = f"t_{uuid.uuid4().hex[:12]}"
    _admin(postgres_server, f"CREATE DATABASE {name} STRATEGY FILE_COPY")
    yield f"{postgres_server}/{name}"
    _admin(postgres_server, f"DROP DATABASE {name} WITH (FORCE)")


def mid_month(months_ago: int) -> float:
    """Noon on the 15th, ``months_ago`` UTC months before this one."""
    now = dt.datetime.now(dt.UTC)
    index = now.year * 12 + now.month - 1 - months_ago
    return dt.datetime(index // 12, index % 12 + 1, 15, 12, tzinfo=dt.UTC).timestamp()


def move_to(url: str, cluster_id: str, ended: float) -> None:
    """Move the cluster and its task log in time so that it ended at ``ended``: its
    segments go to that month's partition (made first, as prune makes them ahead)."""
    with open_store(url) as store, store.engine.begin() as conn:
        create_partition(conn, month_partition(*month_of(ended)))
        end = conn.execute(
            sa.select(sa.func.coalesce(s.clusters.c.stopped_at, s.clusters.c.last_seen_at)).where(
                s.clusters.c.id == cluster_id
            )
        ).scalar_one()
        shift = end - ended
        c, t = s.clusters.c, s.task_segments.c
        conn.execute(
            s.clusters.update()
            .where(c.id == cluster_id)
            .values(
                started_at=c.started_at - shift,
                stopped_at=c.stopped_at - shift,
                last_seen_at=c.last_seen_at - shift,
            )
        )
        conn.execute(
            s.task_segments.update()
            .where(t.cluster_id == cluster_id)
            .values(first_start=t.first_start - shift, last_stop=t.last_stop - shift)
        )


def partition_rows(url: str) -> dict[str, set[str]]:
    """Each partition of the task log and the clusters whose rows it holds."""
    with open_store(url) as store, store.engine.connect() as conn:
        names = conn.exec_driver_sql(
            "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
            "WHERE i.inhparent = 'task_segments'::regclass"
        ).scalars()
        return {
            name: set(
                conn.exec_driver_sql(
                    f"SELECT DISTINCT cluster_id FROM {PARTITION_SCHEMA}.{name}"
                ).scalars()
            )
            for name in names
        }


def test_postgres_drops_a_month_whose_task_log_all_expired(pg_url: str) -> None:
    ages = {"physics-old": 3, "physics-older": 6, "astro-older": 6, "physics-new": 0}
    ids = {name: record(pg_url, name.split("-")[0], tasks=10 + n) for n, name in enumerate(ages)}
    with open_store(pg_url) as store:
        set_task_log_days(store, "physics", 30, by=None)  # astro: the default, for ever
        with store.engine.connect() as conn:
            assert is_partitioned(conn)
    for name, months in ages.items():
        if months:
            move_to(pg_url, ids[name], mid_month(months))
    old, older = (month_partition(*month_of(mid_month(m))).name for m in (3, 6))
    layout = partition_rows(pg_url)
    assert layout[old] == {ids["physics-old"]}
    assert layout[older] == {ids["physics-older"], ids["astro-older"]}
    assert ids["physics-new"] in layout[month_partition(*month_of(time.time())).name]
    before = dump(pg_url)
    expired = {ids["physics-old"], ids["physics-older"]}

    dry = CliRunner().invoke(cli, ["--database", pg_url, "prune", "--dry-run", "--json"])
    assert dry.exit_code == 0, dry.output
    planned = json.loads(dry.output)
    assert planned["partitions"] == [old]  # the older month also holds astro's rows
    (physics,) = planned["accounts"]
    segments, executions, size = segment_totals(before["task_segments"], expired)
    assert (physics["clusters"], physics["segments"], physics["executions"]) == (
        2,
        segments,
        executions,
    )
    assert physics["bytes"] == size
    assert dump(pg_url) == before and partition_rows(pg_url) == layout

    done = CliRunner().invoke(cli, ["--database", pg_url, "prune", "--json"])
    assert done.exit_code == 0, done.output
    assert json.loads(done.output) == {**planned, "dry_run": False}
    after = dump(pg_url)
    now_layout = partition_rows(pg_url)
    assert old not in now_layout  # dropped whole
    assert now_layout[older] == {ids["astro-older"]}  # the other cluster's rows deleted
    assert after["task_segments"] == [r for r in before["task_segments"] if r[1] not in expired]
    assert {n for n in before if before[n] != after[n]} == {"task_segments", "task_log_prunes"}
    with open_store(pg_url) as store:
        for cluster_id in expired:
            mark = pruned_task_log(store, cluster_id)
            assert mark is not None
            one = segment_totals(before["task_segments"], {cluster_id})
            assert (mark.segments, mark.executions, mark.bytes) == one
        assert pruned_task_log(store, ids["astro-older"]) is None


def test_postgres_upgrade_moves_an_existing_task_log_into_month_partitions(
    pg_url: str,
) -> None:
    """A store at the revision before (one task_segments table, rows in it) upgraded:
    every row is kept as it was, each in its month's partition (a time no month holds,
    in the default one); a segment written again is still stored once."""
    from alembic import command

    from daskscope.store.engine import IMMEDIATE, _alembic_config
    from daskscope.store.writer import write_records
    from factories import make_task_segment

    store = open_store(pg_url, upgrade=False)
    cfg = _alembic_config()
    with store.engine.connect() as conn, conn.begin():
        cfg.attributes["connection"] = conn.execution_options(**{IMMEDIATE: True})
        command.upgrade(cfg, "0014")
    times = {"a": mid_month(2), "b": mid_month(2) + 3600, "c": mid_month(14), "d": 1e11}
    segments = [
        make_task_segment(f"cluster-{name}", first_start=at, last_stop=at + 5)
        for name, at in times.items()
    ]
    columns = [c.name for c in s.task_segments.columns]
    with store.engine.begin() as conn:
        conn.execute(
            s.task_segments.insert(),
            [{c: getattr(r, c) for c in columns} for r in segments],
        )
    store.close()
    before = dump(pg_url)  # opening upgrades to the newest revision
    with open_store(pg_url) as store, store.engine.connect() as conn:
        assert store.current_revision() == store.head_revision() and is_partitioned(conn)
    assert before["task_segments"] == sorted(
        (tuple(getattr(r, c) for c in columns) for r in segments), key=repr
    )
    layout = partition_rows(pg_url)
    by_month = {n: ids for n, ids in layout.items() if ids}
    assert by_month == {
        month_partition(*month_of(times["a"])).name: {"cluster-a", "cluster-b"},
        month_partition(*month_of(times["c"])).name: {"cluster-c"},
        "task_segments_default": {"cluster-d"},
    }
    this_month = month_partition(*month_of(time.time())).name
    assert this_month in layout  # made ahead, empty
    with open_store(pg_url) as store:
        write_records(store, segments[:2])  # sent twice: stored once, unchanged
    assert dump(pg_url)["task_segments"] == before["task_segments"]

    # and back: one table again, every row in it
    store = open_store(pg_url)
    with store.engine.connect() as conn, conn.begin():
        cfg.attributes["connection"] = conn.execution_options(**{IMMEDIATE: True})
        command.downgrade(cfg, "0014")
    with store.engine.connect() as conn:
        assert not is_partitioned(conn)
        rows = conn.execute(sa.select(s.task_segments)).all()
        assert sorted((tuple(r) for r in rows), key=repr) == before["task_segments"]
        assert not conn.exec_driver_sql(
            "SELECT 1 FROM pg_namespace WHERE nspname = %s", (PARTITION_SCHEMA,)
        ).first()
    store.close()
