"""``/metrics`` for Prometheus: real Dask clusters recorded into SQLite and PostgreSQL,
the exposition read back by prometheus_client's OpenMetrics parser, and its numbers
equal to the store's (the cluster page's, the account page's, the costs page's) and to
Dask's own where Dask knows them (the keys submitted, the task that failed). With
authentication on, a member's token sees only its account's series; a small cap folds
the long tail of a label into "other"."""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dask
import httpx
import pytest
from distributed import Client, LocalCluster, span, wait

import daskscope

pytest.importorskip("fastapi")
pytest.importorskip("prometheus_client")

from prometheus_client.openmetrics.parser import text_string_to_metric_families

from daskscope.analysis.cost import cost_parts
from daskscope.analysis.usage import account_statistics
from daskscope.pricing import cost_rates
from daskscope.store import cluster_detail, open_store, write_records
from daskscope.store.analytics import account_totals
from daskscope.store.identity import add_user, create_account, create_token
from daskscope.views.costs import costs_view
from daskscope.web import create_app
from daskscope.web.routes.metrics import OTHER, exposition
from factories import make_cluster, recorded_cluster

DOCS = Path(__file__).parents[1] / "docs"

#: Two accounts, each a member running one cluster: what each submits to Dask
RUNS = {
    "physics": {"user": "ana", "incs": 30, "doubles": 12},
    "chemistry": {"user": "bo", "incs": 8, "doubles": 5},
}
#: Prices of one account (the other has the shipped default's)
PRICES = {"daskscope.cost.physics": {"currency": "CHF", "per-core-hour": 0.1,
                                     "per-gib-hour": 0.01}}  # fmt: skip


def inc(x: int) -> int:
    return x + 1


def double(x: int) -> int:
    return 2 * x


def boom(x: int) -> int:
    raise ValueError(f"boom {x}")


def _record(url: str, account: str, user: str, incs: int, doubles: int) -> str:
    """One real cluster: ``incs`` tasks in span "load", ``doubles`` in span "work", and
    one task that fails; returns its id once the cluster has closed."""
    with (
        LocalCluster(
            n_workers=1,
            threads_per_worker=2,
            processes=False,
            dashboard_address=":0",
            silence_logs=logging.CRITICAL,
        ) as cluster,
        Client(cluster) as client,
    ):
        cluster_id = daskscope.register(
            client, database=url, name=f"{account} run", account=account, user=user
        )
        with span("load"):
            assert client.gather(client.map(inc, range(incs))) == [i + 1 for i in range(incs)]
        with span("work"):
            assert client.gather(client.map(double, range(doubles))) == [
                2 * i for i in range(doubles)
            ]
        failed = client.submit(boom, 1)
        wait(failed)
        assert failed.status == "error"
        daskscope.flush(client)
    return str(cluster_id)


@pytest.fixture
def recorded(database_url: str) -> Iterator[dict[str, Any]]:
    """Both accounts' clusters recorded into a fresh store, and their identities."""
    ids = {account: _record(database_url, account, **run) for account, run in RUNS.items()}
    store = open_store(database_url)
    tokens = {}
    for account, run in RUNS.items():
        create_account(store, account)
        add_user(store, run["user"], account=account)
        tokens[account] = create_token(store, run["user"])
    yield {"url": database_url, "store": store, "ids": ids, "tokens": tokens}
    store.close()


def get(app: Any, path: str, token: str | None = None) -> httpx.Response:
    async def call() -> httpx.Response:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            headers = {"authorization": f"Bearer {token}"} if token else {}
            return await client.get(path, headers=headers)

    return asyncio.run(call())


Series = dict[str, dict[tuple[tuple[str, str], ...], float]]


def parse(text: str) -> Series:
    """Every sample by its name (``..._total`` for counters) and sorted labels."""
    series: Series = defaultdict(dict)
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = tuple(sorted(sample.labels.items()))
            assert labels not in series[sample.name], (sample.name, labels)
            series[sample.name][labels] = sample.value
    return series


def one(series: Series, name: str, **labels: str) -> float:
    """The value of the only sample of ``name`` with ``labels`` (among its others)."""
    found = [v for k, v in series[name].items() if set(labels.items()) <= set(k)]
    assert len(found) == 1, (name, labels, series[name])
    return found[0]


