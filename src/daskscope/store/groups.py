"""A cluster's task groups, read in bounded amounts.

A cluster may have tens of thousands of task groups (a graph with one group per file and
operation). Pages and summaries read their count and totals (summed by the database) and
a bounded selection; the full list is read a page at a time, in one stable order
(start, name, id) so that consecutive pages hold every group exactly once.
"""

from __future__ import annotations

from typing import Any, Literal

import sqlalchemy as sa

from daskscope.store import schema as s
from daskscope.store.engine import Store, as_engine

__all__ = [
    "GROUP_ORDER",
    "computation_graph_groups",
    "find_computation",
    "group_counts_by_computation",
    "group_names_by_computation",
    "group_page",
    "group_summary",
    "selected_groups",
    "task_group_page",
]

Row = dict[str, Any]
Selection = Literal["start", "duration"]

_g = s.task_groups.c
#: The order of the full list: groups that never started last (SQLite and PostgreSQL
#: sort NULL differently, so it is said), then by name; the id breaks ties between
#: groups of one name in several computations.
GROUP_ORDER = (sa.nulls_last(_g.started_at.asc()), _g.name, _g.id)
#: What a summary says of a group (its JSON columns are left to the full rows).
BRIEF_COLUMNS = (
    _g.id,
    _g.name,
    _g.prefix,
    _g.computation_id,
    _g.tasks_total,
    _g.tasks_executed,
    _g.tasks_erred,
    _g.nbytes_total,
    _g.duration_s,
    _g.started_at,
    _g.stopped_at,
)
_TOTALS = ("tasks_total", "tasks_executed", "tasks_erred", "nbytes_total", "duration_s")


def _scope(cluster_id: str, computation_id: str | None) -> sa.ColumnElement[bool]:
    where = _g.cluster_id == cluster_id
    if computation_id is not None:
        where = sa.and_(where, _g.computation_id == computation_id)
    return where


def _rows(conn: sa.Connection, query: sa.Select[Any]) -> list[Row]:
    result = conn.execute(query)
    keys = list(result.keys())
    return [dict(zip(keys, row, strict=True)) for row in result.all()]


def group_summary(
    conn: sa.Connection,
    cluster_id: str,
    *,
    top: int,
    computation_id: str | None = None,
) -> Row:
    """How many groups, their summed tasks, bytes and seconds, and the ``top`` longest
    (by ``duration_s``, brief rows); ``omitted`` is how many the summary leaves out."""
    where = _scope(cluster_id, computation_id)
    sums = [sa.func.coalesce(sa.func.sum(getattr(_g, c)), 0).label(c) for c in _TOTALS]
    totals = conn.execute(sa.select(sa.func.count().label("count"), *sums).where(where)).one()
    count = int(totals._mapping["count"])  # not .count: a Row method
    longest = _rows(
        conn,
        sa.select(*BRIEF_COLUMNS)
        .where(where)
        .order_by(_g.duration_s.desc(), *GROUP_ORDER)
        .limit(top),
    )
    return {
        "count": count,
        **{c: (float if c == "duration_s" else int)(getattr(totals, c)) for c in _TOTALS},
        "top": longest,
        "top_by": "duration_s",
        "shown": len(longest),
        "omitted": count - len(longest),
    }


def selected_groups(
    conn: sa.Connection,
    cluster_id: str,
    *,
    limit: int | None,
    by: Selection = "duration",
    computation_id: str | None = None,
) -> list[Row]:
    """Full group rows: all of them (``limit`` None), or the ``limit`` longest
    (``by="duration"``) or earliest (``by="start"``), listed in :data:`GROUP_ORDER`."""
    query = sa.select(s.task_groups).where(_scope(cluster_id, computation_id))
    if limit is None:
        return _rows(conn, query.order_by(*GROUP_ORDER))
    if by == "start":
        return _rows(conn, query.order_by(*GROUP_ORDER).limit(limit))
    chosen = query.order_by(_g.duration_s.desc(), *GROUP_ORDER).limit(limit).subquery()
    c = chosen.c
    return _rows(
        conn,
        sa.select(chosen).order_by(sa.nulls_last(c.started_at.asc()), c.name, c.id),
    )


def group_page(
    conn: sa.Connection,
    cluster_id: str,
    *,
    offset: int,
    limit: int,
    computation_id: str | None = None,
) -> Row:
    """Groups ``offset`` to ``offset + limit`` of the full list (full rows) and ``total``."""
    if offset < 0 or limit < 1:
        raise ValueError(f"offset must be >= 0 and limit >= 1, got {offset} and {limit}")
    where = _scope(cluster_id, computation_id)
    total = conn.execute(sa.select(sa.func.count()).where(where)).scalar_one()
    query = sa.select(s.task_groups).where(where).order_by(*GROUP_ORDER)
    groups = _rows(conn, query.offset(offset).limit(limit))
    return {"total": int(total), "offset": offset, "limit": limit, "groups": groups}


