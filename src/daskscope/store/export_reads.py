"""What the OTLP export reads that no page does: a cluster's task groups with failed
tasks, and where the task log places groups that Dask recorded no start for (every
task of them failed). :mod:`daskscope.views.export` asks; the exports never query."""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

import numpy as np
import sqlalchemy as sa

from daskscope.store import schema as s
from daskscope.store.database import Database, as_engine
from daskscope.tasklog.scan import scan_segments

__all__ = ["ErredGroup", "erred_groups", "group_log_times"]


class ErredGroup(NamedTuple):
    """A task group with failed tasks: its id, Dask span, computation and failures."""

    id: str
    span_id: str | None
    computation_id: str | None
    tasks_erred: int


def erred_groups(store: Database | sa.Engine, cluster_id: str) -> list[ErredGroup]:
    """The cluster's task groups with at least one failed task."""
    g = s.task_groups.c
    with as_engine(store).connect() as conn:
        rows = conn.execute(
            sa.select(g.id, g.span_id, g.computation_id, g.tasks_erred).where(
                g.cluster_id == cluster_id, g.tasks_erred > 0
            )
        ).all()
    return [ErredGroup(gid, span, comp, int(n)) for gid, span, comp, n in rows]


def group_log_times(
    store: Database | sa.Engine,
    cluster_id: str,
    wanted: Mapping[tuple[str | None, str], str],
    lo: float | None,
    hi: float | None,
) -> dict[str, tuple[float, float]]:
    """First start and last stop of the executions of groups in the task log's segments
    overlapping ``[lo, hi]``: ``wanted`` maps (computation id, group name) to a group's
    id; returns id -> (first start, last stop) for those the log holds."""
    seen: dict[str, tuple[float, float]] = {}
    names = sorted({name for _, name in wanted})
    for item in scan_segments(store, cluster_id, lo, hi):
        seg = item.decoded
        for row in np.flatnonzero(seg.naming(seg.group, names)).tolist():
            c = int(seg.computation[row])
            gid = wanted.get((seg.names[c] if c >= 0 else None, seg.names[int(seg.group[row])]))
            if gid is None:
                continue
            first, last = float(seg.first[row]), float(seg.last[row])
            was = seen.get(gid, (first, last))
            seen[gid] = (min(was[0], first), max(was[1], last))
    return seen
