"""Pure functions over stored records: statistics, cost, span trees, fine metrics."""

from __future__ import annotations

from daskscope.analysis.cluster import (
    cluster_statistics,
    cost_rates,
    fine_metrics_table,
    span_tree,
)

__all__ = ["cluster_statistics", "cost_rates", "fine_metrics_table", "span_tree"]
