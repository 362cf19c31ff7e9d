"""Workflow metrics: ``MetricsCollector`` and the per-chunk/section trackers.

Light to import (worker processes re-import the user's script): the collector, the
backends, Rich and matplotlib are loaded on first use.
"""

from __future__ import annotations

from typing import Any

from daskscope.workflow.tracking import (
    current_chunk,
    is_enabled,
    set_enabled,
    track_bytes,
    track_memory,
    track_metrics,
    track_time,
)

__all__ = [
    "MetricsCollector",
    "current_chunk",
    "is_enabled",
    "register_backend",
    "register_derived_metric",
    "set_enabled",
    "track_bytes",
    "track_memory",
    "track_metrics",
    "track_time",
]


def __getattr__(name: str) -> Any:
    if name == "MetricsCollector":
        from daskscope.workflow.collector import MetricsCollector

        return MetricsCollector
    if name == "register_backend":
        from daskscope.workflow.backends.base import register_backend

        return register_backend
    if name == "register_derived_metric":
        from daskscope.workflow.metrics import register_derived_metric

        return register_derived_metric
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
