"""What the cluster held over time: thread-seconds and memory-limit byte-seconds."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from daskscope.model import ClusterRecord

if TYPE_CHECKING:
    from distributed.scheduler import WorkerState

__all__ = ["Capacity", "threads_integral"]


def threads_integral(history: list[tuple[float, int]], until: float) -> float:
    """∫ threads dt from Dask's ``total_nthreads_history`` up to ``until``."""
    total = 0.0
    for (t0, n), (t1, _) in zip(history, [*history[1:], (until, 0)], strict=True):
        total += n * max(0.0, min(t1, until) - t0)
    return total


class Capacity:
    """Integrates the cluster's threads and memory limits between changes, into the
    cluster record's ``core_seconds`` and ``memory_limit_byte_seconds``."""

    def __init__(self, cluster: ClusterRecord, since: float) -> None:
        self.cluster = cluster
        self.integrated_until = since
        self.threads = 0
        self.memory_limit = 0

    def advance(self, now: float) -> None:
        """Add the capacity held since the last change."""
        dt = max(0.0, now - self.integrated_until)
        self.cluster.core_seconds += self.threads * dt
        self.cluster.memory_limit_byte_seconds += self.memory_limit * dt
        self.integrated_until = max(now, self.integrated_until)
        self.cluster.last_seen_at = max(self.cluster.last_seen_at, now)

    def refresh(self, workers: Iterable[WorkerState]) -> None:
        """Take the current workers' threads and memory limits (after advancing)."""
        workers = list(workers)
        self.threads = sum(ws.nthreads for ws in workers)
        self.memory_limit = sum(ws.memory_limit or 0 for ws in workers)
        cluster = self.cluster
        cluster.workers_peak = max(cluster.workers_peak, len(workers))
        cluster.threads_peak = max(cluster.threads_peak, self.threads)
        cluster.memory_limit_peak = max(cluster.memory_limit_peak, self.memory_limit)
