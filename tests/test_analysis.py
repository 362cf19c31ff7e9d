"""Cluster statistics, cost, durations, span trees and fine-metric tables against
hand-computed numbers; the analyses are pure (no config, store or Dask)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from daskscope import analysis
from daskscope.analysis import (
    cluster_statistics,
    cost,
    cost_parts,
    elapsed,
    fine_metrics_table,
    record_duration,
    span_tree,
)
from daskscope.analysis.usage import account_statistics, member_usage

GIB = 2**30

CLUSTER = {
    "id": "c1",
    "account": "default",
    "started_at": 1000.0,
    "stopped_at": 4600.0,
    "last_seen_at": 4600.0,
    "workers_peak": 2,
    "threads_peak": 4,
    "core_seconds": 7200.0,  # 2 core-hours
    "compute_seconds": 3600.0,  # 1 hour busy
    "memory_limit_byte_seconds": 4 * GIB * 3600.0,  # 4 GiB for one hour
    "tasks_executed": 10,
    "tasks_erred": 1,
    "bytes_processed": 12345,
}

RATES = {"account": "default", "currency": "EUR", "per_core_hour": 0.04, "per_gib_hour": 0.005}


def test_cluster_statistics_hand_computed() -> None:
    stats = cluster_statistics(CLUSTER, RATES)
    assert stats["duration_s"] == 3600.0
    assert stats["core_hours"] == 2.0
    assert stats["compute_hours"] == 1.0
    assert stats["memory_gib_hours"] == pytest.approx(4.0)
    assert stats["utilisation"] == 0.5
    assert (stats["workers_peak"], stats["threads_peak"]) == (2, 4)
    assert (stats["tasks_executed"], stats["tasks_erred"]) == (10, 1)
    assert stats["bytes_processed"] == 12345
    cost = stats["cost"]
    # 2 core-hours x 0.04 + 4 GiB-hours x 0.005 = 0.08 + 0.02
    assert cost["cores"] == pytest.approx(0.08)
    assert cost["memory"] == pytest.approx(0.02)
    assert cost["total"] == pytest.approx(0.10)
    assert (cost["currency"], cost["per_core_hour"], cost["per_gib_hour"]) == ("EUR", 0.04, 0.005)


def test_unmeasurable_numbers_are_absent() -> None:
    idle = {**CLUSTER, "core_seconds": 0.0, "stopped_at": None, "last_seen_at": 1600.0}
    stats = cluster_statistics(idle, {"account": None, "currency": "USD"})
    assert "utilisation" not in stats  # no core time: not 0 %, unknown
    assert "cost" not in stats  # no price configured
    assert stats["duration_s"] == 600.0  # still running: last sign of life counts
    assert "duration_s" not in cluster_statistics(
        {**CLUSTER, "started_at": None, "duration_s": None}
    )


def test_store_duration_wins() -> None:
    assert cluster_statistics({**CLUSTER, "duration_s": 12.5})["duration_s"] == 12.5


def test_cost_is_computed_once_for_clusters_and_accounts() -> None:
    core_s, mem_s = 7200.0, 4 * GIB * 3600.0
    parts = cost_parts(core_s, mem_s, RATES)
    assert parts is not None
    assert cost(core_s, mem_s, RATES) == parts["total"]
    assert cluster_statistics(CLUSTER, RATES)["cost"] == parts
    # accounts and members price their summed rows with the same function
    row = {"account": "default", "core_seconds": core_s, "memory_limit_byte_seconds": mem_s,
           "cluster_seconds": 3600.0, "compute_seconds": 3600.0, "clusters": 1}  # fmt: skip
    assert account_statistics([row], lambda _: RATES)["cost"] == parts["total"]
    weekly = [{**row, "user": "ann", "week_start": 0.0}]
    assert member_usage(weekly, lambda _: RATES)["members"][0]["cost"] == [parts["total"]]
    assert cost(core_s, mem_s, {"currency": "USD"}) is None  # no core price: no cost
    assert cost_parts(3600.0, mem_s, {"per_core_hour": 1.0})["memory"] == 0.0  # type: ignore[index]


def test_durations_from_start_and_stop_or_last_sign_of_life() -> None:
    assert elapsed(10.0, 25.0) == 15.0
    assert elapsed(10.0, None, 12.5) == 2.5  # still running
    assert elapsed(10.0, 25.0, 40.0) == 15.0  # a stop wins over the last sign of life
    assert elapsed(10.0, 9.0) == 0.0  # clocks of two hosts may disagree
    assert elapsed(None, 25.0) is None and elapsed(10.0, None) is None
    assert record_duration({"duration_s": 3.0, "started_at": 0.0, "stopped_at": 9.0}) == 3.0
    assert record_duration({"started_at": 0.0, "last_seen_at": 9.0}) == 9.0


def test_the_analyses_import_no_config_store_or_dask() -> None:
    # the standard library's pure parts; the advice package's docs writer (its __main__)
    # may also parse arguments and write a file
    allowed = (
        "daskscope.analysis", "collections", "typing", "math", "re", "__future__",
        "dataclasses", "heapq", "statistics", "logging", "itertools",
    )  # fmt: skip
    for path in Path(analysis.__file__).parent.rglob("*.py"):
        if path.name == "__main__.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            for name in names:
                assert name.startswith(allowed), f"{path.name} imports {name}"


def _span(span_id: str, name: list[str], parent: str | None, at: float) -> dict:
    return {"span_id": span_id, "name": name, "parent_span_id": parent, "enqueued_at": at}


def _metric(span_id: str, prefix: str, activity: str, value: float, unit: str = "seconds"):
    return {
        "span_id": span_id,
        "context": "execute",
        "prefix": prefix,
        "activity": activity,
        "unit": unit,
        "value": value,
    }


SPANS = [
    _span("a", ["analysis"], None, 1.0),
    _span("r", ["analysis", "reduce"], "a", 3.0),
    _span("l", ["analysis", "load"], "a", 2.0),
    _span("d", ["default"], None, 0.5),
    _span("o", ["orphan"], "gone", 4.0),
]
METRICS = [
    _metric("a", "x", "thread-cpu", 1.0),
    _metric("l", "x", "thread-cpu", 2.0),
    _metric("l", "x", "memory-read", 1024.0, unit="bytes"),
    _metric("r", "y", "thread-cpu", 3.0),
    _metric("r", "y", "thread-noncpu", 0.5),
    _metric("d", "z", "thread-cpu", 7.0),
]


def test_span_tree_nesting_and_totals() -> None:
    roots = span_tree(SPANS, METRICS)
    assert [r["span_id"] for r in roots] == ["d", "a", "o"]  # by enqueue time
    analysis = roots[1]
    assert [c["span_id"] for c in analysis["children"]] == ["l", "r"]
    own = {(m["prefix"], m["activity"]): m["value"] for m in analysis["metrics"]}
    assert own == {("x", "thread-cpu"): 1.0}
    totals = {(m["prefix"], m["activity"], m["unit"]): m["value"] for m in analysis["totals"]}
    assert totals == {
        ("x", "thread-cpu", "seconds"): 3.0,
        ("y", "thread-cpu", "seconds"): 3.0,
        ("y", "thread-noncpu", "seconds"): 0.5,
        ("x", "memory-read", "bytes"): 1024.0,
    }
    reduce_ = analysis["children"][1]
    assert reduce_["children"] == []
    assert {m["activity"] for m in reduce_["totals"]} == {"thread-cpu", "thread-noncpu"}
    assert roots[2]["metrics"] == [] and roots[2]["totals"] == []  # measured nothing


def test_fine_metrics_table_by_tag() -> None:
    table = fine_metrics_table(METRICS, spans=SPANS, tag="analysis")
    got = {(r["activity"], r["prefix"], r["unit"]): r["value"] for r in table}
    assert got == {
        ("thread-cpu", "x", "seconds"): 3.0,
        ("thread-cpu", "y", "seconds"): 3.0,
        ("thread-noncpu", "y", "seconds"): 0.5,
        ("memory-read", "x", "bytes"): 1024.0,
    }
    reduce_only = fine_metrics_table(METRICS, spans=SPANS, tag="reduce")
    assert sum(r["value"] for r in reduce_only) == 3.5
    everything = fine_metrics_table(METRICS)
    assert sum(r["value"] for r in everything if r["unit"] == "seconds") == 13.5
    assert fine_metrics_table(METRICS, spans=SPANS, tag="nothing") == []
    with pytest.raises(ValueError, match="spans"):
        fine_metrics_table(METRICS, tag="analysis")