def by(series: Series, name: str, label: str) -> dict[str, float]:
    """The samples of ``name`` summed per value of ``label``."""
    sums: dict[str, float] = defaultdict(float)
    for labels, value in series[name].items():
        sums[dict(labels)[label]] += value
    return dict(sums)


def the_numbers_are_the_stores_and_dasks(store: Any, ids: dict[str, str], text: str) -> None:
    series = parse(text)
    for account, run in RUNS.items():
        detail = cluster_detail(store, ids[account])
        cluster = detail["cluster"]
        who = {"account": account, "member": run["user"]}
        # Dask's ground truth: the keys submitted, the one that failed, the clusters closed
        submitted = run["incs"] + run["doubles"]
        assert one(series, "daskscope_tasks_executed_total", **who) == submitted
        assert one(series, "daskscope_tasks_erred_total", **who) == 1
        assert one(series, "daskscope_clusters", **who, state="stopped") == 1
        assert one(series, "daskscope_clusters", **who, state="running") == 0
        prefixes = {"account": account}
        assert (
            one(series, "daskscope_prefix_tasks_executed_total", **prefixes, prefix="inc")
            == (run["incs"])
        )
        assert one(series, "daskscope_prefix_tasks_erred_total", **prefixes, prefix="boom") == 1
        # the store's: the cluster page's figures ...
        assert cluster["tasks_executed"] == submitted and cluster["tasks_erred"] == 1
        assert one(series, "daskscope_core_seconds_total", **who) == pytest.approx(
            cluster["core_seconds"]
        )
        assert one(series, "daskscope_compute_seconds_total", **who) == pytest.approx(
            cluster["compute_seconds"]
        )
        for p in detail["task_prefixes"]:
            key = {"account": account, "prefix": p["name"]}
            assert (
                one(series, "daskscope_prefix_tasks_executed_total", **key) == (p["tasks_executed"])
            )
            assert one(series, "daskscope_prefix_task_seconds_total", **key) == pytest.approx(
                p["duration_s"]
            )
        fine = [m for m in detail["fine_metrics"] if m["unit"] == "seconds"]
        assert fine, "Dask sent fine metrics"
        for m in fine:
            key = {"account": account, "prefix": m["prefix"], "activity": m["activity"]}
            assert one(series, "daskscope_fine_metric_seconds_total", **key) == pytest.approx(
                m["value"]
            )
        # ... the account page's totals and cost ...
        (totals,) = account_totals(store, account=account)
        assert one(series, "daskscope_tasks_executed_total", **who) == totals["tasks_executed"]
        statistics = account_statistics([totals], cost_rates)
        rates = cost_rates(account)
        assert one(series, "daskscope_cost_total", **who, currency=rates["currency"]) == (
            pytest.approx(statistics["cost"])
        )
        parts = cost_parts(cluster["core_seconds"], cluster["memory_limit_byte_seconds"], rates)
        assert parts is not None and statistics["cost"] == pytest.approx(parts["total"])
        # ... and the costs page's tags
        tags = {r.name: r for r in costs_view(store, account=account).tags}
        assert {"load", "work"} <= set(tags)
        for tag, row in tags.items():
            key = {"account": account, "tag": tag}
            assert one(series, "daskscope_span_task_seconds_total", **key) == pytest.approx(
                row.task_seconds
            )
            assert one(
                series, "daskscope_span_cost", **key, currency=row.currency or ""
            ) == pytest.approx(row.cost)
    assert by(series, "daskscope_clusters", "account") == {"physics": 1, "chemistry": 1}


