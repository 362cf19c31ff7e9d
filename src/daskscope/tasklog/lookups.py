"""Reads of a cluster's task log other than a window (:mod:`daskscope.tasklog.window`):
a key's executions, the slowest executions, transfers, and how much the log holds.
Each decodes only the segments that may hold what it asks (by group, key filter or a
summary's slowest executions).
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator

import numpy as np
import numpy.typing as npt
import sqlalchemy as sa

from daskscope.store.database import Database
from daskscope.tasklog.forms import TaskExecution, TimelineExtent, Transfer
from daskscope.tasklog.reads import (
    check_cluster,
    execution_at,
    name_at,
    passes_all,
    reading,
    selected,
)
from daskscope.tasklog.segments import (
    KEY_IS_GROUP,
    KEY_TUPLE,
    KEY_WHOLE,
    NO_THREAD,
    DecodedSegment,
    key_filter_may_hold,
    key_parts,
)
from daskscope.tasklog.summaries import SLOWEST_PER_GROUP
from daskscope.text import escape_text

__all__ = ["slowest_tasks", "task_executions", "timeline_extent", "transfers"]


def task_executions(store: Database | sa.Engine, cluster_id: str, key: str) -> list[TaskExecution]:
    """Every execution of ``key`` (the str of a Dask key), oldest first."""
    key = escape_text(key)  # stored so: a lone surrogate cannot be UTF-8
    found: list[TaskExecution] = []
    with reading(store) as log:
        check_cluster(log.conn, cluster_id)
        rows = log.segment_rows(cluster_id)
        groups = _groups_of_key(key)
        of_group = [r for r in rows if not groups.isdisjoint(r.groups)]
        rows = of_group or rows  # (a key of a form not foreseen: every segment may hold it)
        filters = log.key_filters([r.id for r in rows])
        rows = [r for r in rows if key_filter_may_hold(filters[r.id], key)]
        for seg in log.decoded(rows):
            found += [execution_at(seg, int(row)) for row in _rows_of_key(seg, key)]
    return sorted(found, key=lambda t: (t.start, t.stop))


def _groups_of_key(key: str) -> set[str]:
    """The names the group of ``key`` (the str of a Dask key) may have: a tuple's first
    item, or what Dask's ``key_split_group`` makes of a str key."""
    from distributed.utils import key_split_group

    found: set[str] = {key, key_split_group(key)} if key else {key}
    for quote in ("'", '"'):
        if key.startswith("(" + quote):
            end = key.find(quote + ", ", 2)
            if end > 0:
                found.add(key[2:end])
    return found


def _rows_of_key(seg: DecodedSegment, key: str) -> npt.NDArray[np.intp]:
    """The rows of ``key``: kept whole, or as its group's name (and a tuple's rest)."""
    import pyarrow.compute as pc  # type: ignore[import-untyped]

    def rest_is(text: str) -> npt.NDArray[np.bool_]:
        return np.asarray(pc.equal(seg.key_rest, text).fill_null(False), dtype=bool)

    mask = (seg.key_form == KEY_WHOLE) & rest_is(key)
    for g in np.unique(seg.group).tolist():
        form, rest = key_parts(key, seg.names[g])
        if form == KEY_IS_GROUP:
            mask |= (seg.group == g) & (seg.key_form == KEY_IS_GROUP)
        elif form == KEY_TUPLE:
            mask |= (seg.group == g) & (seg.key_form == KEY_TUPLE) & rest_is(rest)
    return np.flatnonzero(mask)


