"""The account queries on SQLite and PostgreSQL, and the pure graph/flame-graph code."""

from __future__ import annotations

import time

import pytest

from daskscope.analysis.flamegraph import INNERMOST_COUNTED, icicle, merge_trees
from daskscope.analysis.graph import dominant_activity, task_group_graph
from daskscope.analysis.usage import account_statistics, member_usage
from daskscope.pricing import cost_rates
from daskscope.store import write_records
from daskscope.store.analytics import (
    RUNNING_WITHIN,
    account_totals,
    cluster_page,
    clusters_in_week,
    weekly_usage,
)
from daskscope.views.account import statistics_view, time_range, usage_view
from daskscope.views.listing import ListingQuery, cluster_listing
from factories import make_cluster
from webutil import USERS, monday, synthetic_clusters


def test_weekly_bins_in_sql_on_both_dialects(store: object) -> None:
    now = time.time()
    rows = synthetic_clusters(now, weeks=5)
    write_records(store, rows)
    weekly = weekly_usage(store)
    expected: dict[tuple[str, float], int] = {}
    for c in rows:
        key = (c.user, monday(c.started_at))
        expected[key] = expected.get(key, 0) + 1
    assert {(r["user"], r["week_start"]): r["clusters"] for r in weekly} == expected
    assert all(r["core_seconds"] == pytest.approx(4 * 3600.0) for r in weekly)
    totals = account_statistics(account_totals(store), cost_rates)
    assert totals["clusters"] == len(rows)
    assert totals["tasks_executed"] == sum(c.tasks_executed for c in rows)
    week = monday(now) - 7 * 86400
    listed = clusters_in_week(store, user="alice", week_start=week)
    assert [c["user"] for c in listed] == ["alice"]
    usage = member_usage(weekly, cost_rates)
    assert [m["user"] for m in usage["members"]] == sorted(USERS)


def test_a_cluster_on_a_monday_midnight_starts_that_week(store: object) -> None:
    [row] = synthetic_clusters(time.time(), weeks=1)[:1]
    row.started_at = monday(row.started_at)  # exactly Monday 00:00 UTC
    write_records(store, [row])
    [binned] = weekly_usage(store)
    assert binned["week_start"] == row.started_at


def _priced(account: str) -> tuple[float | None, float | None]:
    return {"cheap": (0.01, None), "dear": (1.0, 0.5)}.get(account, (None, None))


def test_listing_filters_sorts_and_pages_in_the_database(store: object) -> None:
    now = time.time()
    rows = synthetic_clusters(now, weeks=5)
    live = make_cluster(
        "Live_50% one",
        start=now - 60,
        id="live",
        user="dave",
        account="dear",
        stopped_at=None,
        last_seen_at=now - 5,
        tasks_erred=0,
    )
    stale = make_cluster("stale", start=now - 7200, id="stale", user="dave", account="cheap",
                         stopped_at=None, last_seen_at=now - RUNNING_WITHIN - 60)  # fmt: skip
    write_records(store, [*rows, live, stale])
    everyone = len(rows) + 2

    def ids(**kw: object) -> tuple[int, list[str]]:
        total, page = cluster_page(store, now=now, prices=_priced, **kw)  # type: ignore[arg-type]
        return total, [r["id"] for r in page]

    assert ids(running=True) == (1, ["live"])
    # a substring of the name or the user, any case; % and _ are plain characters
    assert ids(q="LIVE_50%") == (1, ["live"]) and ids(q="50%%")[0] == 0
    assert ids(q="dav")[0] == 2 and ids(q="bob")[0] == sum(c.user == "bob" for c in rows)
    erred = sorted((c for c in rows if c.tasks_erred), key=lambda c: -c.started_at)
    erred.append(stale)  # make_cluster's 2 errored tasks
    assert ids(errors=True)[0] == len(erred)
    # paging: every cluster once, newest first, the total on every page
    seen: list[str] = []
    for offset in range(0, everyone, 4):
        total, page = ids(offset=offset, limit=4)
        assert total == everyone
        seen += page
    assert seen == ids(limit=None)[1] and len(set(seen)) == everyone
    # sorts: by a column, by duration, and by cost at each account's prices (unpriced last)
    tasks = [
        r["tasks_executed"] for r in cluster_page(store, now=now, prices=_priced, sort="tasks")[1]
    ]
    assert tasks == sorted(tasks, reverse=True)
    _, by_duration = cluster_page(store, now=now, prices=_priced, sort="duration", descending=False)
    assert by_duration[0]["id"] == "live"
    # live: 16 core-hours x 1.0 + 64 GiB-hours x 0.5; stale: 16 core-hours x 0.01
    _, costly = cluster_page(store, now=now, prices=_priced, sort="cost")
    assert [r["id"] for r in costly[:2]] == ["live", "stale"]
    assert all(r["account"] == "default" for r in costly[2:])  # no price: last
    with pytest.raises(ValueError, match="sort must be one of"):
        cluster_page(store, now=now, prices=_priced, sort="nonsense")