def test_metrics_equal_the_store_and_dask(recorded: dict[str, Any]) -> None:
    store, ids = recorded["store"], recorded["ids"]
    app = create_app(recorded["url"])
    with dask.config.set(PRICES):
        response = get(app, "/metrics")
        assert response.status_code == 200, response.text
        assert response.headers["content-type"].startswith("application/openmetrics-text")
        assert response.text.endswith("# EOF\n")
        the_numbers_are_the_stores_and_dasks(store, ids, response.text)
        assert cost_rates("physics")["currency"] == "CHF"
    app.state.store.close()

    # With authentication on: no token, no series; each member's token, its account's
    app = create_app(recorded["url"], auth=True)
    try:
        # refused as the API is: 401, not the login page (a scraper would take the page
        # for a failed scrape without saying why)
        refused = get(app, "/metrics")
        assert refused.status_code == 401 and "daskscope_" not in refused.text
        assert "token" in refused.json()["error"]["message"].lower()
        for account, token in recorded["tokens"].items():
            series = parse(get(app, "/metrics", token).text)
            for name in ("daskscope_clusters", "daskscope_tasks_executed_total",
                         "daskscope_prefix_tasks_executed_total",
                         "daskscope_fine_metric_seconds_total",
                         "daskscope_span_task_seconds_total"):  # fmt: skip
                assert set(by(series, name, "account")) == {account}, name
            assert one(series, "daskscope_tasks_executed_total", account=account) == (
                RUNS[account]["incs"] + RUNS[account]["doubles"]
            )
        bad = get(app, "/metrics", "not-a-token")
        assert bad.status_code == 401 and "daskscope_" not in bad.text
    finally:
        app.state.store.close()

    # The cap: at most two values of each capped label, the long tail in "other",
    # every total kept
    whole = parse(exposition(store).decode())
    capped = parse(exposition(store, cap=2).decode())
    for name, label in (
        ("daskscope_prefix_tasks_executed_total", "prefix"),
        ("daskscope_prefix_task_seconds_total", "prefix"),
        ("daskscope_fine_metric_seconds_total", "activity"),
        ("daskscope_fine_metric_seconds_total", "prefix"),
        ("daskscope_span_task_seconds_total", "tag"),
    ):
        values = by(capped, name, label)
        assert len(by(whole, name, label)) > 2 and len(values) <= 2, (name, label)
        assert OTHER in values, (name, label)
        assert sum(values.values()) == pytest.approx(sum(by(whole, name, label).values()))
    # the prefix that accounts for the most seconds (its tasks' and its fine metrics', the
    # rank the cap documents) keeps its own series
    seconds = by(whole, "daskscope_prefix_task_seconds_total", "prefix")
    fine = by(whole, "daskscope_fine_metric_seconds_total", "prefix")
    weight = {p: seconds[p] + fine.get(p, 0.0) for p in seconds}
    assert min(weight, key=lambda p: (-weight[p], p)) in by(
        capped, "daskscope_prefix_task_seconds_total", "prefix"
    )
    values = {dict(k)["label"]: v for k, v in capped["daskscope_label_values"].items()}
    assert values["prefix"] == len(seconds) and values["account"] == 2
    # the cap as configured, over HTTP
    with dask.config.set({"daskscope.metrics.max-series-per-label": 1}):
        app = create_app(recorded["url"])
        try:
            series = parse(get(app, "/metrics").text)
        finally:
            app.state.store.close()
    assert set(by(series, "daskscope_tasks_executed_total", "account")) == {OTHER}
    assert set(by(series, "daskscope_tasks_executed_total", "member")) == {OTHER}
    assert one(series, "daskscope_tasks_executed_total") == sum(
        r["incs"] + r["doubles"] for r in RUNS.values()
    )


def test_the_grafana_dashboard_reads_series_the_server_exposes(tmp_path: Path) -> None:
    # every series a panel or a variable of docs/grafana-daskscope.json names is one that
    # /metrics exposes (a renamed family would leave its panel empty)
    store = open_store(f"sqlite:///{tmp_path / 'store.db'}")
    try:
        write_records(store, recorded_cluster(make_cluster("a", account="cms")))
        exposed = {s.name for f in text_string_to_metric_families(exposition(store).decode())
                   for s in f.samples}  # fmt: skip
    finally:
        store.close()
    dashboard = json.loads((DOCS / "grafana-daskscope.json").read_text())
    expressions = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    expressions += [v["definition"] for v in dashboard["templating"]["list"] if "definition" in v]
    named = {n for e in expressions for n in re.findall(r"\bdaskscope_\w+", e)}
    assert len(dashboard["panels"]) >= 10 and named and named <= exposed, named - exposed
    # and the documentation lists every family
    documented = (DOCS / "server.md").read_text()
    for name in exposed:
        assert f"`{name}`" in documented, name
