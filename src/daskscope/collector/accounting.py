"""The cluster's accounts: what it held over time (thread-seconds, memory-limit
byte-seconds), its peaks, and the totals of the work it did, all kept in its
:class:`~daskscope.model.ClusterRecord`."""

from __future__ import annotations

import dataclasses
import platform
from collections.abc import Iterable
from importlib.metadata import version
from typing import TYPE_CHECKING

import dask

from daskscope.model import ClusterRecord

if TYPE_CHECKING:
    from distributed.scheduler import Scheduler, WorkerState

    from daskscope.collector.tracking import Totals
    from daskscope.config import CollectorSettings

__all__ = ["Accounting", "cluster_record", "limits_before", "threads_integral"]


def cluster_record(
    scheduler: Scheduler, settings: CollectorSettings, cluster_id: str, *, now: float
) -> ClusterRecord:
    """The record of the scheduler's cluster as the recorder attaches to it."""
    return ClusterRecord(
        id=cluster_id,
        name=settings.cluster_name or scheduler.id,
        account=settings.account,
        user=settings.user,
        scheduler_address=scheduler.address or "",
        dask_version=dask.__version__,
        distributed_version=version("distributed"),
        python_version=platform.python_version(),
        started_at=getattr(scheduler, "time_started", now),
        last_seen_at=now,
    )


def threads_integral(history: Iterable[tuple[float, int]], until: float) -> float:
    """∫ threads dt from Dask's ``total_nthreads_history`` up to ``until``."""
    history = list(history)
    total = 0.0
    for (t0, n), (t1, _) in zip(history, [*history[1:], (until, 0)][: len(history)], strict=True):
        total += n * max(0.0, min(t1, until) - t0)
    return total


def limits_before(scheduler: Scheduler, since: float) -> list[tuple[float, int]]:
    """When each worker present at ``since`` arrived, with its memory limit: its arrival
    is the last "add-worker" event of its topic in Dask's event log (a worker the log no
    longer holds counts from ``since``). Read once, as the recorder attaches."""
    get_events = getattr(scheduler, "get_events", None)
    held: list[tuple[float, int]] = []
    for address, ws in scheduler.workers.items():
        arrived = since
        for at, msg in get_events(address) if get_events is not None else ():
            if at <= since and isinstance(msg, dict) and msg.get("action") == "add-worker":
                arrived = at
        held.append((arrived, ws.memory_limit or 0))
    return held


class Accounting:
    """Integrates the cluster's threads and memory limits between changes into the
    cluster record's ``core_seconds`` and ``memory_limit_byte_seconds``, keeps its peaks,
    and copies the work totals into it. Both integrals cover the same window: from the
    scheduler's start, whenever the recorder attached.

    ``threads_before``: Dask's ``total_nthreads_history`` when the recorder attached.
    ``limits_before``: the arrival and memory limit of each worker present then
    (:func:`limits_before`; Dask keeps no history of limits, so a worker that came and
    went before the recorder attached is in the threads but not in the memory)."""

    def __init__(
        self,
        cluster: ClusterRecord,
        *,
        since: float,
        threads_before: Iterable[tuple[float, int]] = (),
        limits_before: Iterable[tuple[float, int]] = (),
    ) -> None:
        self.cluster = cluster
        cluster.core_seconds = threads_integral(threads_before, since)
        cluster.memory_limit_byte_seconds = sum(
            limit * max(0.0, since - arrived) for arrived, limit in limits_before
        )
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

    def workers_changed(self, workers: Iterable[WorkerState], at: float) -> None:
        """The workers are now ``workers``, since ``at``."""
        self.advance(at)
        self.refresh(workers)

    def stopped(self, at: float) -> None:
        self.cluster.stopped_at = at

    def record(self, totals: Totals) -> ClusterRecord:
        """The cluster's record as it stands, with the work ``totals`` (a copy: the
        writer thread gets it while the accounts go on)."""
        cluster = self.cluster
        cluster.tasks_executed = totals.executed
        cluster.tasks_erred = totals.erred
        cluster.bytes_processed = totals.nbytes
        cluster.compute_seconds = totals.durations.get("compute", 0.0)
        return dataclasses.replace(cluster)
