"""Cluster-level numbers computed from stored rows (plain dicts, no database, no Dask).

Every function takes the row dicts the store returns (field names of ``daskscope.model``)
and returns plain, JSON-friendly dicts. A number that cannot be measured is left out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from daskscope import config

__all__ = ["cluster_statistics", "cost_rates", "fine_metrics_table", "span_tree"]

GIB = 2**30
HOUR = 3600.0

Row = Mapping[str, Any]
MetricKey = tuple[str, str, str, str]  # (context, prefix, activity, unit)


def cost_rates(account: str | None) -> dict[str, Any]:
    """Prices for ``account`` from config ``daskscope.cost.<account>``, else ``default``.

    Returns ``{"account", "currency", "per_core_hour", "per_gib_hour"}``; a price that is
    not configured is absent. ``account`` says which config entry applied (None: none).
    """
    # Read the whole mapping: account names may contain dots, which dask's dotted
    # config lookup would split.
    table = config.get("cost") or {}
    used = account if account in table else "default" if "default" in table else None
    entry = (table.get(used) if used is not None else None) or {}
    rates: dict[str, Any] = {"account": used, "currency": entry.get("currency", "USD")}
    for key in ("per-core-hour", "per-gib-hour"):
        value = entry.get(key, entry.get(key.replace("-", "_")))
        if value is not None:
            rates[key.replace("-", "_")] = float(value)
    return rates


def cluster_duration(cluster: Row) -> float | None:
    """Seconds from the first to the last sign of life (the store's value if present)."""
    if cluster.get("duration_s") is not None:
        return float(cluster["duration_s"])
    start = cluster.get("started_at")
    end = cluster.get("stopped_at") or cluster.get("last_seen_at")
    if start is None or end is None:
        return None
    return max(0.0, float(end) - float(start))


def cluster_statistics(cluster: Row, rates: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Headline numbers of one cluster row; ``rates`` as returned by :func:`cost_rates`.

    Utilisation is compute seconds / core seconds (absent when no core time was
    recorded). Cost is core-hours x per-core-hour + GiB-hours x per-gib-hour, with the
    rates it used as its basis; absent when no per-core-hour price is known.
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
    duration = cluster_duration(cluster)
    if duration is not None:
        stats["duration_s"] = duration
    if core_s > 0:
        stats["utilisation"] = compute_s / core_s
    if rates and rates.get("per_core_hour") is not None:
        per_core = float(rates["per_core_hour"])
        per_gib = rates.get("per_gib_hour")
        core_cost = stats["core_hours"] * per_core
        memory_cost = stats["memory_gib_hours"] * float(per_gib) if per_gib is not None else 0.0
        stats["cost"] = {
            "total": core_cost + memory_cost,
            "cores": core_cost,
            "memory": memory_cost,
            "currency": rates.get("currency", "USD"),
            "per_core_hour": per_core,
            "per_gib_hour": None if per_gib is None else float(per_gib),
            "account": rates.get("account"),
        }
    return stats


def _metric_key(row: Row) -> MetricKey:
    return (row.get("context", ""), row["prefix"], row["activity"], row["unit"])


def _metric_rows(values: Mapping[MetricKey, float]) -> list[dict[str, Any]]:
    rows = [
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


def fine_metrics_table(
    span_metrics: Iterable[Row],
    *,
    spans: Iterable[Row] | None = None,
    tag: str | None = None,
) -> list[dict[str, Any]]:
    """Exclusive fine metrics summed by (activity, prefix, unit).

    With ``tag``, only metrics of spans whose ``name`` (a list of tags) contains it;
    ``spans`` is then needed to look the names up. Since child spans carry their
    parents' tags and metrics are exclusive, this sums the tagged subtrees once each.
    Rows come back as ``{"activity", "prefix", "unit", "value"}``, per unit largest first.
    """
    wanted: set[str] | None = None
    if tag is not None:
        if spans is None:
            raise ValueError("fine_metrics_table(tag=...) needs the spans to read their names")
        wanted = {s["span_id"] for s in spans if tag in (s.get("name") or ())}
    sums: dict[tuple[str, str, str], float] = {}
    for row in span_metrics:
        if wanted is not None and row["span_id"] not in wanted:
            continue
        key = (row["activity"], row["prefix"], row["unit"])
        sums[key] = sums.get(key, 0.0) + float(row["value"])
    rows = [{"activity": a, "prefix": p, "unit": u, "value": v} for (a, p, u), v in sums.items()]
    rows.sort(key=lambda r: (r["unit"], -r["value"], r["activity"], r["prefix"]))
    return rows
