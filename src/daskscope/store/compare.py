"""What a comparison reads of one side: a cluster, one computation, the spans of a
cluster carrying a tag, or a workflow run; each with its task groups (or prefixes),
fine metrics and code, and the cluster it ran on."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from daskscope.analysis.cluster import subtree_ids
from daskscope.analysis.compare import tagged_spans
from daskscope.store import schema as s
from daskscope.store.database import Database, as_engine
from daskscope.store.errors import UnknownCluster
from daskscope.store.history import tag_filter
from daskscope.store.runs import UnknownRun

__all__ = ["UnknownPart", "cluster_side", "computation_side", "run_side", "span_side"]

Row = dict[str, Any]

_GROUP_COLUMNS = ("name", "prefix", "tasks_executed", "duration_s", "nbytes_total", "durations")


class UnknownPart(LookupError):
    """A cluster has no such computation, or no span with that tag."""


def _rows(conn: sa.Connection, query: sa.Select[Any]) -> list[Row]:
    return [dict(r._mapping) for r in conn.execute(query)]


def _cluster(conn: sa.Connection, cluster_id: str) -> Row:
    row = conn.execute(sa.select(s.clusters).where(s.clusters.c.id == cluster_id)).first()
    if row is None:
        raise UnknownCluster(cluster_id)
    return dict(row._mapping)


def _groups(conn: sa.Connection, where: sa.ColumnElement[bool]) -> list[Row]:
    g = s.task_groups.c
    return _rows(conn, sa.select(*(g[k] for k in _GROUP_COLUMNS)).where(where))


def _metrics(conn: sa.Connection, cluster_id: str, span_ids: set[str] | None) -> list[Row]:
    """Fine metrics in seconds, summed by context, activity and prefix (of some spans
    only)."""
    m = s.span_metrics.c
    where = [m.cluster_id == cluster_id, m.unit == "seconds"]
    if span_ids is not None:
        where.append(m.span_id.in_(sorted(span_ids)))
    summed = sa.func.sum(m.value).label("value")
    keys = (m.context, m.activity, m.prefix)
    return _rows(conn, sa.select(*keys, summed).where(*where).group_by(*keys))


def _all_spans(conn: sa.Connection, cluster_id: str) -> list[Row]:
    sp = s.spans.c
    return _rows(conn, sa.select(sp.span_id, sp.parent_span_id).where(sp.cluster_id == cluster_id))


def cluster_side(store: Database | sa.Engine, cluster_id: str) -> Row:
    """A whole cluster: its row, prefixes (as groups), fine metrics, the code of its
    computations."""
    with as_engine(store).connect() as conn:
        cluster = _cluster(conn, cluster_id)
        p = s.task_prefixes.c
        prefixes = _rows(
            conn,
            sa.select(p.name, p.tasks_executed, p.duration_s, p.nbytes_total, p.durations).where(
                p.cluster_id == cluster_id
            ),
        )
        code = conn.execute(
            sa.select(s.computations.c.code)
            .where(s.computations.c.cluster_id == cluster_id)
            .order_by(s.computations.c.started_at)
        ).scalars()
        return {
            "cluster": cluster,
            "row": cluster,
            "groups": prefixes,
            "metrics": _metrics(conn, cluster_id, None),
            "code": [line for snippet in code for line in snippet or ()],
        }


def computation_side(store: Database | sa.Engine, cluster_id: str, id_or_prefix: str) -> Row:
    """One computation of a cluster (an id or a unique start of one): its row, groups
    and code; Dask keeps no fine metrics per computation (only per span)."""
    c = s.computations.c
    with as_engine(store).connect() as conn:
        cluster = _cluster(conn, cluster_id)
        found = _rows(
            conn,
            sa.select(s.computations)
            .where(c.cluster_id == cluster_id, c.id.startswith(id_or_prefix, autoescape=True))
            .order_by(c.id)
            .limit(2),
        )
        exact = [r for r in found if r["id"] == id_or_prefix]
        if not found or (len(found) > 1 and not exact):
            what = "no" if not found else "more than one"
            raise UnknownPart(
                f"cluster {cluster_id} has {what} computation {id_or_prefix!r}; "
                f"the cluster page lists its computations"
            )
        comp = exact[0] if exact else found[0]
        g = s.task_groups.c
        groups = _groups(conn, sa.and_(g.cluster_id == cluster_id, g.computation_id == comp["id"]))
        return {"cluster": cluster, "row": comp, "groups": groups, "metrics": None,
                "code": list(comp["code"] or ())}  # fmt: skip


def span_side(store: Database | sa.Engine, cluster_id: str, tag: str) -> Row:
    """The spans of a cluster carrying ``tag`` (outermost of each tagged subtree): their
    rows, and the groups and fine metrics of their subtrees."""
    sp, g = s.spans.c, s.task_groups.c
    with as_engine(store).connect() as conn:
        cluster = _cluster(conn, cluster_id)
        rows = _rows(conn, sa.select(s.spans).where(sp.cluster_id == cluster_id, tag_filter(tag)))
        spans = tagged_spans(rows, tag)
        if not spans:
            raise UnknownPart(
                f"cluster {cluster_id} has no span tagged {tag!r}; the cluster page lists its spans"
            )
        everything = _all_spans(conn, cluster_id)
        ids: set[str] = set()
        for span in spans:
            ids |= subtree_ids(everything, span["span_id"])
        groups = _groups(conn, sa.and_(g.cluster_id == cluster_id, g.span_id.in_(sorted(ids))))
        return {"cluster": cluster, "spans": spans, "groups": groups,
                "metrics": _metrics(conn, cluster_id, ids)}  # fmt: skip


def run_side(store: Database | sa.Engine, run_id: str) -> Row:
    """A workflow run: its row, and when a recorder watched it, its cluster, and the
    groups and fine metrics of its span (else of its computations)."""
    r, g = s.workflow_runs.c, s.task_groups.c
    with as_engine(store).connect() as conn:
        found = conn.execute(sa.select(s.workflow_runs).where(r.id == run_id)).first()
        if found is None:
            raise UnknownRun(run_id)
        run = dict(found._mapping)
        side: Row = {"row": run, "cluster": None, "groups": [], "metrics": None, "code": []}
        cluster_id = run["cluster_id"]
        if cluster_id is None:
            return side
        try:
            side["cluster"] = _cluster(conn, cluster_id)
        except UnknownCluster:
            return side
        if run["span_id"]:
            ids = subtree_ids(_all_spans(conn, cluster_id), run["span_id"])
            side["groups"] = _groups(conn, sa.and_(g.cluster_id == cluster_id, g.span_id.in_(ids)))
            side["metrics"] = _metrics(conn, cluster_id, ids)
        elif run["computation_ids"]:
            where = sa.and_(
                g.cluster_id == cluster_id, g.computation_id.in_(run["computation_ids"])
            )
            side["groups"] = _groups(conn, where)
        code = conn.execute(
            sa.select(s.computations.c.code).where(
                s.computations.c.cluster_id == cluster_id,
                s.computations.c.id.in_(run["computation_ids"] or []),
            )
        ).scalars()
        side["code"] = [line for snippet in code for line in snippet or ()]
        return side
