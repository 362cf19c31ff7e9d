"""Cost per span and computation (issue 14) against a real run whose task seconds are
known by construction: sleeping tasks in two spans, one computation each. The ground
truth is Dask's own task stream (``client.get_task_stream()``: each task's compute
start and stop) of the same run; the cluster's cost is ``cost_parts`` of its stored
capacity. Checked on SQLite and PostgreSQL: each part's share and cost, attributed +
idle = the cluster's cost, per member and per tag, the API's JSON = the CLI's, and the
span-tag index (migration 0009) for spans stored before it."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dask
import pytest
import sqlalchemy as sa
from click.testing import CliRunner
from distributed import Client, LocalCluster, get_task_stream, span

import daskscope
from daskscope.analysis.cost import cost_parts
from daskscope.cli.main import cli
from daskscope.pricing import cost_rates
from daskscope.store import open_store, write_records
from daskscope.store import schema as s
from daskscope.store.history import recurring_names, span_runs
from daskscope.views.costs import cluster_costs_view, costs_view
from factories import make_cluster, make_span

#: Prices of the run's account: large enough that the costs are far from rounding
PRICES = {"default": None, "lab": {"per-core-hour": 360.0, "per-gib-hour": 2.0, "currency": "EUR"}}
#: Tasks a span and how long each sleeps, by tag
PLAN = {"data-load": (4, 0.3), "train": (2, 0.2)}


def nap(seconds: float, i: int) -> int:
    time.sleep(seconds)
    return i


@pytest.fixture(params=["sqlite", "postgres"], scope="module")
def recorded(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Any]]:
    """One real run: a span per tag of PLAN, one computation each, recorded in a fresh
    store; Dask's task stream of it as the truth."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path_factory.mktemp('span-cost') / 'store.db'}"
    else:
        server = request.getfixturevalue("postgres_server")
        name = f"t_cost_{int(time.time() * 1000) % 10**9}"
        engine = sa.create_engine(f"{server}/postgres", isolation_level="AUTOCOMMIT")
        with engine.connect() as conn:
            conn.exec_driver_sql(f"CREATE DATABASE {name}")
        engine.dispose()
        url = f"{server}/{name}"
    with (
        dask.config.set({"daskscope.cost": PRICES, "daskscope.flush-interval": "1h"}),
        LocalCluster(
            n_workers=1, threads_per_worker=2, processes=False, dashboard_address=":0",
            silence_logs=logging.CRITICAL,
        ) as cluster,
        Client(cluster) as client,
    ):  # fmt: skip
        cluster_id = daskscope.register(
            client, database=url, account="lab", user="ana", name="cost run"
        )
        truth: dict[str, float] = {}
        with get_task_stream(client) as stream:
            for tag, (n, seconds) in PLAN.items():
                with span(tag):
                    # one graph, so one computation: separate submits become two when
                    # the first task ends before the next submit arrives (a loaded CI)
                    futures = client.map(
                        nap, [seconds] * n, range(n), key=[f"{tag}-nap-{i}" for i in range(n)]
                    )
                    assert client.gather(futures) == list(range(n))
                del futures
        assert sorted(str(r["key"]) for r in stream.data) == sorted(
            f"{tag}-nap-{i}" for tag, (n, _) in PLAN.items() for i in range(n)
        )
        for record in stream.data:
            tag = str(record["key"]).rsplit("-nap-", 1)[0]
            for ss in record["startstops"]:
                if ss["action"] == "compute":
                    truth[tag] = truth.get(tag, 0.0) + ss["stop"] - ss["start"]
        assert daskscope.flush(client)["write_failures"] == 0
        yield {"url": url, "cluster_id": cluster_id, "truth": truth}


def stored_cluster(url: str, cluster_id: str) -> dict[str, Any]:
    with open_store(url) as store, store.engine.connect() as conn:
        row = conn.execute(sa.select(s.clusters).where(s.clusters.c.id == cluster_id)).one()
    return dict(row._mapping)


