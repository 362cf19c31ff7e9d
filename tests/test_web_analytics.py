"""The account queries on SQLite and PostgreSQL, and the pure graph/flame-graph code."""

from __future__ import annotations

import time

import pytest

from daskscope.analysis.flamegraph import icicle, merge_trees
from daskscope.analysis.graph import dominant_activity, task_group_graph
from daskscope.analysis.usage import account_statistics, member_usage
from daskscope.pricing import cost_rates
from daskscope.store import write_records
from daskscope.store.analytics import account_totals, clusters_in_week, weekly_usage
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


def test_icicle_self_and_total() -> None:
    leaf = {"count": 3, "description": {"name": "leaf", "filename": "f.py", "line_number": 2}}
    tree = {
        "count": 10,
        "description": {},
        "children": {"a;f.py;1": {"count": 8, "description": {"name": "a"}, "children": {
            "leaf;f.py;2": {**leaf, "children": {}}}}},
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
