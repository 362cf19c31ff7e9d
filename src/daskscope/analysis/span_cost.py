"""Cost attributed to spans and computations: a part of a cluster costs the cluster's
cost (:func:`daskscope.analysis.cost.cost_parts`) times the share of the cluster's core
time its tasks kept busy; what no task used is the idle remainder, not attributed.

    share(part)  = task seconds of the part / core seconds of the cluster   (≤ 1)
    cost(part)   = cost(cluster) x share(part)
    idle         = cost(cluster) - Σ cost(parts that partition the cluster's tasks)

A span's task seconds are Dask's ``Span.duration`` (its subtree's summed task time); a
computation's are its task groups' summed task time. Pure functions over rows.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["attributed_capacity", "attributed_cost", "idle_cost"]


def _share(task_seconds: float, core_seconds: float) -> float:
    # Task time beyond the core time recorded (a cluster seen late) cannot cost more
    # than the whole cluster
    return min(task_seconds / core_seconds, 1.0) if core_seconds > 0 else 0.0


def _scaled(cluster_cost: Mapping[str, Any], share: float) -> dict[str, Any]:
    return {
        "share": share,
        "total": float(cluster_cost["total"]) * share,
        "cores": float(cluster_cost["cores"]) * share,
        "memory": float(cluster_cost["memory"]) * share,
        "currency": cluster_cost.get("currency", "USD"),
    }


def attributed_cost(
    cluster_cost: Mapping[str, Any] | None, task_seconds: float, core_seconds: float
) -> dict[str, Any] | None:
    """``{"share", "total", "cores", "memory", "currency"}`` of a part whose tasks ran
    ``task_seconds`` on a cluster of ``core_seconds`` costing ``cluster_cost`` (as
    ``cost_parts`` returns it); None when the cluster has no price."""
    if cluster_cost is None:
        return None
    return _scaled(cluster_cost, _share(task_seconds, core_seconds))


def idle_cost(
    cluster_cost: Mapping[str, Any] | None, attributed_seconds: float, core_seconds: float
) -> dict[str, Any] | None:
    """The cost not attributed: the cluster's core time that the parts' tasks
    (``attributed_seconds`` in all, parts that do not overlap) left unused."""
    if cluster_cost is None:
        return None
    return _scaled(cluster_cost, 1.0 - _share(attributed_seconds, core_seconds))


def attributed_capacity(
    task_seconds: float, core_seconds: float, memory_byte_seconds: float
) -> tuple[float, float]:
    """The core seconds and memory byte-seconds of a cluster that a part's
    ``task_seconds`` used: the cluster's, times the part's share. ``cost_parts`` of
    them is :func:`attributed_cost` (the cost is linear in both), so that many parts'
    costs can be summed as capacity first (``store.span_cost`` does so in SQL)."""
    share = _share(task_seconds, core_seconds)
    return core_seconds * share, memory_byte_seconds * share
