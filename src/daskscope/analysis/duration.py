"""Durations, computed once: from a start to a stop, or to the last sign of life."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["elapsed", "record_duration"]


def elapsed(
    started_at: float | None, stopped_at: float | None, last_seen_at: float | None = None
) -> float | None:
    """Seconds from ``started_at`` to ``stopped_at``, else to ``last_seen_at`` (still
    running, or died without a word); None when either end is unknown. Never negative:
    clocks of different hosts may disagree."""
    end = stopped_at if stopped_at is not None else last_seen_at
    if started_at is None or end is None:
        return None
    return max(0.0, float(end) - float(started_at))


def record_duration(row: Mapping[str, Any]) -> float | None:
    """A row's ``duration_s`` when it has one, else :func:`elapsed` of its
    ``started_at``, ``stopped_at`` and ``last_seen_at``."""
    if row.get("duration_s") is not None:
        return float(row["duration_s"])
    return elapsed(row.get("started_at"), row.get("stopped_at"), row.get("last_seen_at"))
