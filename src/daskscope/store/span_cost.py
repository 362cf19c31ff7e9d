"""What cost attribution reads: the outermost spans of a tag (or of every tag) in a
time range with their clusters' capacity, and each computation's summed task time.
The arithmetic is :mod:`daskscope.analysis.span_cost`'s."""

from __future__ import annotations

from typing import Any, Literal

import sqlalchemy as sa

from daskscope.store import schema as s
from daskscope.store.database import Database, as_engine
from daskscope.store.errors import UnknownCluster
from daskscope.store.span_tags import tag_key

__all__ = [
    "CLUSTER_COLUMNS",
    "cluster_row",
    "computation_task_seconds",
    "root_spans",
    "span_cost_sums",
]

Row = dict[str, Any]

#: What a span's cost needs of its cluster (the capacity and who ran it)
CLUSTER_COLUMNS = (
    "account",
    "user",
    "core_seconds",
    "memory_limit_byte_seconds",
    "compute_seconds",
)


def _cluster_columns() -> list[sa.ColumnElement[Any]]:
    c = s.clusters.c
    return [c.id.label("cluster_id"), c.name.label("cluster_name")] + [
        c[name] for name in CLUSTER_COLUMNS
    ]


def cluster_row(store: Database | sa.Engine, cluster_id: str) -> Row:
    """The cluster's id, name and :data:`CLUSTER_COLUMNS` (:class:`UnknownCluster` if
    none has this id)."""
    query = sa.select(*_cluster_columns()).where(s.clusters.c.id == cluster_id)
    with as_engine(store).connect() as conn:
        row = conn.execute(query).first()
    if row is None:
        raise UnknownCluster(cluster_id)
    return dict(row._mapping)


def span_cost_sums(
    store: Database | sa.Engine,
    by: Literal["user", "tag"],
    tag: str | None = None,
    *,
    since: float | None = None,
    until: float | None = None,
    account: str | None = None,
    roots_only: bool = False,
) -> list[Row]:
    """The outermost spans of each subtree tagged ``tag`` (None: of every tag, each
    under its own) enqueued in ``[since, until)``, summed per account and member
    (``by="user"``) or tag: ``key``, ``account``, ``spans``, ``clusters``,
    ``task_seconds`` and the capacity attributed to them, ``core_seconds`` and
    ``memory_byte_seconds`` (each span's share of its cluster's, as
    :func:`daskscope.analysis.span_cost.attributed_capacity` computes it: priced by
    ``cost_parts``, they give the attributed cost). A tag longer than
    :data:`~daskscope.store.span_tags.TAG_CHARS` is matched and listed by its start.
    ``roots_only``: only spans without a parent, which hold each task once (tags nest:
    a span's figures include its children's)."""
    st, c = s.span_tags.c, s.clusters.c
    core = c.core_seconds
    # min(task seconds, core seconds): a span cannot use more than its cluster had; the
    # span's seconds and whether it is a root are kept in the tag index (migration 0011)
    used = sa.case((core <= 0, 0.0), (st.duration_s > core, core), else_=st.duration_s)
    memory = sa.case((core <= 0, 0.0), else_=used * c.memory_limit_byte_seconds / core)
    key = c.user if by == "user" else st.tag
    query = (
        sa.select(
            key.label("key"),
            c.account,
            sa.func.count().label("spans"),
            sa.func.count(sa.distinct(st.cluster_id)).label("clusters"),
            sa.func.sum(st.duration_s).label("task_seconds"),
            sa.func.sum(used).label("core_seconds"),
            sa.func.sum(memory).label("memory_byte_seconds"),
        )
        .select_from(s.span_tags)
        .join(s.clusters, c.id == st.cluster_id)
        .where(st.outermost)
        .group_by(key, c.account)
    )
    if tag is not None:
        query = query.where(st.tag == tag_key(tag))
    if roots_only:
        query = query.where(st.root)
    if since is not None:
        query = query.where(st.enqueued_at >= since)
    if until is not None:
        query = query.where(st.enqueued_at < until)
    if account is not None:
        query = query.where(c.account == account)
    with as_engine(store).connect() as conn:
        return [dict(r._mapping) for r in conn.execute(query)]


def root_spans(store: Database | sa.Engine, cluster_id: str) -> list[Row]:
    """The cluster's root spans (no parent among its spans): they partition its tasks,
    Dask putting tasks outside any span of ours in its ``default`` span."""
    sp = s.spans.c
    query = sa.select(sp.span_id, sp.parent_span_id, sp.name, sp.duration_s).where(
        sp.cluster_id == cluster_id
    )
    with as_engine(store).connect() as conn:
        rows = [dict(r._mapping) for r in conn.execute(query.order_by(sp.enqueued_at))]
    ids = {r["span_id"] for r in rows}
    return [r for r in rows if r["parent_span_id"] not in ids]


def computation_task_seconds(store: Database | sa.Engine, cluster_id: str) -> dict[str, float]:
    """Per computation of the cluster, its group records' summed task time."""
    g = s.task_groups.c
    query = (
        sa.select(g.computation_id, sa.func.sum(g.duration_s))
        .where(g.cluster_id == cluster_id, g.computation_id.is_not(None))
        .group_by(g.computation_id)
    )
    with as_engine(store).connect() as conn:
        return {str(cid): float(total or 0.0) for cid, total in conn.execute(query)}
