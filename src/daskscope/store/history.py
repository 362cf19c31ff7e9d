"""Runs of one recurring thing, oldest first: the spans carrying a tag, the workflow
runs of a name, the clusters of a name; and the names that recur (what the regression
check walks). Each query is bounded by ``limit`` (the newest runs). Span tags are
found through the span-tag index (``span_tags``, :mod:`daskscope.store.span_tags`)."""

from __future__ import annotations

import json
from typing import Any

import sqlalchemy as sa

from daskscope.store import schema as s
from daskscope.store.engine import Store, as_engine
from daskscope.store.span_tags import TAG_CHARS, tag_key

__all__ = [
    "HISTORY_LIMIT",
    "cluster_runs",
    "outermost",
    "own_tag_filter",
    "recurring_names",
    "span_runs",
    "tag_filter",
    "workflow_runs",
]

Row = dict[str, Any]

#: A history holds at most this many runs, the newest
HISTORY_LIMIT = 200


def tag_filter(tag: str) -> sa.ColumnElement[bool]:
    """Spans whose JSON ``name`` may hold ``tag``: a text match on the stored JSON (both
    dialects, escaped or not), to be confirmed on the decoded names."""
    text = sa.cast(s.spans.c.name, sa.Text)
    needles = {json.dumps(tag), json.dumps(tag, ensure_ascii=False)}
    return sa.or_(*(text.contains(n, autoescape=True) for n in needles))


def _account(account: str | None) -> sa.ColumnElement[bool]:
    return s.clusters.c.account == account if account is not None else sa.true()


def own_tag_filter(tag: str) -> sa.ColumnElement[bool]:
    """Spans whose own tag (the last of their JSON ``name``) may be ``tag``: Dask's
    ``span(tag)`` names a span by its parent's name and one more tag, so this is what
    each span adds. A text match on the stored JSON, confirmed on the decoded names."""
    text = sa.cast(s.spans.c.name, sa.Text)
    needles = {json.dumps(tag) + "]", json.dumps(tag, ensure_ascii=False) + "]"}
    return sa.or_(*(text.endswith(n, autoescape=True) for n in needles))


def outermost(name: list[str], tag: str) -> bool:
    """A span named ``name`` is the outermost of a subtree tagged ``tag``: its own tag,
    and none of its parents'."""
    return bool(name) and name[-1] == tag and tag not in name[:-1]


#: Span columns a history leaves out: JSON no figure reads, costly to decode for 200 runs
_BULKY = ("states", "durations", "code")
#: Cluster columns a span's cost needs (daskscope.analysis.span_cost)
_CAPACITY = ("account", "core_seconds", "memory_limit_byte_seconds")


def span_runs(
    store: Store | sa.Engine,
    tag: str,
    *,
    account: str | None = None,
    limit: int = HISTORY_LIMIT,
) -> list[Row]:
    """The newest ``limit`` spans tagged ``tag`` (the outermost of each tagged subtree),
    oldest first: their columns but the bulky JSON ones (states, durations, code), each
    with its cluster's ``cluster_name``, ``account``, ``core_seconds`` and
    ``memory_limit_byte_seconds``."""
    sp, c, st = s.spans.c, s.clusters.c, s.span_tags.c
    # The tag index gives the newest outermost spans of the tag; the full rows after
    query = sa.select(st.id).where(st.tag == tag_key(tag), st.outermost)
    if account is not None:
        query = query.where(st.cluster_id.in_(sa.select(c.id).where(c.account == account)))
    query = query.order_by(st.enqueued_at.desc(), st.id)
    if len(tag) <= TAG_CHARS:  # else the index holds only its start: confirm on names
        query = query.limit(limit)
    with as_engine(store).connect() as conn:
        chosen = list(conn.execute(query).scalars())
        full = (
            sa.select(
                *(col for col in s.spans.columns if col.name not in _BULKY),
                c.name.label("cluster_name"),
                *(c[name] for name in _CAPACITY),
            )
            .join(s.clusters, c.id == sp.cluster_id)
            .where(sp.id.in_(chosen))
            .order_by(sp.enqueued_at, sp.span_id)
        )
        rows = [dict(r._mapping) for r in conn.execute(full) if outermost(r.name, tag)]
        return rows[-limit:]


def workflow_runs(
    store: Store | sa.Engine, name: str, *, account: str | None = None,
    limit: int = HISTORY_LIMIT,
) -> list[Row]:  # fmt: skip
    """Workflow runs named ``name``, oldest first."""
    r = s.workflow_runs.c
    query = sa.select(s.workflow_runs).where(r.name == name)
    if account is not None:
        mine = sa.select(s.clusters.c.id).where(s.clusters.c.account == account)
        query = query.where(sa.or_(r.account == account, r.cluster_id.in_(mine)))
    query = query.order_by(r.started_at.desc(), r.id).limit(limit)
    with as_engine(store).connect() as conn:
        rows = [dict(x._mapping) for x in conn.execute(query)]
    rows.reverse()
    return rows


def cluster_runs(
    store: Store | sa.Engine, name: str, *, account: str | None = None,
    limit: int = HISTORY_LIMIT,
) -> list[Row]:  # fmt: skip
    """Clusters named ``name``, oldest first."""
    c = s.clusters.c
    query = (
        sa.select(s.clusters)
        .where(c.name == name, _account(account))
        .order_by(c.started_at.desc(), c.id)
        .limit(limit)
    )
    with as_engine(store).connect() as conn:
        rows = [dict(x._mapping) for x in conn.execute(query)]
    rows.reverse()
    return rows


def recurring_names(
    store: Store | sa.Engine, *, min_runs: int, account: str | None = None,
    since: float | None = None,
) -> dict[str, list[str]]:  # fmt: skip
    """Per kind ("span", "run", "cluster"), the names seen at least ``min_runs`` times
    (a span tag counted once per outermost span carrying it) since ``since`` (clusters
    and runs started, spans enqueued, on or after it)."""
    c, r = s.clusters.c, s.workflow_runs.c
    with as_engine(store).connect() as conn:
        recent = c.started_at >= since if since is not None else sa.true()
        clusters = conn.execute(
            sa.select(c.name)
            .where(_account(account), recent, c.name != "")
            .group_by(c.name)
            .having(sa.func.count() >= min_runs)
            .order_by(c.name)
        ).scalars()
        run_query = sa.select(r.name).group_by(r.name).having(sa.func.count() >= min_runs)
        if account is not None:
            mine = sa.select(c.id).where(c.account == account)
            run_query = run_query.where(sa.or_(r.account == account, r.cluster_id.in_(mine)))
        if since is not None:
            run_query = run_query.where(r.started_at >= since)
        runs = conn.execute(run_query.order_by(r.name)).scalars()
        # Each outermost span counted once under its own tag (the span-tag index; recent
        # by the span's own time, so that no cluster row is read without an account)
        st = s.span_tags.c
        tag_query = sa.select(st.tag).where(st.outermost)
        if since is not None:
            tag_query = tag_query.where(st.enqueued_at >= since)
        if account is not None:
            tag_query = tag_query.join(s.clusters, c.id == st.cluster_id).where(_account(account))
        tags = conn.execute(
            tag_query.group_by(st.tag).having(sa.func.count() >= min_runs).order_by(st.tag)
        ).scalars()
        return {
            "span": [str(x) for x in tags],
            "run": [str(x) for x in runs],
            "cluster": [str(x) for x in clusters],
        }
