"""A cluster's task log as columns of plain values, for ``daskscope.load(...)``.

The one module of the notebook that reads the task log, through the store's read
functions (decoded a segment at a time, executions in order of start): a move of those
functions changes the import below and nothing else.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from daskscope.store import Store
from daskscope.tasklog.scan import PlainColumnsCache, ordered_rows

__all__ = ["TASK_COLUMNS", "task_columns"]

#: one execution a row: which task, where, when, its outcome and output size
TASK_COLUMNS = (
    "key", "group", "prefix", "worker", "thread", "start", "stop", "duration_s", "state",
    "nbytes", "computation_id", "span_id",
)  # fmt: skip


def task_columns(
    store: Store, cluster_id: str, computations: Iterable[str | None] = (None,)
) -> dict[str, list[Any]]:
    """Every execution the task log holds of the cluster (of ``computations`` when they
    are named: None stands for all), in order of start, column-wise."""
    out: dict[str, list[Any]] = {name: [] for name in TASK_COLUMNS}
    for computation in computations:
        cache = PlainColumnsCache()
        scanned = store.scan_segments(cluster_id)
        for batch in ordered_rows(scanned, computation=computation):
            plain = cache.of(batch)
            for which, row in zip(batch.segment.tolist(), batch.rows.tolist(), strict=True):
                p = plain[which]
                out["key"].append(p.key[row])
                out["group"].append(p.group[row])
                out["prefix"].append(p.prefix[row])
                out["worker"].append(p.worker[row])
                out["thread"].append(p.thread[row])
                out["start"].append(p.start[row])
                out["stop"].append(p.stop[row])
                out["duration_s"].append(p.stop[row] - p.start[row])
                out["state"].append(p.state[row])
                out["nbytes"].append(p.nbytes[row])
                out["computation_id"].append(p.computation[row])
                out["span_id"].append(p.span[row])
    return out
