"""Lifetime totals across the store, what ``/metrics`` exposes to Prometheus
(``web/routes/metrics.py``): clusters per account, member and state with their summed
capacity and tasks, task prefixes per account, and fine-metric seconds per account,
prefix and activity. Each is one grouped query, optionally of one account; the span
tags' figures are :func:`daskscope.store.span_cost.span_cost_sums`, the costs page's.

The figures are the dashboard's: a cluster's ``core_seconds``, ``tasks_executed`` ... as
the cluster page shows them (summed, as ``store.analytics.account_totals`` sums them per
account), a prefix's as the cluster page's prefix table, the fine metrics as its
``fine_metrics`` (``store.queries.cluster_detail``), here summed over clusters.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.sql.expression import ColumnElement

from daskscope.store import schema as s
from daskscope.store.analytics import RUNNING_WITHIN
from daskscope.store.database import Database, as_engine

__all__ = [
    "STATES",
    "cluster_totals",
    "fine_metric_interval_seconds",
    "fine_metric_seconds",
    "prefix_totals",
]

Row = dict[str, Any]

#: A cluster's state: ``running`` (no stop recorded, written within
#: :data:`~daskscope.store.analytics.RUNNING_WITHIN`, as the dashboard's badge says),
#: ``stopped`` (its close recorded), ``silent`` (no stop recorded and not written since:
#: a scheduler that died, or a recorder cut off)
STATES = ("running", "stopped", "silent")


def _sum(value: Any) -> ColumnElement[Any]:
    # Integers summed as floats: SQLite raises on a 64-bit integer overflow
    return sa.func.coalesce(sa.func.sum(sa.cast(value, sa.Double)), 0.0)


def _state(now: float) -> ColumnElement[str]:
    c = s.clusters.c
    return sa.case(
        (c.stopped_at.is_not(None), sa.literal("stopped")),
        (c.last_seen_at >= now - RUNNING_WITHIN, sa.literal("running")),
        else_=sa.literal("silent"),
    )


def _plain(conn: sa.Connection, query: sa.Select[Any], ints: tuple[str, ...]) -> list[Row]:
    result = conn.execute(query)
    keys = list(result.keys())
    rows = []
    for values in result.all():
        row = dict(zip(keys, values, strict=True))
        for key in keys:
            if isinstance(row[key], (int, float)) and not isinstance(row[key], bool):
                row[key] = int(row[key]) if key in ints else float(row[key])
        rows.append(row)
    return rows


def cluster_totals(
    store: Database | sa.Engine, *, now: float, account: str | None = None
) -> list[Row]:
    """Per account, member (``user``) and state (:data:`STATES` at ``now``): ``clusters``
    and the sums of ``core_seconds``, ``memory_limit_byte_seconds``, ``compute_seconds``,
    ``tasks_executed`` and ``tasks_erred`` of their cluster rows; only ``account``'s
    rows when given."""
    c = s.clusters.c
    state = _state(now).label("state")
    query = sa.select(
        c.account,
        c.user,
        state,
        sa.func.count().label("clusters"),
        _sum(c.core_seconds).label("core_seconds"),
        _sum(c.memory_limit_byte_seconds).label("memory_limit_byte_seconds"),
        _sum(c.compute_seconds).label("compute_seconds"),
        _sum(c.tasks_executed).label("tasks_executed"),
        _sum(c.tasks_erred).label("tasks_erred"),
    ).group_by(c.account, c.user, state)
    if account is not None:
        query = query.where(c.account == account)
    with as_engine(store).connect() as conn:
        return _plain(conn, query, ("clusters", "tasks_executed", "tasks_erred"))


def prefix_totals(store: Database | sa.Engine, *, account: str | None = None) -> list[Row]:
    """Per account and task prefix (``prefix``): ``tasks_executed``, ``tasks_erred``
    and ``duration_s`` (task seconds) summed over its clusters' prefix rows."""
    p, c = s.task_prefixes.c, s.clusters.c
    query = (
        sa.select(
            c.account,
            p.name.label("prefix"),
            _sum(p.tasks_executed).label("tasks_executed"),
            _sum(p.tasks_erred).label("tasks_erred"),
            _sum(p.duration_s).label("duration_s"),
        )
        .select_from(s.task_prefixes)
        .join(s.clusters, c.id == p.cluster_id)
        .group_by(c.account, p.name)
    )
    if account is not None:
        query = query.where(c.account == account)
    with as_engine(store).connect() as conn:
        return _plain(conn, query, ("tasks_executed", "tasks_erred"))


def fine_metric_seconds(store: Database | sa.Engine, *, account: str | None = None) -> list[Row]:
    """Per account, task prefix and activity: the fine metrics in seconds (``value``)
    summed over every span of its clusters (spans' metrics are exclusive, so each
    second counts once)."""
    m, c = s.span_metrics.c, s.clusters.c
    query = (
        sa.select(c.account, m.prefix, m.activity, _sum(m.value).label("value"))
        .select_from(s.span_metrics)
        .join(s.clusters, c.id == m.cluster_id)
        .where(m.unit == "seconds")
        .group_by(c.account, m.prefix, m.activity)
    )
    if account is not None:
        query = query.where(c.account == account)
    with as_engine(store).connect() as conn:
        return _plain(conn, query, ())


def fine_metric_interval_seconds(
    store: Database | sa.Engine, *, account: str | None = None
) -> list[Row]:
    """Per account and activity: the fine metrics in seconds (``value``) summed over the
    flush intervals of its clusters. Interval rows are only ever added, so each sum only
    grows: the counters ``/metrics`` exposes from it are monotonic."""
    f, c = s.fine_metric_intervals.c, s.clusters.c
    query = (
        sa.select(c.account, f.activity, _sum(f.value).label("value"))
        .select_from(s.fine_metric_intervals)
        .join(s.clusters, c.id == f.cluster_id)
        .where(f.unit == "seconds")
        .group_by(c.account, f.activity)
    )
    if account is not None:
        query = query.where(c.account == account)
    with as_engine(store).connect() as conn:
        return _plain(conn, query, ())
