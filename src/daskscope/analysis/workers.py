"""Worker samples for display: the cluster's memory split over time, and which of a
worker's metrics are not already shown in a column of their own."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["COLUMN_METRICS", "MEMORY_PARTS", "extra_metrics", "memory_over_time"]

#: Flattened heartbeat metrics that worker samples also keep as named columns
COLUMN_METRICS = frozenset(
    {
        "memory",
        "managed_bytes",
        "spilled_bytes.disk",
        "cpu",
        "transfer.incoming_bytes",
        "transfer.outgoing_bytes",
        "host_net_io.read_bps",
        "host_net_io.write_bps",
        "host_disk_io.read_bps",
        "host_disk_io.write_bps",
    }
)

#: Dask's memory split as drawn: managed + unmanaged = process; spilled is on disk
MEMORY_PARTS = ("managed_bytes", "unmanaged_bytes", "spilled_bytes", "memory_limit")


def extra_metrics(metrics: Mapping[str, float] | None) -> dict[str, float] | None:
    """A sample's metrics other than those with columns, by name; None when the sample
    recorded none (stored before daskscope kept them)."""
    if metrics is None:
        return None
    return {k: metrics[k] for k in sorted(metrics) if k not in COLUMN_METRICS}


def memory_over_time(samples: Iterable[Mapping[str, Any]]) -> dict[str, list[Any]]:
    """Σ over workers of each :data:`MEMORY_PARTS` figure, per sampling instant.

    The collector samples every worker at one instant per round, so samples sharing
    ``sampled_at`` form one total. A total is None when any worker of that round did not
    report the figure: a partial sum would look like a drop in memory.
    """
    rounds: dict[float, dict[str, Any]] = {}
    for s in samples:
        total = rounds.setdefault(s["sampled_at"], dict.fromkeys(MEMORY_PARTS, 0))
        for part in MEMORY_PARTS:
            value = s.get(part)
            total[part] = None if value is None or total[part] is None else total[part] + value
    times = sorted(rounds)
    out: dict[str, list[Any]] = {"t": times}
    for part in MEMORY_PARTS:
        out[part] = [rounds[t][part] for t in times]
    return out