def test_listing_view_and_usage_weeks(store: object) -> None:
    now = time.time()
    write_records(store, synthetic_clusters(now, weeks=3))
    listing = cluster_listing(store, ListingQuery(user="bob", limit=2))  # type: ignore[arg-type]
    assert listing.total == 3 and len(listing.clusters) == 2 and listing.query.user == "bob"
    assert not any(c.running for c in listing.clusters)
    # every week of the range is on the axis, the idle ones too
    usage = usage_view(store, 6, now=now)  # type: ignore[arg-type]
    assert len(usage.weeks) == 6 and usage.weeks[-1] == monday(now)
    assert all(w2 - w1 == 7 * 86400 for w1, w2 in zip(usage.weeks, usage.weeks[1:], strict=False))
    alice = next(m for m in usage.members if m.user == "alice")
    assert alice.clusters == [0, 0, 1, 1, 1, 0]
    # one basis for the accounts priced by the same rates
    stats = statistics_view(store, time_range(0)).statistics  # type: ignore[arg-type]
    assert [(b.account, b.accounts) for b in stats.cost_basis] == [("default", ["default"])]


def test_icicle_self_and_total() -> None:
    leaf = {"count": 3, "description": {"name": "leaf", "filename": "f.py", "line_number": 2}}
    tree = {
        "count": 10,
        "description": {},
        "children": {"a;f.py;1": {"count": 8, "description": {"name": "a"}, "children": {
            "leaf;f.py;2": {**leaf, "children": {}}}}},
        INNERMOST_COUNTED: 0,  # counts as drawn: each frame's samples, its own included
    }  # fmt: skip
    merged = merge_trees([tree, tree])
    out = icicle(merged, 0.01)
    assert out["labels"] == ["all", "a", "leaf"]
    assert out["values"] == [20, 16, 6]
    assert out["self_s"] == pytest.approx([0.04, 0.10, 0.06])
    assert out["total_s"] == pytest.approx([0.2, 0.16, 0.06])
    assert out["parents"] == ["", "all", "all/0"]
    assert out["where"][2] == "f.py:2"


def test_graph_layers_and_colours() -> None:
    groups = [
        {"name": "load", "dependencies": [], "nbytes_total": 100, "durations": {"compute": 1.0}},
        {"name": "mid", "dependencies": ["load"], "durations": {"transfer": 2.0, "compute": 1.0}},
        {"name": "out", "dependencies": ["mid", "load", "elsewhere"], "tasks_erred": 2},
    ]
    graph = task_group_graph(groups)
    x = {n["name"]: n["x"] for n in graph["nodes"]}
    assert x == {"load": 0, "mid": 1, "out": 2}
    assert len(graph["edges"]) == 3  # the dependency outside the computation is left out
    nodes = {n["name"]: n for n in graph["nodes"]}
    assert nodes["mid"]["activity"] == "transfer" and nodes["out"]["failed"]
    assert nodes["load"]["size"] > nodes["mid"]["size"]
    assert dominant_activity({}) is None
