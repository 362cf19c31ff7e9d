"""Pure functions over stored records: statistics, cost, durations, span trees, fine
metrics. Nothing here reads config, a store or Dask: prices come in as data
(:func:`daskscope.pricing.cost_rates` makes them)."""

from __future__ import annotations

from daskscope.analysis.cluster import (
    cluster_statistics,
    fine_metrics_table,
    span_tree,
)
from daskscope.analysis.cost import Rates, RatesOf, cost, cost_parts
from daskscope.analysis.duration import elapsed, record_duration

__all__ = [
    "Rates",
    "RatesOf",
    "cluster_statistics",
    "cost",
    "cost_parts",
    "elapsed",
    "fine_metrics_table",
    "record_duration",
    "span_tree",
]
