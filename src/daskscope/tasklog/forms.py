"""The timeline's one form, as every read of the task log returns it and every view,
analysis and export takes it: an execution and its actions, a window of worker threads
(lanes) whose bins are columns, a transfer, an extent.

Pure: the store's reads (:mod:`daskscope.tasklog.window`,
:mod:`daskscope.tasklog.lookups`) build these from decoded segments; the view models
(:mod:`daskscope.views.timeline`) and the exports read them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

__all__ = [
    "COMPUTE",
    "Lane",
    "LaneColumns",
    "TaskAction",
    "TaskExecution",
    "TimelineExtent",
    "TimelineWindow",
    "Transfer",
]

#: Dask's name of the action that runs a task on a worker thread (the rest: "transfer",
#: "disk-read", "disk-write", "deserialize", ...)
COMPUTE = "compute"


@dataclass(frozen=True, slots=True)
class TaskAction:
    """One start/stop pair Dask reports for an execution."""

    #: "compute", "transfer", "disk-read", "disk-write", "deserialize", ...
    action: str
    #: epoch seconds, on the scheduler's clock (Dask corrects the workers' to it)
    start: float
    stop: float
    #: for "transfer": the worker the data came from
    source: str | None = None


@dataclass(frozen=True, slots=True)
class TaskExecution:
    """One execution of one task (a recomputation is another execution)."""

    key: str
    group: str
    prefix: str
    worker: str
    #: thread ident on the worker (0 when Dask did not say)
    thread: int
    #: first start and last stop of its actions
    start: float
    stop: float
    #: "memory" or "erred"
    state: str
    nbytes: int | None
    computation_id: str | None
    span_id: str | None
    actions: tuple[TaskAction, ...]
    #: the key of the dependency it waited for last (whose end made it ready); None when
    #: it waited for none, or the log was written before daskscope kept this
    trigger: str | None = None


@dataclass(frozen=True, slots=True, eq=False)
class LaneColumns:
    """One worker thread's bins: item ``i`` of each array is the bin
    ``[start[i], stop[i])`` (the arrays of bin edges are shared by the window's lanes)."""

    start: npt.NDArray[np.float64]
    stop: npt.NDArray[np.float64]
    #: executions overlapping each bin
    tasks: npt.NDArray[np.int64]
    #: seconds per activity (:data:`COMPUTE` and the other action names) in each bin
    busy: dict[str, npt.NDArray[np.float64]]
    #: the main group of each bin as an index into ``groups``, -1 when nothing computed
    top: npt.NDArray[np.int32]
    #: the group names ``top`` indexes (shared by the window's lanes)
    groups: tuple[str, ...]


@dataclass(frozen=True, slots=True, eq=False)
class Lane:
    """One worker thread of a window: its bins column-wise, or None when the window is
    raw (its tasks are then the window's ``tasks``)."""

    worker: str
    thread: int
    columns: LaneColumns | None = None


@dataclass(frozen=True, slots=True)
class TimelineWindow:
    cluster_id: str
    #: the window asked (or the cluster's first start / last stop when not given)
    start: float
    stop: float
    #: executions overlapping the window (with the filters)
    total_tasks: int
    #: True: ``tasks`` holds every execution; False: ``lanes`` hold bins
    raw: bool
    tasks: tuple[TaskExecution, ...]
    #: one per worker thread that ran something (also when raw, with no bins)
    lanes: tuple[Lane, ...]


@dataclass(frozen=True, slots=True)
class Transfer:
    """Data a task's worker fetched from another worker before running it (Dask
    reports the transfer with the task that needed it, not with the data's key)."""

    key: str
    source: str
    target: str
    start: float
    stop: float
    #: Dask does not say how many bytes one transfer moved
    nbytes: int | None


@dataclass(frozen=True, slots=True)
class TimelineExtent:
    #: distinct keys executed
    tasks: int
    executions: int
    first: float | None
    last: float | None
    workers: int
    #: worker threads that ran something
    threads: int
