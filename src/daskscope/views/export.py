"""What an export renders: one recorded cluster, narrowed to a computation or a window,
as every format of :mod:`daskscope.export` reads it.

:func:`export_view` checks what was asked (a window that holds time, a computation the
cluster has) and reads the cluster's detail once; the formats then read only what they
hold, when they ask: the task log page by page in order of start (Perfetto), the profile
windows (speedscope), the groups with failed tasks and where the task log places a group
(OTLP). Unlike the pages' views this one reads lazily, so that a cluster of millions of
tasks never sits in memory whole; the formats never touch the store themselves.

An export that cannot be made raises an :class:`ExportError` that says what to do
instead; the CLI prints it, the routes answer 400 (:class:`BadWindow`) or 404.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from daskscope.store import Store
from daskscope.store.export_reads import ErredGroup
from daskscope.tasklog.scan import (
    PlainColumns,
    PlainColumnsCache,
    ordered_rows,
)

__all__ = [
    "BadWindow",
    "ErredGroup",
    "ExportError",
    "ExportView",
    "NothingRecorded",
    "PlainColumns",
    "TaskWindow",
    "UnknownComputation",
    "check_window",
    "export_view",
]

#: one page of executions: each as (its segment's plain columns, its row)
Page = list[tuple[PlainColumns, int]]


class ExportError(ValueError):
    """What was asked cannot be exported; the message says what to do instead."""


class UnknownComputation(ExportError):
    def __init__(self, cluster_id: str, computation: str) -> None:
        super().__init__(
            f"cluster {cluster_id} has no computation {computation!r}; "
            f"`daskscope show {cluster_id}` lists its computations"
        )


class BadWindow(ExportError):
    def __init__(self, start: float | None, stop: float | None, why: str | None = None) -> None:
        super().__init__(
            why
            or f"the window [{start}, {stop}] is empty: give --start before --stop "
            "(epoch seconds, as the timeline and the API show them)"
        )


class NothingRecorded(ExportError):
    """The cluster has none of what this format holds (e.g. no profile, no task)."""


def check_window(start: float | None, stop: float | None) -> None:
    """Refuse a window that holds no time (stop at or before start) or has an end that
    is not a number."""
    for name, value in (("start", start), ("stop", stop)):
        if value is not None and not math.isfinite(value):
            raise BadWindow(start, stop, f"{name} must be a finite number of epoch seconds")
    if start is not None and stop is not None and stop <= start:
        raise BadWindow(start, stop)


@dataclass(frozen=True, slots=True)
class TaskWindow:
    """The task log's part to export: executions overlapping ``[lo, hi)`` (epoch
    seconds), and the cluster's start (``origin``), from which times are counted."""

    lo: float
    hi: float
    origin: float


@dataclass(frozen=True)
class ExportView:
    """One cluster to export (see the module's docstring); made by :func:`export_view`."""

    store: Store
    cluster_id: str
    #: :func:`~daskscope.store.cluster_detail` (its task groups only with ``groups``)
    detail: Mapping[str, Any]
    computation: str | None = None
    start: float | None = None
    stop: float | None = None
    #: the task groups were read too (an OTLP span per group)
    groups: bool = False

    @property
    def cluster(self) -> Mapping[str, Any]:
        cluster: Mapping[str, Any] = self.detail["cluster"]
        return cluster

    def task_window(self) -> TaskWindow:
        """The window of the task log to export: the one asked for, else from the first
        start to just past the last stop. Raises NothingRecorded when no task of the
        cluster (or the computation) was recorded, or none ran in the window."""
        extent = self.store.log_extent(self.cluster_id, computation=self.computation)
        if not extent.executions or extent.first is None or extent.last is None:
            raise NothingRecorded(
                f"cluster {self.cluster_id} has no task recorded"
                + (f" for computation {self.computation}" if self.computation else "")
                + ": the task timeline is kept when daskscope.tasks.enabled is true "
                "(the default) while the cluster runs"
            )
        start, stop = self.start, self.stop
        lo = extent.first if start is None else start
        # windows hold what starts before their stop: just past the last stop, so that a
        # task of no duration at the very end is in too
        hi = math.nextafter(extent.last, math.inf) if stop is None else stop
        if (
            hi <= lo
            or (start is not None and start > extent.last)
            or (stop is not None and stop < extent.first)
        ):
            raise NothingRecorded(
                f"no task of cluster {self.cluster_id} ran in this window: its tasks ran "
                f"from {extent.first:.3f} to {extent.last:.3f} (epoch seconds)"
            )
        return TaskWindow(lo, hi, float(self.cluster["started_at"]))

    def execution_pages(self, window: TaskWindow, page: int) -> Iterator[Page]:
        """The window's executions (of the computation, if one was asked) in order of
        first start, ``page`` at a time: read column-wise, a segment at a time (memory
        bounded by the segments overlapping one another, not the log)."""
        cache = PlainColumnsCache()
        held: Page = []
        scanned = self.store.scan_segments(self.cluster_id, window.lo, window.hi)
        for batch in ordered_rows(scanned, window.lo, window.hi, computation=self.computation):
            plain = cache.of(batch)
            for which, row in zip(batch.segment.tolist(), batch.rows.tolist(), strict=True):
                held.append((plain[which], row))
                if len(held) == page:
                    yield held
                    held = []
        if held:
            yield held

    def profile_windows(self) -> list[Mapping[str, Any]]:
        """The stored profile windows with samples that overlap the window asked for
        (all of them without one), oldest first."""
        found = self.store.profile_trees(self.cluster_id, start=self.start, stop=self.stop)
        return [w for w in found if w["samples"]]

    def erred_groups(self) -> list[ErredGroup]:
        """The cluster's task groups with failed tasks."""
        return self.store.erred_groups(self.cluster_id)

    def group_log_times(
        self,
        wanted: Mapping[tuple[str | None, str], str],
        lo: float | None,
        hi: float | None,
    ) -> dict[str, tuple[float, float]]:
        """Where the task log places groups: ``wanted`` maps (computation id, group
        name) to a group's id; returns id -> (first start, last stop) of its executions
        in the segments overlapping ``[lo, hi]``."""
        return self.store.group_log_times(self.cluster_id, wanted, lo, hi)


def export_view(
    store: Store,
    cluster_id: str,
    *,
    computation: str | None = None,
    start: float | None = None,
    stop: float | None = None,
    groups: bool = False,
) -> ExportView:
    """The cluster ``cluster_id`` to export, narrowed to ``computation`` and the window
    ``[start, stop]`` (epoch seconds) when given; ``groups``: read its task groups too.

    Raises BadWindow, UnknownCluster and UnknownComputation."""
    check_window(start, stop)
    detail = store.cluster_detail(cluster_id, max_groups=None if groups else 0)
    if computation is not None and all(c["id"] != computation for c in detail["computations"]):
        raise UnknownComputation(cluster_id, computation)
    return ExportView(store, cluster_id, detail, computation, start, stop, groups)
