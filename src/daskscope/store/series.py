"""Read queries behind the cluster page's charts: the span tree's shape with every
fine-metric row (for sums over a subtree), the fine metrics' gains flush interval by
flush interval, and the worker departures with their reason."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from daskscope.store import schema as s
from daskscope.store.database import Database, as_engine

__all__ = ["fine_metric_intervals", "span_tree_rows"]

Row = dict[str, Any]


def span_tree_rows(store: Database | sa.Engine, cluster_id: str) -> tuple[list[Row], list[Row]]:
    """A cluster's spans (id, parent, tags) and all its fine-metric rows (exclusive per
    span, as Dask keeps them)."""
    sp = s.spans.c
    m = s.span_metrics.c
    spans_query = sa.select(sp.span_id, sp.parent_span_id, sp.name).where(
        sp.cluster_id == cluster_id
    )
    metrics_query = sa.select(m.span_id, m.context, m.prefix, m.activity, m.unit, m.value).where(
        m.cluster_id == cluster_id
    )
    with as_engine(store).connect() as conn:
        spans = [dict(r._mapping) for r in conn.execute(spans_query)]
        metrics = [dict(r._mapping) for r in conn.execute(metrics_query)]
    return spans, metrics


def fine_metric_intervals(
    store: Database | sa.Engine, cluster_id: str, *, unit: str | None = None
) -> list[Row]:
    """A cluster's fine-metric intervals (``fine_metric_intervals``: what each
    ``(context, activity, unit)`` gained between two flushes), oldest first; of one
    ``unit`` ("seconds", "bytes", ...) when given."""
    f = s.fine_metric_intervals.c
    query = (
        sa.select(f.started_at, f.stopped_at, f.context, f.activity, f.unit, f.value)
        .where(f.cluster_id == cluster_id)
        .order_by(f.started_at, f.context, f.activity, f.unit)
    )
    if unit is not None:
        query = query.where(f.unit == unit)
    with as_engine(store).connect() as conn:
        return [dict(r._mapping) for r in conn.execute(query)]
