"""The activities of Dask's fine performance metrics, as Dask documents them
(distributed's "Fine performance metrics" page), for pages that explain them.

A fine metric is ``(context, prefix, activity, unit) -> value``: ``context`` is where it
was measured (``execute`` a task on a worker, ``gather-dep`` fetching its inputs,
``get-data`` sending them), ``prefix`` the task prefix. The set of activities is open.
"""

from __future__ import annotations

from daskscope.catalogue.figure import Activity

__all__ = ["ACTIVITIES", "SPAN_FIGURES_NOTE"]

ACTIVITIES: tuple[Activity, ...] = (
    Activity("thread-cpu", ("seconds",), "CPU time of the worker thread running the task"),
    Activity(
        "thread-noncpu",
        ("seconds",),
        "wall time on the thread not spent on its CPU: I/O, the GIL, GPU or CPU "
        "contention (not I/O alone)",
    ),
    Activity(
        "executor",
        ("seconds",),
        "time between the task being ready and its thread starting it (queueing in the "
        "worker's thread pool)",
    ),
    Activity("other", ("seconds",), "time Dask measured but could not attribute"),
    Activity(
        "memory-read",
        ("bytes", "count"),
        "task inputs found in the worker's memory, not spilled (bytes and how many keys)",
    ),
    Activity("disk-read", ("seconds", "bytes", "count"), "keys read back from spill"),
    Activity("disk-write", ("seconds", "bytes", "count"), "keys spilled to disk"),
    Activity("compress", ("seconds",), "compression of data sent or spilled"),
    Activity("decompress", ("seconds",), "decompression of data received or unspilled"),
    Activity("serialize", ("seconds",), "pickling of data sent or spilled"),
    Activity("deserialize", ("seconds",), "unpickling of data received or unspilled"),
    Activity("network", ("seconds",), "time of transfers between workers (gather-dep)"),
    Activity(
        "failed",
        ("seconds",),
        "the whole time of a task that raised, or of a transfer that failed, counted "
        "here instead of in the activities above",
    ),
    Activity(
        "cancelled",
        ("seconds",),
        "the whole time of a task or transfer whose result was not kept (cancelled, rescheduled)",
    ),
    Activity("missing", ("seconds",), "the whole time of a transfer whose keys were gone"),
    Activity("busy", ("seconds",), "the whole time of a transfer the peer refused (busy)"),
    Activity(
        "idle or other spans",
        ("seconds",),
        "in Dask's span totals only: active CPU seconds minus Σ execute seconds of the "
        "subtree (threads not running this span's tasks)",
    ),
)

#: How a span's two time figures differ, for the pages that show both
SPAN_FIGURES_NOTE = (
    "duration is the summed time of the span's tasks (Σ over tasks, all activities); "
    "active CPU is the thread time made available to the span while it had tasks to run, "
    "not CPU used: the threads x the time the span was active, shared between the spans "
    "active at once"
)