def slowest_tasks(
    store: Database | sa.Engine,
    cluster_id: str,
    *,
    group: str | None = None,
    computation_id: str | None = None,
    limit: int = 20,
) -> list[TaskExecution]:
    """The ``limit`` longest executions (last stop - first start), longest first.

    Each segment's summary names its groups' slowest executions: only the segments
    holding the longest of those are decoded."""
    if limit <= 0:
        return []
    with reading(store) as log:
        check_cluster(log.conn, cluster_id)
        rows = log.segment_rows(cluster_id)
        if group is not None:
            rows = [r for r in rows if group in r.groups]
        held = {
            segment_id: summary
            for segment_id, summary in log.summaries(rows).items()
            if limit <= SLOWEST_PER_GROUP and passes_all(summary, computation_id, None, None)
        }
        # (duration, segment, row) of the candidates the summaries name
        candidates: list[tuple[float, int, int]] = []
        for index, r in enumerate(rows):
            summary = held.get(r.id)
            if summary is None:
                continue
            wanted = summary.slowest_group >= 0
            if group is not None:
                wanted &= summary.slowest_group == _index(summary.groups, group)
            candidates += zip(
                summary.slowest_duration[wanted].tolist(),
                [index] * int(wanted.sum()),
                summary.slowest_row[wanted].tolist(),
                strict=True,
            )
        best = heapq.nlargest(limit, candidates)
        needed = sorted({index for _, index, _ in best})
        named = dict(zip(needed, log.decoded([rows[i] for i in needed]), strict=True))
        found = [(d, row, named[index]) for d, index, row in best]
        for seg in log.decoded([r for r in rows if r.id not in held]):
            mask, first, last = selected(
                seg, None, None, group=group, computation_id=computation_id
            )
            chosen = np.flatnonzero(mask)
            durations = (last - first)[chosen]
            if len(chosen) > limit:
                top = np.argpartition(-durations, limit - 1)[:limit]
                chosen, durations = chosen[top], durations[top]
            found += [
                (d, row, seg) for d, row in zip(durations.tolist(), chosen.tolist(), strict=True)
            ]
    found.sort(key=lambda item: -item[0])
    return [execution_at(seg, row) for _, row, seg in found[:limit]]


def _index(names: list[str], name: str) -> int:
    try:
        return names.index(name)
    except ValueError:
        return -2  # matches nothing (not even "none")


def transfers(
    store: Database | sa.Engine,
    cluster_id: str,
    start: float | None = None,
    stop: float | None = None,
    *,
    limit: int = 1000,
) -> list[Transfer]:
    """Transfers overlapping ``[start, stop]``, oldest first, at most ``limit``."""
    found: list[Transfer] = []
    with reading(store) as log:
        check_cluster(log.conn, cluster_id)
        for seg in log.decoded(log.segment_rows(cluster_id, start, stop)):
            name = seg.name_index("transfer")
            if name < 0:
                continue
            mask = seg.action_name == name
            if start is not None:
                mask &= seg.action_stop >= start
            if stop is not None:
                mask &= seg.action_start <= stop
            for i in np.flatnonzero(mask).tolist():
                row = int(seg.action_row[i])
                found.append(
                    Transfer(
                        key=seg.key(row),
                        source=name_at(seg, int(seg.action_source[i])) or "",
                        target=seg.names[int(seg.worker[row])],
                        start=float(seg.action_start[i]),
                        stop=float(seg.action_stop[i]),
                        nbytes=None,
                    )
                )
    found.sort(key=lambda t: (t.start, t.stop, t.key))
    return found[: max(0, limit)]


def timeline_extent(
    store: Database | sa.Engine, cluster_id: str, *, computation_id: str | None = None
) -> TimelineExtent:
    """How much the task log of the cluster (or of one computation) holds."""
    keys: set[tuple[str, int, str]] = set()
    executions = 0
    first: float | None = None
    last: float | None = None
    lanes: set[tuple[str, int]] = set()
    with reading(store) as log:
        check_cluster(log.conn, cluster_id)
        for seg in log.decoded(log.segment_rows(cluster_id)):
            mask, f, la = selected(seg, None, None, computation_id=computation_id)
            chosen = np.flatnonzero(mask)
            if not len(chosen):
                continue
            executions += len(chosen)
            lo, hi = float(f[chosen].min()), float(la[chosen].max())
            first = lo if first is None else min(first, lo)
            last = hi if last is None else max(last, hi)
            keys.update(_keys(seg, chosen))
            lanes.update(
                (seg.names[w], t)
                for w, t in zip(
                    seg.worker[chosen].tolist(), seg.thread[chosen].tolist(), strict=True
                )
            )
    return TimelineExtent(
        tasks=len(keys),
        executions=executions,
        first=first,
        last=last,
        workers=len({w for w, _ in lanes}),
        threads=len({lane for lane in lanes if lane[1] != NO_THREAD} or lanes),
    )


def _keys(seg: DecodedSegment, rows: npt.NDArray[np.intp]) -> Iterator[tuple[str, int, str]]:
    """Each row's key as (group's name, form, rest): equal exactly when the keys are (a
    key's group follows from the key)."""
    rests = seg.key_rest.take(rows).to_pylist()
    forms = seg.key_form[rows].tolist()
    names = seg.names
    for g, f, r in zip(seg.group[rows].tolist(), forms, rests, strict=True):
        yield (names[g], f, r)
