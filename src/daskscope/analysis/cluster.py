"""Cluster-level numbers computed from stored rows (plain dicts, no database, no Dask).

Every function takes the row dicts the store returns (field names of ``daskscope.model``)
and returns plain, JSON-friendly dicts. A number that cannot be measured is left out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from daskscope.analysis.cost import GIB, HOUR, cost_parts
from daskscope.analysis.duration import record_duration

__all__ = ["cluster_statistics", "fine_metrics_table", "span_tree", "subtree_ids"]

Row = Mapping[str, Any]
MetricKey = tuple[str, str, str, str]  # (context, prefix, activity, unit)


def cluster_statistics(cluster: Row, rates: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Headline numbers of one cluster row, priced by ``rates`` (as
    :func:`daskscope.pricing.cost_rates` returns them; no price, no cost).

    Utilisation is compute seconds / core seconds (absent when no core time was
    recorded). Cost is :func:`daskscope.analysis.cost.cost_parts`, absent when no
    per-core-hour price is known.
    """
    core_s = float(cluster.get("core_seconds") or 0.0)
    compute_s = float(cluster.get("compute_seconds") or 0.0)
    mem_byte_s = float(cluster.get("memory_limit_byte_seconds") or 0.0)
    stats: dict[str, Any] = {
        "workers_peak": int(cluster.get("workers_peak") or 0),
        "threads_peak": int(cluster.get("threads_peak") or 0),
        "core_hours": core_s / HOUR,
        "compute_hours": compute_s / HOUR,
        "tasks_executed": int(cluster.get("tasks_executed") or 0),
        "tasks_erred": int(cluster.get("tasks_erred") or 0),
        "bytes_processed": int(cluster.get("bytes_processed") or 0),
        "memory_gib_hours": mem_byte_s / GIB / HOUR,
    }
    duration = record_duration(cluster)
    if duration is not None:
        stats["duration_s"] = duration
    if core_s > 0:
        stats["utilisation"] = compute_s / core_s
    cost = cost_parts(core_s, mem_byte_s, rates or {})
    if cost is not None:
        stats["cost"] = cost
    return stats


def _metric_key(row: Row) -> MetricKey:
    return (row.get("context", ""), row["prefix"], row["activity"], row["unit"])


def _metric_rows(values: Mapping[MetricKey, float]) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = [
        {"context": c, "prefix": p, "activity": a, "unit": u, "value": v}
        for (c, p, a, u), v in values.items()
    ]
    rows.sort(key=lambda r: (r["unit"], -r["value"], r["activity"], r["prefix"]))
    return rows


def span_tree(spans: Iterable[Row], span_metrics: Iterable[Row]) -> list[dict[str, Any]]:
    """Spans nested by ``parent_span_id``: the roots, each node a copy of its row plus

    - ``children``: nodes, in order of ``enqueued_at``;
    - ``metrics``: the span's own (exclusive) fine metrics, one dict per
      (context, prefix, activity, unit) with a ``value``;
    - ``totals``: the same summed over the span and all its descendants.

    A span whose parent is not among ``spans`` becomes a root.
    """
    own: dict[str, dict[MetricKey, float]] = {}
    for row in span_metrics:
        bucket = own.setdefault(row["span_id"], {})
        key = _metric_key(row)
        bucket[key] = bucket.get(key, 0.0) + float(row["value"])

    nodes = {row["span_id"]: {**row, "children": []} for row in spans}
    roots: list[dict[str, Any]] = []
    for node in nodes.values():
        parent = nodes.get(node.get("parent_span_id"))
        if parent is not None and parent is not node:
            parent["children"].append(node)
        else:
            roots.append(node)

    def by_time(n: Row) -> tuple[float, str]:
        return (float(n.get("enqueued_at") or 0.0), n["span_id"])

    def finish(root: dict[str, Any], seen: set[str]) -> None:
        # Depth first without recursion: a chain of spans may be thousands deep
        order, pending = [], [root]
        while pending:
            node = pending.pop()
            seen.add(node["span_id"])
            node["children"] = sorted(
                (c for c in node["children"] if c["span_id"] not in seen), key=by_time
            )
            seen.update(c["span_id"] for c in node["children"])
            order.append(node)
            pending.extend(node["children"])
        totals_of: dict[str, dict[MetricKey, float]] = {}
        for node in reversed(order):  # children before their parents
            mine = own.get(node["span_id"], {})
            totals = dict(mine)
            for child in node["children"]:
                for key, value in totals_of[child["span_id"]].items():
                    totals[key] = totals.get(key, 0.0) + value
            totals_of[node["span_id"]] = totals
            node["metrics"] = _metric_rows(mine)
            node["totals"] = _metric_rows(totals)

    seen: set[str] = set()
    roots.sort(key=by_time)
    for root in roots:
        finish(root, seen)
    return roots


def subtree_ids(spans: Iterable[Row], span_id: str) -> set[str]:
    """``span_id`` and every span below it (by ``parent_span_id``); empty when no span
    has that id."""
    children: dict[str | None, list[str]] = {}
    known = set()
    for row in spans:
        known.add(row["span_id"])
        children.setdefault(row.get("parent_span_id"), []).append(row["span_id"])
    if span_id not in known:
        return set()
    found, pending = set(), [span_id]
    while pending:  # without recursion: a chain of spans may be thousands deep
        sid = pending.pop()
        if sid not in found:
            found.add(sid)
            pending.extend(children.get(sid, ()))
    return found


def fine_metrics_table(
    span_metrics: Iterable[Row],
    *,
    spans: Iterable[Row] | None = None,
    tag: str | None = None,
    span_id: str | None = None,
) -> list[dict[str, Any]]:
    """Exclusive fine metrics summed by (activity, prefix, unit).

    With ``tag``, only metrics of spans whose ``name`` (a list of tags) contains it;
    ``spans`` is then needed to look the names up. Since child spans carry their
    parents' tags and metrics are exclusive, this sums the tagged subtrees once each.
    With ``span_id``, only that span's subtree (``spans`` with ``parent_span_id``).
    Rows come back as ``{"activity", "prefix", "unit", "value"}``, per unit largest first.
    """
    wanted: set[str] | None = None
    if (tag is not None or span_id is not None) and spans is None:
        raise ValueError("fine_metrics_table(tag=, span_id=) needs the spans")
    spans = list(spans or ())
    if tag is not None:
        wanted = {s["span_id"] for s in spans if tag in (s.get("name") or ())}
    if span_id is not None:
        subtree = subtree_ids(spans, span_id)
        wanted = subtree if wanted is None else wanted & subtree
    sums: dict[tuple[str, str, str], float] = {}
    for row in span_metrics:
        if wanted is not None and row["span_id"] not in wanted:
            continue
        key = (row["activity"], row["prefix"], row["unit"])
        sums[key] = sums.get(key, 0.0) + float(row["value"])
    rows: list[dict[str, Any]] = [
        {"activity": a, "prefix": p, "unit": u, "value": v} for (a, p, u), v in sums.items()
    ]
    rows.sort(key=lambda r: (r["unit"], -r["value"], r["activity"], r["prefix"]))
    return rows
