"""The span filter on the server: ``/task-groups?span=`` and ``/prefixes?span=`` list
exactly the task groups Dask put in that span's subtree (or in the spans with a tag),
on SQLite and PostgreSQL. The ground truth is the scheduler's spans extension of the
same run: ``Span.traverse_groups()`` and ``find_by_tags()``."""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import dask
import dask.array as da
import httpx
import pytest
from distributed import Client, LocalCluster, span

import daskscope

pytest.importorskip("fastapi")

from daskscope.web import create_app
from webutil import serving


def _run(url: str) -> tuple[str, dict[str, Any]]:
    """A run with nested spans; returns the cluster id and, per span id and per tag,
    the names of the groups Dask holds there, and the spans' names."""
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
        cluster_id = daskscope.register(client, database=url, name="span scope")

        def compute(collection: Any) -> None:
            collection.compute()
            # Until the scheduler forgets them, a group of the same name (finalize-...)
            # submitted next would join them in their span: Dask's documented collision
            while cluster.scheduler.tasks:
                time.sleep(0.01)

        with dask.config.set({"optimization.fuse.active": False}):
            x = da.ones((200, 200), chunks=100)
            compute((x - 1).sum())  # no span of ours: Dask's "default"
            with span("load"):
                compute((x + 1).sum())
                with span("inner"):
                    compute((x * 3).mean())
            with span("work"):
                compute(da.sqrt(x).max())
        daskscope.flush(client)
        spans = cluster.scheduler.extensions["spans"]
        truth = {
            "by_span": {
                sid: sorted(tg.name for tg in sp.traverse_groups())
                for sid, sp in spans.spans.items()
            },
            "names": {sid: list(sp.name) for sid, sp in spans.spans.items()},
            # find_by_tags() gives the topmost tagged spans: their subtrees, once each
            "by_tag": {
                tag: sorted(
                    {
                        id(tg): tg.name
                        for sp in spans.find_by_tags(tag)
                        for tg in sp.traverse_groups()
                    }.values()
                )
                for tag in ("load", "inner", "work", "default")
            },
        }
    return cluster_id, truth


@pytest.fixture
def site(database_url: str) -> Iterator[dict[str, Any]]:
    cluster_id, truth = _run(database_url)
    app = create_app(database_url)
    with serving(app) as base:
        yield {"base": f"{base}/api/v1/clusters/{cluster_id}", "truth": truth}
    app.state.store.close()


def _all_groups(url: str) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    next_url: str | None = url
    while next_url:
        page = httpx.get(next_url, timeout=60).raise_for_status().json()
        rows.extend(page["groups"])
        next_url = page["next"] and httpx.URL(url).join(page["next"]).__str__()
    return rows


def groups_of_a_span_are_those_dask_put_there(site: dict[str, Any]) -> None:
    truth = site["truth"]
    by_name = {tuple(n): sid for sid, n in truth["names"].items()}
    load, inner = by_name[("load",)], by_name[("load", "inner")]
    # the subtree of "load" holds the groups of "inner" too: not a flat filter
    assert set(truth["by_span"][inner]) < set(truth["by_span"][load])
    for span_id, names in truth["by_span"].items():
        # a page size of 1 follows ``next`` through every page, the filter kept
        rows = _all_groups(f"{site['base']}/task-groups?span={span_id}&limit=1")
        assert sorted(g["name"] for g in rows) == names, truth["names"][span_id]
        scope = httpx.get(f"{site['base']}/prefixes", params={"span": span_id}, timeout=60).json()
        assert scope["group_count"] == len(names)
        prefixes = Counter(g["prefix"] for g in rows)
        assert {p["name"]: p["group_count"] for p in scope["task_prefixes"]} == prefixes
        assert scope["computations"] == sorted({g["computation_id"] for g in rows})
        assert sum(p["tasks_executed"] for p in scope["task_prefixes"]) == sum(
            g["tasks_executed"] for g in rows
        )


def groups_of_a_tag_are_those_dask_tagged(site: dict[str, Any]) -> None:
    for tag, names in site["truth"]["by_tag"].items():
        rows = _all_groups(f"{site['base']}/task-groups?tag={tag}&limit=2")
        assert sorted(g["name"] for g in rows) == names, tag
        scope = httpx.get(f"{site['base']}/prefixes", params={"tag": tag}, timeout=60).json()
        assert scope["group_count"] == len(names)


def unknown_span_says_where_spans_are_listed(site: dict[str, Any]) -> None:
    for route in ("task-groups", "prefixes"):
        answer = httpx.get(f"{site['base']}/{route}", params={"span": "no-such-span"}, timeout=60)
        assert answer.status_code == 404
        assert "lists its spans" in answer.json()["error"]["message"]


def unchanged_answer_is_an_empty_304(site: dict[str, Any]) -> None:
    for route in ("", "/prefixes", "/task-groups", "/workers", "/metrics"):
        first = httpx.get(f"{site['base']}{route}", timeout=60)
        etag = first.headers["etag"]
        again = httpx.get(f"{site['base']}{route}", headers={"if-none-match": etag}, timeout=60)
        assert again.status_code == 304 and again.content == b"", route
        other = httpx.get(
            f"{site['base']}{route}", headers={"if-none-match": '"other"'}, timeout=60
        )
        assert other.status_code == 200 and other.json() == first.json()


def test_span_filter_on_the_server(site: dict[str, Any]) -> None:
    # one recorded run per database, read four ways
    groups_of_a_span_are_those_dask_put_there(site)
    groups_of_a_tag_are_those_dask_tagged(site)
    unknown_span_says_where_spans_are_listed(site)
    unchanged_answer_is_an_empty_304(site)
