"""Metric keys renamed since runs were first saved and stored, read under today's name.

A saved file (``MetricsCollector.load``) or a stored row written before a rename keeps
its old key; reading it maps the key to the name that says what it is. Nothing is
rewritten on disk or in the store: the mapping is applied each time a run is read.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["RENAMED_KEYS", "renamed", "renamed_in_row"]

#: old key -> today's key. "aggregated" and "busy second" did not say which seconds:
#: one is CPU-seconds, the other summed chunk wall seconds (roastcoffea's "Total CPU")
RENAMED_KEYS: Mapping[str, str] = {
    "event_rate_aggregated_khz": "event_rate_per_cpu_second_khz",
    "event_rate_per_busy_second_khz": "event_rate_per_chunk_second_khz",
    "data_rate_per_busy_second_gbps": "data_rate_per_chunk_second_gbps",
}


def renamed(metrics: Mapping[str, Any] | None) -> dict[str, Any]:
    """``metrics`` with every old key under its new name (a new key already there wins)."""
    out = dict(metrics or {})
    for old, new in RENAMED_KEYS.items():
        if old in out:
            value = out.pop(old)
            out.setdefault(new, value)
    return out


def renamed_in_row(row: Mapping[str, Any]) -> dict[str, Any]:
    """A run's record (``metrics``, ``info["datasets"]``) under today's names."""
    out = dict(row)
    out["metrics"] = renamed(row.get("metrics"))
    info = row.get("info")
    if isinstance(info, Mapping) and isinstance(info.get("datasets"), Mapping):
        out["info"] = {
            **info,
            "datasets": {name: renamed(figures) for name, figures in info["datasets"].items()},
        }
    return out