def group_names_by_computation(
    conn: sa.Connection, cluster_id: str, *, per_computation: int
) -> dict[str | None, tuple[list[str], int]]:
    """Per computation: the names of its first ``per_computation`` groups in
    :data:`GROUP_ORDER`, and how many groups it has, reading only the names shown.

    The counts come from the index; the names of the computations within the limit in
    one query, and those of each larger computation in one query of its own, which the
    database answers with a bounded (top-N) sort instead of sorting every group."""
    counts = group_counts_by_computation(conn, cluster_id)
    counts.pop(None, None)
    large = sorted(c for c, n in counts.items() if c is not None and n > per_computation)
    if len(large) > _MAX_LARGE_COMPUTATIONS:
        return _names_numbered(conn, cluster_id, per_computation, counts)
    found: dict[str | None, tuple[list[str], int]] = {c: ([], n) for c, n in counts.items()}
    small = sa.select(_g.computation_id, _g.name).where(
        _g.cluster_id == cluster_id,
        _g.computation_id.is_not(None),
        _g.computation_id.not_in(large),
    )
    for computation_id, name in conn.execute(small.order_by(*GROUP_ORDER)).all():
        found[computation_id][0].append(name)
    for computation_id in large:
        first = (
            sa.select(_g.name)
            .where(_scope(cluster_id, computation_id))
            .order_by(*GROUP_ORDER)
            .limit(per_computation)
        )
        found[computation_id][0].extend(conn.execute(first).scalars())
    return found


#: Beyond this many computations over the limit, one numbered query beats one each.
_MAX_LARGE_COMPUTATIONS = 50


def _names_numbered(
    conn: sa.Connection, cluster_id: str, per_computation: int, counts: dict[str | None, int]
) -> dict[str | None, tuple[list[str], int]]:
    # row_number() over each computation's groups, numbered by the database.
    numbered = (
        sa.select(
            _g.computation_id,
            _g.name,
            sa.func.row_number()
            .over(partition_by=_g.computation_id, order_by=GROUP_ORDER)
            .label("position"),
        )
        .where(_g.cluster_id == cluster_id, _g.computation_id.is_not(None))
        .subquery()
    )
    n = numbered.c
    query = (
        sa.select(n.computation_id, n.name)
        .where(n.position <= per_computation)
        .order_by(n.computation_id, n.position)
    )
    found: dict[str | None, tuple[list[str], int]] = {c: ([], k) for c, k in counts.items()}
    for computation_id, name in conn.execute(query).all():
        found[computation_id][0].append(name)
    return found


def group_counts_by_computation(conn: sa.Connection, cluster_id: str) -> dict[str | None, int]:
    """How many groups each computation has (None: groups of no known computation)."""
    query = (
        sa.select(_g.computation_id, sa.func.count())
        .where(_g.cluster_id == cluster_id)
        .group_by(_g.computation_id)
    )
    return {computation_id: int(n) for computation_id, n in conn.execute(query).all()}


def find_computation(conn: sa.Connection, cluster_id: str, computation_id: str) -> Row | None:
    c = s.computations.c
    query = sa.select(s.computations).where(c.cluster_id == cluster_id, c.id == computation_id)
    found = conn.execute(query).first()
    return None if found is None else dict(found._mapping)


def computation_graph_groups(
    store: Store | sa.Engine, cluster_id: str, computation_id: str, *, limit: int
) -> tuple[Row, list[Row], int] | None:
    """A computation, its ``limit`` longest groups (full rows) and how many it has;
    None when the cluster has no such computation."""
    with as_engine(store).connect() as conn:
        comp = find_computation(conn, cluster_id, computation_id)
        if comp is None:
            return None
        where = _scope(cluster_id, computation_id)
        total = conn.execute(sa.select(sa.func.count()).where(where)).scalar_one()
        groups = selected_groups(
            conn, cluster_id, limit=limit, by="duration", computation_id=computation_id
        )
        return comp, groups, int(total)


def task_group_page(
    store: Store | sa.Engine,
    cluster_id: str,
    *,
    offset: int,
    limit: int,
    computation_id: str | None = None,
) -> Row | None:
    """:func:`group_page` over a store; None when ``computation_id`` is not one of the
    cluster's computations."""
    with as_engine(store).connect() as conn:
        if computation_id is not None and not find_computation(conn, cluster_id, computation_id):
            return None
        return group_page(
            conn, cluster_id, offset=offset, limit=limit, computation_id=computation_id
        )