def test_each_span_and_computation_costs_its_share_of_core_time(recorded: dict[str, Any]) -> None:
    url, cid, truth = recorded["url"], recorded["cluster_id"], recorded["truth"]
    # Dask's stream saw every task of both spans (how long they slept is not asserted)
    assert set(truth) == set(PLAN) and all(v > 0 for v in truth.values())
    cluster = stored_cluster(url, cid)
    with dask.config.set({"daskscope.cost": PRICES}):
        rates = cost_rates("lab")
        with open_store(url) as store:
            view = cluster_costs_view(store, cid)
    whole = cost_parts(cluster["core_seconds"], cluster["memory_limit_byte_seconds"], rates)
    assert whole is not None and view.cost == pytest.approx(whole["total"], rel=1e-12)
    assert view.currency == "EUR"
    core = cluster["core_seconds"]
    spans = {p.label: p for p in view.spans}
    assert set(PLAN) <= set(spans)
    for tag in PLAN:
        part = spans[tag]
        share = truth[tag] / core
        # Dask's span time (all activities) against the stream's compute time
        assert part.share == pytest.approx(share, rel=0.05)
        assert part.cost == pytest.approx(whole["total"] * share, rel=0.05)
        assert part.cost_text.endswith(" EUR")
    # the spans' cost + idle is the cluster's, and so is the computations'
    for parts, idle in ((view.spans, view.spans_idle), (view.computations, view.computations_idle)):
        assert idle.label == "idle (not attributed)"
        assert sum(p.cost or 0.0 for p in parts) + (idle.cost or 0.0) == pytest.approx(
            view.cost, rel=1e-9
        )
        assert idle.cost is not None and idle.cost > 0  # two threads were idle most of the run
    # one computation per span: their task time is the span's
    by_seconds = sorted(
        p.task_seconds or 0.0 for p in view.computations if (p.task_seconds or 0) > 0.05
    )
    assert by_seconds == pytest.approx(sorted(truth.values()), abs=0.05)


def test_costs_of_a_tag_per_member_and_per_tag(recorded: dict[str, Any]) -> None:
    url, cid = recorded["url"], recorded["cluster_id"]
    with dask.config.set({"daskscope.cost": PRICES}), open_store(url) as store:
        view = costs_view(store, tag="data-load")
        everything = costs_view(store)
        parts = {p.label: p for p in cluster_costs_view(store, cid).spans}
        empty = costs_view(store, tag="data-load", since="2001-01-01", until="2001-01-31")
        with pytest.raises(ValueError, match="must be after"):
            costs_view(store, since="2026-11-02", until="2026-11-01")
        with pytest.raises(ValueError, match="not a date"):
            costs_view(store, since="yesterday")
    assert [(r.name, r.spans, r.currency) for r in view.members] == [("ana", 1, "EUR")]
    assert [r.name for r in view.tags] == ["data-load"]
    assert view.members[0].cost == pytest.approx(parts["data-load"].cost, rel=1e-12)
    assert view.members[0].task_seconds == pytest.approx(parts["data-load"].task_seconds)
    assert [t.currency for t in view.totals] == ["EUR"]
    tags = {r.name: r for r in everything.tags}
    assert {"data-load", "train"} <= set(tags)
    assert tags["train"].cost == pytest.approx(parts["train"].cost, rel=1e-12)
    assert (
        empty.spans == 0 and empty.message == "no span tag 'data-load' recorded in this time range"
    )


