"""Reading the store back: plain, JSON-serialisable dicts, which :mod:`daskscope.views`
turns into the typed views that the CLI and the pages show.

One Core select per table, each served by an index that leads with ``cluster_id``
(or by the ``clusters`` indexes on ``started_at``).
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from daskscope.analysis.duration import elapsed
from daskscope.store import schema as s
from daskscope.store.database import Database, as_engine
from daskscope.store.errors import AmbiguousCluster, UnknownCluster
from daskscope.store.groups import (
    Selection,
    group_names_by_computation,
    group_summary,
    group_totals_by_computation,
    selected_groups,
)

__all__ = [
    "MAX_OFFSET",
    "MAX_PAGE",
    "cluster_detail",
    "list_clusters",
    "profile_trees",
    "resolve_cluster_id",
    "table_counts",
    "worker_samples",
]

MIN_PREFIX = 4
#: How far any listing (clusters, runs, task groups, the audit log) pages, on every
#: route and command alike: a billion rows skipped is past any store, and far inside
#: the 64-bit integer SQLite and PostgreSQL take for OFFSET (2^63 and above failed there).
MAX_OFFSET = 10**9
#: The most rows one page of a listing holds.
MAX_PAGE = 10_000
#: Of a cluster's task groups, a page carries the longest this many, and per
#: computation the names of the first this many (the rest: the paged route).
PAGE_TOP_GROUPS = 20
PAGE_NAMES_PER_COMPUTATION = 50

Row = dict[str, Any]


def list_clusters(
    store: Database | sa.Engine,
    *,
    limit: int | None = 100,
    account: str | None = None,
    user: str | None = None,
    since: float | None = None,
    until: float | None = None,
) -> list[Row]:
    """Clusters started in ``[since, until)``, newest first, each with ``duration_s``."""
    c = s.clusters.c
    query = sa.select(s.clusters).order_by(c.started_at.desc(), c.id.desc())
    if account is not None:
        query = query.where(c.account == account)
    if user is not None:
        query = query.where(c.user == user)
    if since is not None:
        query = query.where(c.started_at >= since)
    if until is not None:
        query = query.where(c.started_at < until)
    if limit is not None:
        query = query.limit(limit)
    with as_engine(store).connect() as conn:
        return [_with_duration(r) for r in _rows(conn, query)]


def resolve_cluster_id(
    store: Database | sa.Engine, id_or_prefix: str, *, account: str | None = None
) -> str:
    """The full id of the cluster named by an exact id or a unique prefix of at least
    :data:`MIN_PREFIX` characters; with ``account``, only that account's clusters exist
    for this lookup. Raises :class:`UnknownCluster` or :class:`AmbiguousCluster`."""
    c = s.clusters.c
    text = id_or_prefix.strip()
    scope = c.account == account if account is not None else sa.true()
    with as_engine(store).connect() as conn:
        if conn.execute(sa.select(c.id).where(c.id == text, scope)).first():
            return text
        if len(text) < MIN_PREFIX:
            raise UnknownCluster(text, min_prefix=MIN_PREFIX)
        query = (
            sa.select(c.id)
            .where(c.id.startswith(text, autoescape=True), scope)
            .order_by(c.id)
            .limit(AmbiguousCluster.SHOWN + 1)  # one more: "..."
        )
        found = list(conn.execute(query).scalars())
    if not found:
        raise UnknownCluster(text, min_prefix=MIN_PREFIX)
    if len(found) > 1:
        raise AmbiguousCluster(text, found)
    return str(found[0])


def cluster_name(store: Database | sa.Engine, cluster_id: str) -> str:
    """The name of the cluster of exactly this id. Raises :class:`UnknownCluster`."""
    with as_engine(store).connect() as conn:
        name = conn.execute(
            sa.select(s.clusters.c.name).where(s.clusters.c.id == cluster_id)
        ).scalar_one_or_none()
    if name is None:
        raise UnknownCluster(cluster_id)
    return str(name)


def cluster_detail(
    store: Database | sa.Engine,
    cluster_id: str,
    *,
    max_groups: int | None = None,
    groups_by: Selection = "duration",
) -> Row:
    """What is recorded about one cluster, read in amounts that stay bounded however
    long it lived (tens of thousands of groups, hundreds of thousands of metrics), except
    for the groups asked for, worker samples and profile trees.

    - ``cluster``: its row with ``duration_s``;
    - ``task_group_summary``: the groups' ``count`` and summed tasks, bytes and seconds,
      the :data:`PAGE_TOP_GROUPS` longest (brief rows, ``top``); ``shown`` groups are
      named in ``top`` or ``task_groups``, ``omitted`` are not;
    - ``task_groups``: full rows of all groups (``max_groups`` None), or of the longest
      (``groups_by="duration"``) or earliest (``"start"``) ``max_groups``; ``selection``
      says which when some are left out;
    - ``computations``: each with the names of its first :data:`PAGE_NAMES_PER_COMPUTATION`
      groups, ``task_groups_total`` and ``task_groups_omitted``;
    - ``fine_metrics``: the fine metrics summed by activity, prefix and unit in the
      database (as :func:`daskscope.analysis.fine_metrics_table`), and ``span_seconds``:
      per span and activity, its own seconds;
    - ``task_prefixes``, ``spans``, ``errors``, ``events``, ``workers`` (last sample of
      each), ``profiles`` (windows without their trees)."""
    if max_groups is not None and max_groups < 0:
        raise ValueError(f"max_groups must be None (all) or >= 0, got {max_groups}")
    with as_engine(store).connect() as conn:
        cluster = conn.execute(sa.select(s.clusters).where(s.clusters.c.id == cluster_id)).first()
        if cluster is None:
            raise UnknownCluster(cluster_id)
        computations = _children(conn, s.computations, cluster_id, s.computations.c.started_at)
        # one pass over the groups: the cluster's totals and each computation's count
        by_computation = group_totals_by_computation(conn, cluster_id)
        summary = group_summary(
            conn, cluster_id, top=PAGE_TOP_GROUPS, by_computation=by_computation
        )
        groups = (
            []
            if max_groups == 0
            else selected_groups(conn, cluster_id, limit=max_groups, by=groups_by)
        )
        named = {g["id"] for g in summary["top"]} | {g["id"] for g in groups}
        summary.update(
            shown=len(named),
            omitted=summary["count"] - len(named),
            selection=None
            if len(groups) == summary["count"]
            else "longest"
            if groups_by == "duration"
            else "earliest",
        )
        names = group_names_by_computation(
            conn,
            cluster_id,
            per_computation=PAGE_NAMES_PER_COMPUTATION,
            counts={c: int(row["count"]) for c, row in by_computation.items()},
        )
        for comp in computations:
            shown, total = names.get(comp["id"], ([], 0))
            comp["task_groups"] = shown
            comp["task_groups_total"] = total
            comp["task_groups_omitted"] = total - len(shown)
        prefixes = _children(
            conn,
            s.task_prefixes,
            cluster_id,
            s.task_prefixes.c.tasks_executed.desc(),
            s.task_prefixes.c.name,
        )
        p = s.profiles.c
        profiles = _rows(
            conn,
            sa.select(p.id, p.started_at, p.stopped_at, p.samples)
            .where(p.cluster_id == cluster_id)
            .order_by(p.started_at),
        )
        m = s.span_metrics.c
        summed = sa.func.sum(m.value).label("value")
        sums = (
            sa.select(m.activity, m.prefix, m.unit, summed)
            .where(m.cluster_id == cluster_id)
            .group_by(m.activity, m.prefix, m.unit)
            .order_by(m.unit, sa.desc("value"), m.activity, m.prefix)
        )
        seconds = (
            sa.select(m.span_id, m.activity, summed)
            .where(m.cluster_id == cluster_id, m.unit == "seconds")
            .group_by(m.span_id, m.activity)
            .order_by(m.span_id, m.activity)
        )
        return {
            "cluster": _with_duration(dict(cluster._mapping)),
            "computations": computations,
            "task_groups": groups,
            "task_group_summary": summary,
            "task_prefixes": prefixes,
            "spans": _children(conn, s.spans, cluster_id, s.spans.c.enqueued_at, s.spans.c.span_id),
            "span_seconds": _rows(conn, seconds),
            "fine_metrics": _rows(conn, sums),
            "errors": _children(conn, s.errors, cluster_id, s.errors.c.at, s.errors.c.key),
            "events": _children(conn, s.events, cluster_id, s.events.c.at, s.events.c.id),
            "workers": _workers(conn, cluster_id),
            "profiles": profiles,
        }


def worker_samples(store: Database | sa.Engine, cluster_id: str) -> list[Row]:
    """Every worker sample of a cluster, in time order."""
    c = s.worker_samples.c
    with as_engine(store).connect() as conn:
        return _children(conn, s.worker_samples, cluster_id, c.sampled_at, c.worker)


def profile_trees(
    store: Database | sa.Engine,
    cluster_id: str,
    *,
    start: float | None = None,
    stop: float | None = None,
) -> list[Row]:
    """Profile windows (with their trees) that overlap ``[start, stop]``."""
    p = s.profiles.c
    query = sa.select(s.profiles).where(p.cluster_id == cluster_id).order_by(p.started_at)
    if start is not None:
        query = query.where(p.stopped_at >= start)
    if stop is not None:
        query = query.where(p.started_at <= stop)
    with as_engine(store).connect() as conn:
        return _rows(conn, query)


def table_counts(store: Database | sa.Engine, cluster_id: str | None = None) -> dict[str, int]:
    """Rows per table, for the whole store or one cluster."""
    counts = {}
    with as_engine(store).connect() as conn:
        for name, table in s.TABLES.items():
            query = sa.select(sa.func.count()).select_from(table)
            if cluster_id is not None:
                column = table.c.id if table is s.clusters else table.c.cluster_id
                query = query.where(column == cluster_id)
            counts[name] = conn.execute(query).scalar_one()
    return counts


def _rows(conn: sa.Connection, query: sa.Select[Any]) -> list[Row]:
    result = conn.execute(query)
    keys = list(result.keys())  # once: a row's own mapping would build them again
    return [dict(zip(keys, row, strict=True)) for row in result.all()]


def _children(conn: sa.Connection, table: sa.Table, cluster_id: str, *order: Any) -> list[Row]:
    return _rows(conn, sa.select(table).where(table.c.cluster_id == cluster_id).order_by(*order))


def _with_duration(row: Row) -> Row:
    row["duration_s"] = elapsed(row["started_at"], row["stopped_at"], row["last_seen_at"])
    return row


def _workers(conn: sa.Connection, cluster_id: str) -> list[Row]:
    """Per worker: first/last sample, peak memory, sample count, and the last
    sample's threads, memory limit, memory split and metrics (aggregated in the database)."""
    w = s.worker_samples.c
    agg = (
        sa.select(
            w.worker,
            sa.func.min(w.sampled_at).label("first_sample_at"),
            sa.func.max(w.sampled_at).label("last_sample_at"),
            sa.func.max(w.memory).label("peak_memory"),
            sa.func.count().label("samples"),
        )
        .where(w.cluster_id == cluster_id)
        .group_by(w.worker)
        .subquery()
    )
    query = (
        sa.select(
            agg,
            w.nthreads,
            w.memory_limit,
            w.memory,
            w.managed_bytes,
            w.unmanaged_bytes,
            w.spilled_bytes,
            w.metrics,
        )
        .join(
            s.worker_samples,
            sa.and_(
                w.cluster_id == cluster_id,
                w.worker == agg.c.worker,
                w.sampled_at == agg.c.last_sample_at,
            ),
        )
        .order_by(agg.c.worker)
    )
    workers: dict[str, Row] = {}
    for row in _rows(conn, query):
        workers.setdefault(row["worker"], row)  # two samples at one instant: keep one
    return list(workers.values())
