"""A cluster's task groups, read in bounded amounts.

(Over 400 lines: every bounded read of task groups, summaries, pages, per-computation
names and totals, graph rows and the fingerprint, over one scope filter.)

A cluster may have tens of thousands of task groups (a graph with one group per file and
operation). Pages and summaries read their count and totals (summed by the database) and
a bounded selection; the full list is read a page at a time, in one stable order
(start, name, id) so that consecutive pages hold every group exactly once.
"""

from __future__ import annotations

from typing import Any, Literal, NamedTuple

import sqlalchemy as sa

from daskscope.analysis.cluster import subtree_ids
from daskscope.store import schema as s
from daskscope.store.database import Database, as_engine

__all__ = [
    "GROUP_ORDER",
    "ComputationState",
    "computation_fingerprint",
    "computation_graph_groups",
    "computation_graph_rows",
    "find_computation",
    "group_counts_by_computation",
    "group_names_by_computation",
    "group_page",
    "group_summary",
    "group_totals_by_computation",
    "selected_groups",
    "span_prefixes",
    "span_scope_ids",
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


def _scope(
    cluster_id: str, computation_id: str | None, span_ids: set[str] | None = None
) -> sa.ColumnElement[bool]:
    where = _g.cluster_id == cluster_id
    if computation_id is not None:
        where = sa.and_(where, _g.computation_id == computation_id)
    if span_ids is not None:
        where = sa.and_(where, _g.span_id.in_(sorted(span_ids)))
    return where


def span_scope_ids(
    conn: sa.Connection, cluster_id: str, *, span_id: str | None, tag: str | None
) -> set[str] | None:
    """The spans a span filter stands for: ``span_id`` and its subtree, the spans tagged
    ``tag``, or both at once (their intersection); None when ``span_id`` names no span
    of the cluster. Groups carry the span they ran in, the innermost one, so a span's
    groups are those of every span of its subtree."""
    sp = s.spans.c
    query = sa.select(sp.span_id, sp.parent_span_id, sp.name).where(sp.cluster_id == cluster_id)
    spans = [dict(r._mapping) for r in conn.execute(query)]
    wanted = {r["span_id"] for r in spans}
    if span_id is not None:
        wanted = subtree_ids(spans, span_id)
        if not wanted:
            return None
    if tag is not None:
        wanted &= {r["span_id"] for r in spans if tag in (r["name"] or ())}
    return wanted


def span_prefixes(conn: sa.Connection, cluster_id: str, span_ids: set[str] | None) -> Row:
    """Of the groups that ran in ``span_ids`` (None: all groups): per prefix their count
    and summed tasks, bytes and seconds (summed by the database), and the computations
    they belong to."""
    where = _scope(cluster_id, None, span_ids)
    sums = [sa.func.coalesce(sa.func.sum(getattr(_g, c)), 0).label(c) for c in _TOTALS]
    by_prefix = (
        sa.select(_g.prefix.label("name"), sa.func.count().label("group_count"), *sums)
        .where(where)
        .group_by(_g.prefix)
        .order_by(_g.prefix)
    )
    prefixes = _rows(conn, by_prefix)
    for p in prefixes:
        for c in _TOTALS:
            p[c] = (float if c == "duration_s" else int)(p[c])
        p["group_count"] = int(p["group_count"])
    computations = conn.execute(
        sa.select(_g.computation_id)
        .where(where, _g.computation_id.is_not(None))
        .group_by(_g.computation_id)
        .order_by(_g.computation_id)
    ).scalars()
    return {"prefixes": prefixes, "computations": list(computations)}


def _rows(conn: sa.Connection, query: sa.Select[Any]) -> list[Row]:
    result = conn.execute(query)
    keys = list(result.keys())
    return [dict(zip(keys, row, strict=True)) for row in result.all()]


def _longest_index(computation_id: str | None) -> tuple[sa.ColumnElement[bool], ...]:
    """The condition that lets a read of a whole cluster's longest groups use the partial
    index ``ix_task_groups_longest`` (every row meets it: ``duration_s`` is required).
    Not for one computation's: a small one among many groups is found faster by its own
    index than by walking the cluster's groups in duration order."""
    return (_g.duration_s.is_not(None),) if computation_id is None else ()


def group_summary(
    conn: sa.Connection,
    cluster_id: str,
    *,
    top: int,
    computation_id: str | None = None,
    by_computation: dict[str | None, Row] | None = None,
) -> Row:
    """How many groups, their summed tasks, bytes and seconds, and the ``top`` longest
    (by ``duration_s``, brief rows); ``omitted`` is how many the summary leaves out.
    ``by_computation`` (:func:`group_totals_by_computation`) spares summing them again."""
    where = _scope(cluster_id, computation_id)
    if by_computation is not None and computation_id is None:
        # summed already, per computation: their sums are the cluster's
        totals: Any = {
            c: sum(row[c] for row in by_computation.values()) for c in ("count", *_TOTALS)
        }
    else:
        sums = [sa.func.coalesce(sa.func.sum(getattr(_g, c)), 0).label(c) for c in _TOTALS]
        query = sa.select(sa.func.count().label("count"), *sums).where(where)
        totals = conn.execute(query).one()._mapping
    count = int(totals["count"])
    longest = _rows(
        conn,
        sa.select(*BRIEF_COLUMNS)
        .where(where, *_longest_index(computation_id))
        .order_by(_g.duration_s.desc(), *GROUP_ORDER)
        .limit(top),
    )
    return {
        "count": count,
        **{c: (float if c == "duration_s" else int)(totals[c]) for c in _TOTALS},
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
    chosen = (
        query.where(*_longest_index(computation_id))
        .order_by(_g.duration_s.desc(), *GROUP_ORDER)
        .limit(limit)
        .subquery()
    )
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
    span_ids: set[str] | None = None,
) -> Row:
    """Groups ``offset`` to ``offset + limit`` of the full list (full rows) and ``total``;
    with ``span_ids``, only the groups that ran in those spans."""
    if offset < 0 or limit < 1:
        raise ValueError(f"offset must be >= 0 and limit >= 1, got {offset} and {limit}")
    where = _scope(cluster_id, computation_id, span_ids)
    total = conn.execute(sa.select(sa.func.count()).where(where)).scalar_one()
    query = sa.select(s.task_groups).where(where).order_by(*GROUP_ORDER)
    groups = _rows(conn, query.offset(offset).limit(limit))
    return {"total": int(total), "offset": offset, "limit": limit, "groups": groups}


def group_names_by_computation(
    conn: sa.Connection,
    cluster_id: str,
    *,
    per_computation: int,
    counts: dict[str | None, int] | None = None,
) -> dict[str | None, tuple[list[str], int]]:
    """Per computation: the names of its first ``per_computation`` groups in
    :data:`GROUP_ORDER`, and how many groups it has, reading only the names shown.

    The counts come from the index; the names of the computations within the limit in
    one query, and those of each larger computation in one query of its own, which the
    database answers with a bounded (top-N) sort instead of sorting every group."""
    counts = dict(group_counts_by_computation(conn, cluster_id) if counts is None else counts)
    counts.pop(None, None)
    large = sorted(c for c, n in counts.items() if c is not None and n > per_computation)
    if len(large) > _MAX_LARGE_COMPUTATIONS:
        return _names_numbered(conn, cluster_id, per_computation, counts)
    found: dict[str | None, tuple[list[str], int]] = {c: ([], n) for c, n in counts.items()}
    if len(large) < len(counts):  # else every group is in a large computation: none to read
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


def group_totals_by_computation(conn: sa.Connection, cluster_id: str) -> dict[str | None, Row]:
    """Per computation (None: groups of no known computation): how many groups, and
    their summed tasks, bytes and seconds; one pass over the cluster's groups serves
    both the cluster's totals and each computation's count."""
    sums = [sa.func.coalesce(sa.func.sum(getattr(_g, c)), 0).label(c) for c in _TOTALS]
    query = (
        sa.select(_g.computation_id, sa.func.count().label("count"), *sums)
        .where(_g.cluster_id == cluster_id)
        .group_by(_g.computation_id)
    )
    return {row.computation_id: dict(row._mapping) for row in conn.execute(query)}


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


def computation_row(
    store: Database | sa.Engine, cluster_id: str, computation_id: str
) -> Row | None:
    """The cluster's computation of exactly this id (its row), None when none."""
    with as_engine(store).connect() as conn:
        return find_computation(conn, cluster_id, computation_id)


def computation_ids_starting(
    store: Database | sa.Engine, cluster_id: str, start: str, *, limit: int = 2
) -> list[str]:
    """The ids of the cluster's computations that start with ``start``, in order, at
    most ``limit`` of them (two tell whether a start is unique)."""
    c = s.computations.c
    with as_engine(store).connect() as conn:
        return list(
            conn.execute(
                sa.select(c.id)
                .where(c.cluster_id == cluster_id, c.id.startswith(start, autoescape=True))
                .order_by(c.id)
                .limit(limit)
            ).scalars()
        )


def span_scope(
    store: Database | sa.Engine, cluster_id: str, *, span: str | None, tag: str | None
) -> Row | None:
    """Of the groups that ran in ``span``'s subtree, in the spans tagged ``tag``, or both
    (every group when neither is given): :func:`span_prefixes`. None when ``span`` names
    no span of the cluster."""
    with as_engine(store).connect() as conn:
        span_ids = None
        if span is not None or tag is not None:
            span_ids = span_scope_ids(conn, cluster_id, span_id=span, tag=tag)
            if span_ids is None:
                return None
        return span_prefixes(conn, cluster_id, span_ids)


def computation_group_totals(
    store: Database | sa.Engine, cluster_id: str, computation_id: str
) -> Row:
    """The computation's groups counted and summed (:func:`group_summary`, no longest)."""
    with as_engine(store).connect() as conn:
        return group_summary(conn, cluster_id, top=0, computation_id=computation_id)


def computation_graph_groups(
    store: Database | sa.Engine, cluster_id: str, computation_id: str, *, limit: int
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
    store: Database | sa.Engine,
    cluster_id: str,
    *,
    offset: int,
    limit: int,
    computation_id: str | None = None,
    span_id: str | None = None,
    tag: str | None = None,
) -> Row | None:
    """:func:`group_page` over a store, optionally of a span filter
    (:func:`span_scope_ids`); None when ``computation_id`` or ``span_id`` names nothing
    of the cluster's."""
    with as_engine(store).connect() as conn:
        if computation_id is not None and not find_computation(conn, cluster_id, computation_id):
            return None
        span_ids = None
        if span_id is not None or tag is not None:
            span_ids = span_scope_ids(conn, cluster_id, span_id=span_id, tag=tag)
            if span_ids is None:
                return None
        return group_page(
            conn,
            cluster_id,
            offset=offset,
            limit=limit,
            computation_id=computation_id,
            span_ids=span_ids,
        )


#: What a graph reads of each group (the wide JSON columns ``states`` and ``types`` left)
GRAPH_COLUMNS = (
    _g.id,
    _g.name,
    _g.prefix,
    _g.span_id,
    _g.dependencies,
    _g.tasks_total,
    _g.tasks_executed,
    _g.tasks_erred,
    _g.nbytes_total,
    _g.duration_s,
    _g.durations,
    _g.started_at,
)


def computation_graph_rows(
    store: Database | sa.Engine, cluster_id: str, computation_id: str, *, limit: int, longest: int
) -> tuple[Row, list[Row], int, dict[str, str]] | None:
    """A computation; every one of its groups (:data:`GRAPH_COLUMNS`) when it has at
    most ``limit``, else its ``longest`` longest; how many it has; and the names of the
    spans the groups read ran in (id -> tags joined by " / "). None when the cluster has
    no such computation."""
    with as_engine(store).connect() as conn:
        comp = find_computation(conn, cluster_id, computation_id)
        if comp is None:
            return None
        where = _scope(cluster_id, computation_id)
        total = int(conn.execute(sa.select(sa.func.count()).where(where)).scalar_one())
        query = sa.select(*GRAPH_COLUMNS).where(where)
        if total > limit:
            query = query.order_by(_g.duration_s.desc(), *GROUP_ORDER).limit(longest)
        rows = _rows(conn, query.order_by(*GROUP_ORDER))
        span_ids = sorted({r["span_id"] for r in rows if r["span_id"] is not None})
        sp = s.spans.c
        names: dict[str, str] = {}
        for start in range(0, len(span_ids), 500):
            chunk = span_ids[start : start + 500]
            found = conn.execute(
                sa.select(sp.span_id, sp.name).where(
                    sp.cluster_id == cluster_id, sp.span_id.in_(chunk)
                )
            )
            for span_id, name in found:
                names[span_id] = " / ".join(str(t) for t in name) if name else span_id
        return comp, rows, total, names


class ComputationState(NamedTuple):
    """A fingerprint of what a computation's views read (:func:`computation_fingerprint`):
    its row's figures and revision; its groups' count, highest revision, sums of tasks
    (total, executed, erred), bytes and seconds, latest stop and earliest start; the
    cluster's task-log segments (count, executions, latest stop, highest revision) and
    spans (count, highest revision)."""

    computation: tuple[Any, ...]
    groups: tuple[Any, ...]
    segments: tuple[Any, ...]
    spans: tuple[Any, ...]

    def group_totals(self) -> Row:
        """The groups' count and sums, as :func:`group_summary` gives them."""
        count, _, total, executed, erred, nbytes, seconds = self.groups[:7]
        return {
            "count": int(count), "tasks_total": int(total or 0),
            "tasks_executed": int(executed or 0), "tasks_erred": int(erred or 0),
            "nbytes_total": int(nbytes or 0), "duration_s": float(seconds or 0.0),
        }  # fmt: skip


def computation_fingerprint(
    store: Database | sa.Engine, cluster_id: str, computation_id: str
) -> ComputationState | None:
    """What changes whenever anything a computation's views read changes: its row, its
    groups' count, sums, latest stop and highest revision, the cluster's task-log
    segments and spans (counts, sums, highest revision). None when the cluster has no
    computation of exactly this id. Summed by the database: a few milliseconds where
    reading the groups takes a second at 10,000."""
    c = s.computations.c
    t = s.task_segments.c
    sp = s.spans.c
    with as_engine(store).connect() as conn:
        comp = conn.execute(
            sa.select(
                c.revision, c.started_at, c.stopped_at, c.tasks_executed, c.tasks_erred,
                c.group_count, sa.func.length(sa.cast(c.code, sa.Text)),
            ).where(c.cluster_id == cluster_id, c.id == computation_id)
        ).first()  # fmt: skip
        if comp is None:
            return None
        groups = conn.execute(
            sa.select(
                sa.func.count(), sa.func.max(_g.revision), sa.func.sum(_g.tasks_total),
                sa.func.sum(_g.tasks_executed), sa.func.sum(_g.tasks_erred),
                sa.func.sum(_g.nbytes_total), sa.func.sum(_g.duration_s),
                sa.func.max(_g.stopped_at), sa.func.min(_g.started_at),
            ).where(_scope(cluster_id, computation_id))
        ).one()  # fmt: skip
        segments = conn.execute(
            sa.select(
                sa.func.count(), sa.func.sum(t.executions), sa.func.max(t.last_stop),
                sa.func.max(t.revision),
            ).where(t.cluster_id == cluster_id)
        ).one()  # fmt: skip
        spans = conn.execute(
            sa.select(sa.func.count(), sa.func.max(sp.revision)).where(sp.cluster_id == cluster_id)
        ).one()
    return ComputationState(tuple(comp), tuple(groups), tuple(segments), tuple(spans))