def test_cli_json_equals_the_api(recorded: dict[str, Any]) -> None:
    from fastapi.testclient import TestClient

    from daskscope.web.app import create_app

    url = recorded["url"]
    query = ["--tag", "data-load", "--since", "2020-01-01"]
    with dask.config.set({"daskscope.cost": PRICES}):
        printed = CliRunner().invoke(cli, ["--database", url, "costs", *query, "--json"])
        assert printed.exit_code == 0, printed.output
        table = CliRunner().invoke(cli, ["--database", url, "costs", *query, "--by", "tag"])
        bad = CliRunner().invoke(cli, ["--database", url, "costs", "--since", "soon"])
        app = create_app(url)
        try:
            with TestClient(app) as http:
                answer = http.get(
                    "/api/v1/costs", params={"tag": "data-load", "since": "2020-01-01"}
                )
                wrong = http.get("/api/v1/costs", params={"since": "soon"})
                split = http.get(f"/api/v1/clusters/{recorded['cluster_id'][:10]}/costs")
        finally:
            app.state.store.close()
    assert answer.status_code == 200 and json.loads(printed.output) == answer.json()
    assert "data-load" in table.output and "EUR" in table.output
    assert bad.exit_code == 2 and "not a date" in bad.output
    assert wrong.status_code == 400 and "not a date" in wrong.text
    assert split.status_code == 200 and split.json()["cluster_id"] == recorded["cluster_id"]


def test_the_migration_indexes_spans_stored_before_it(tmp_path: Path) -> None:
    from alembic import command

    from daskscope.store.engine import _alembic_config

    url = f"sqlite:///{tmp_path / 'old.db'}"
    c1, c2 = make_cluster("first"), make_cluster("second", start=2e9)
    spans = [
        make_span(c1, "s1", name=["load"], duration_s=7.5),
        make_span(c1, "s2", name=["load", "inner"], parent_span_id="s1", duration_s=4.0),
        make_span(c1, "s3", name=["load", "inner", "load"], parent_span_id="s2", duration_s=1.5),
        make_span(c2, "s1", name=["load"], duration_s=2.25),
        make_span(c2, "s4", name=[]),
    ]
    with open_store(url) as store:
        write_records(store, [c1, c2, *spans])
        with store.engine.begin() as conn:
            # a round trip through 0008 drops every revision with its column: the rest
            indexed = [c for c in s.span_tags.c if c.name != "revision"]
            written = conn.execute(sa.select(*indexed).order_by(s.span_tags.c.id)).all()
            cfg = _alembic_config()
            cfg.attributes["connection"] = conn
            command.downgrade(cfg, "0008")  # as a store from before the index
            command.upgrade(cfg, "head")  # 0009 indexes the spans, 0011 adds their seconds
            filled = conn.execute(sa.select(*indexed).order_by(s.span_tags.c.id)).all()
        # the writer's rows and the migrations' agree; a span without a name has none
        assert filled == written and len(filled) == 4
        outer = {(r.tag, r.outermost) for r in filled}
        assert outer == {("load", True), ("inner", True), ("load", False)}
        by_id = {sp.id: sp for sp in spans}
        for r in filled:
            assert r.root == (by_id[r.id].parent_span_id is None)
            assert r.duration_s == by_id[r.id].duration_s
        runs = span_runs(store, "load")
        assert [(r["cluster_id"], r["span_id"]) for r in runs] == [
            (spans[0].cluster_id, "s1"),
            (spans[3].cluster_id, "s1"),
        ]
        assert recurring_names(store, min_runs=2)["span"] == ["load"]


def test_nested_tags_are_counted_once_in_the_totals(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'nested.db'}"
    cluster = make_cluster("nested")
    records = [
        cluster,
        make_span(cluster, "root", name=["load"], duration_s=100.0),
        make_span(cluster, "child", name=["load", "inner"], parent_span_id="root", duration_s=40.0),
    ]
    prices = {"default": None, "atlas": {"per-core-hour": 1.0}}
    with dask.config.set({"daskscope.cost": prices}), open_store(url) as store:
        write_records(store, records)
        view = costs_view(store)
        inner = costs_view(store, tag="inner")
    # a core-hour costs 1: a span's cost is its task hours (its share of the core time)
    assert {r.name: r.cost for r in view.tags} == pytest.approx(
        {"load": 100 / 3600, "inner": 40 / 3600}
    )
    assert [(r.name, r.spans) for r in view.members] == [("alice", 1)]  # the root span only
    assert view.totals[0].cost == pytest.approx(100 / 3600)
    assert inner.totals[0].cost == pytest.approx(40 / 3600) and inner.spans == 1
