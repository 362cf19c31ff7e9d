"""Runs of one recurring thing, oldest first: the spans carrying a tag, the workflow
runs of a name, the clusters of a name, each with its task time by prefix; and the names
that recur (what the regression check walks). Each query is bounded by ``limit`` (the
newest runs). Span tags are found through the span-tag index (``span_tags``,
:mod:`daskscope.store.span_tags`).

A span tag's runs are the user's spans, not only Dask's: Dask puts a task into the span
of its task group while the group lives, so in a long-lived cluster (a service running
the same job every hour, a result kept in memory) the later ``span("etl")`` blocks of a
tag can all land in the first one's span. Their computations still carry each block's
own span id (the ``span`` annotation), and each computation's task groups are recorded
apart: such a merged span is split back into one run per span id (figures from its
group records; Dask's active CPU is per merged span only, so absent)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import sqlalchemy as sa

from daskscope.store import schema as s
from daskscope.store.database import Database, as_engine
from daskscope.store.span_tags import TAG_CHARS, tag_key

__all__ = [
    "HISTORY_LIMIT",
    "by_prefix",
    "cluster_runs",
    "outermost",
    "own_tag_filter",
    "recurring_names",
    "run_count",
    "span_runs",
    "tag_filter",
    "user_span_id",
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
#: Group columns a run's task time by prefix and a split span's figures read
_GROUP_FIELDS = (
    "cluster_id", "span_id", "computation_id", "name", "prefix", "duration_s",
    "nbytes_total", "started_at", "stopped_at",
)  # fmt: skip
#: Values in one ``IN (…)`` list
_CHUNK = 500


def _chunks(values: Iterable[Any]) -> Iterator[list[Any]]:
    ordered = sorted(set(values))
    for i in range(0, len(ordered), _CHUNK):
        yield ordered[i : i + _CHUNK]


def by_prefix(pairs: Iterable[tuple[str, float | None]]) -> dict[str, float]:
    """Task time summed by prefix, of ``(prefix, seconds)`` pairs (None: not measured)."""
    out: dict[str, float] = {}
    for prefix, seconds in pairs:
        if seconds is not None:
            out[prefix] = out.get(prefix, 0.0) + float(seconds)
    return out


def _prefix_times(groups: Iterable[Any]) -> dict[str, float]:
    return by_prefix((g.prefix, g.duration_s) for g in groups)


def _children(conn: sa.Connection, cluster_ids: Iterable[str]) -> dict[str, dict[Any, list[str]]]:
    """Per cluster, each span's children (by ``parent_span_id``; ``None``: the roots)."""
    sp = s.spans.c
    out: dict[str, dict[Any, list[str]]] = {}
    for chunk in _chunks(cluster_ids):
        query = sa.select(sp.cluster_id, sp.span_id, sp.parent_span_id).where(
            sp.cluster_id.in_(chunk)
        )
        for cid, sid, parent in conn.execute(query):
            out.setdefault(cid, {}).setdefault(parent, []).append(sid)
    return out


def _subtree(children: Mapping[Any, list[str]], root: str) -> set[str]:
    found, pending = set(), [root]
    while pending:  # without recursion: a chain of spans may be thousands deep
        sid = pending.pop()
        if sid not in found:
            found.add(sid)
            pending.extend(children.get(sid, ()))
    return found


def _in_spans(spans: Mapping[str, set[str]]) -> Iterator[tuple[list[str], list[str]]]:
    """``(clusters, span ids)`` chunks covering the spans ``{cluster: span ids}``, as
    few as fit :data:`_CHUNK` ids each, so that each cluster's groups are read once (a
    row matched by a chunk may be of another cluster's span id: confirm)."""
    clusters: list[str] = []
    ids: set[str] = set()
    for cid in sorted(spans):
        if clusters and (len(ids) + len(spans[cid]) > _CHUNK or len(clusters) == _CHUNK):
            yield clusters, sorted(ids)
            clusters, ids = [], set()
        if len(spans[cid]) > _CHUNK:  # one cluster of many spans: on its own, in parts
            for chunk in _chunks(spans[cid]):
                yield [cid], chunk
            continue
        clusters.append(cid)
        ids |= spans[cid]
    if clusters:
        yield clusters, sorted(ids)


def _groups_in(conn: sa.Connection, spans: Mapping[str, set[str]]) -> list[Any]:
    """The group records (rows of :data:`_GROUP_FIELDS`) of the spans ``{cluster: span
    ids}``."""
    g = s.task_groups.c
    columns = [g[k] for k in _GROUP_FIELDS]
    rows: list[Any] = []
    for clusters, chunk in _in_spans(spans):
        query = sa.select(*columns).where(g.cluster_id.in_(clusters), g.span_id.in_(chunk))
        rows.extend(r for r in conn.execute(query) if r.span_id in spans[r.cluster_id])
    return rows


def _prefix_sums(clusters: list[str], span_ids: list[str] | None) -> sa.CompoundSelect[Any]:
    """Task time by (cluster, span, prefix) of the groups of ``span_ids`` (None: of any
    span) in ``clusters``, summed from the covering index ``ix_task_groups_span_prefix``
    for the prefixes it holds, with the groups of longer prefixes (usually none) found
    through ``ix_task_groups_span_long_prefix`` (each index serves only the query that
    states its condition: migration 0014). The index is searched by cluster and the span
    ids picked from its entries: as a search key as well, the databases looked up every
    pair of a cluster and a span id (100 clusters and 500 ids: 50,000 lookups, three
    times the whole read); ``coalesce`` keeps the condition off the search (a span id is
    never empty). A row may be of another cluster's span id: the caller confirms."""
    g = s.task_groups.c
    keys = (g.cluster_id, g.span_id, g.prefix)
    scope = [g.cluster_id.in_(clusters)]
    if span_ids is not None:
        scope.append(sa.func.coalesce(g.span_id, "").in_(span_ids))
    return sa.union_all(
        *(
            sa.select(*keys, sa.func.sum(g.duration_s)).where(*scope, fits).group_by(*keys)
            for fits in (s.SHORT_PREFIX, s.LONG_PREFIX)
        )
    )


#: A computation whose annotations may name a span (Dask's ``{"span": {..., "ids": …}}``)
_ANNOTATED = sa.cast(s.computations.c.annotations, sa.Text).contains('"ids"', autoescape=True)


def _tag_computations(conn: sa.Connection, clusters: Iterable[str], tag: str) -> dict[str, Any]:
    """The computations (id, cluster, start, annotations) of ``clusters`` that name a
    user span of ``tag``, in the clusters where they name two or more."""
    c = s.computations.c
    found: dict[str, list[Any]] = {}
    for chunk in _chunks(clusters):
        query = sa.select(c.id, c.cluster_id, c.started_at, c.annotations).where(
            c.cluster_id.in_(chunk), _ANNOTATED
        )
        for r in conn.execute(query):
            if user_span_id(r.annotations, tag) is not None:
                found.setdefault(r.cluster_id, []).append(r)
    return {
        r.id: r
        for rows in found.values()
        if len({user_span_id(r.annotations, tag) for r in rows}) > 1
        for r in rows
    }


def user_span_id(annotations: Any, tag: str) -> str | None:
    """The id of the user's span carrying ``tag`` (its outermost) in a computation's
    ``annotations`` (Dask's ``{"span": {"name": [...], "ids": [...]}}``, one id per
    tag); None when they hold none."""
    span = annotations.get("span") if isinstance(annotations, Mapping) else None
    if not isinstance(span, Mapping):
        return None
    name, ids = span.get("name"), span.get("ids")
    if not isinstance(name, list) or not isinstance(ids, list) or len(name) != len(ids):
        return None
    for t, sid in zip(name, ids, strict=True):
        if not isinstance(t, str):
            return None  # several spans' names in one computation: no one span
        if t == tag:
            return str(sid)
    return None


def _split(span: Row, groups: list[Any], computations: Mapping[str, Any], tag: str) -> list[Row]:
    """The runs of one outermost span tagged ``tag``: the span itself, or, when the
    computations of its groups name several user spans (Dask merged them), one run per
    user span, its figures summed from its group records. Each run with ``prefixes``,
    its task time by prefix."""
    keyed: dict[str, list[Any]] = {}
    unkeyed: list[Any] = []
    for g in groups:
        comp = computations.get(g.computation_id or "")
        key = user_span_id(comp.annotations if comp else None, tag)
        (unkeyed if key is None else keyed.setdefault(key, [])).append(g)
    if len(keyed) <= 1:
        return [{**span, "prefixes": _prefix_times(groups)}]

    def begun(key: str) -> tuple[float, str]:
        return (min(computations[g.computation_id].started_at for g in keyed[key]), key)

    order = sorted(keyed, key=begun)
    # Work of computations that name no span stays with the span Dask made (else the first)
    keyed[span["span_id"] if span["span_id"] in keyed else order[0]].extend(unkeyed)
    runs = []
    for i, key in enumerate(order):
        mine = keyed[key]
        starts = [g.started_at for g in mine if g.started_at is not None]
        stops = [g.stopped_at for g in mine if g.stopped_at is not None]
        # a later user span began after it: this one is done (the last, as Dask says)
        done = bool(span["done"]) or i < len(order) - 1
        runs.append({
            **span, "span_id": key, "merged_into": span["span_id"],
            "enqueued_at": begun(key)[0], "started_at": min(starts) if starts else None,
            "stopped_at": max(stops) if done and stops else None, "done": done,
            "duration_s": sum(float(g.duration_s or 0.0) for g in mine),
            "nbytes_total": sum(int(g.nbytes_total or 0) for g in mine),
            "group_count": len({g.name for g in mine}), "active_cpu_seconds": None,
            "prefixes": _prefix_times(mine),
        })  # fmt: skip
    return runs


def _span_runs(conn: sa.Connection, spans: list[Row], tag: str) -> list[Row]:
    """``spans`` (outermost, tagged ``tag``) as runs (:func:`_split`), oldest first."""
    children = _children(conn, {r["cluster_id"] for r in spans})
    subtrees = {
        (r["cluster_id"], r["span_id"]): _subtree(children.get(r["cluster_id"], {}), r["span_id"])
        for r in spans
    }
    wanted: dict[str, set[str]] = {}
    for (cid, _), ids in subtrees.items():
        wanted.setdefault(cid, set()).update(ids)
    owner = {(key[0], sid): key for key, ids in subtrees.items() for sid in ids}
    # Each run's task time by prefix, summed by the database
    sums: dict[tuple[str, str], list[tuple[str, float | None]]] = {}
    g = s.task_groups.c
    for clusters, chunk in _in_spans(wanted):
        # where the runs hold every span of their clusters (as a tag that wraps all the
        # work does), every group of the clusters is wanted: no span ids to pick
        spans_of = [{s for ids in children.get(cid, {}).values() for s in ids} for cid in clusters]
        every = all(ids <= wanted[cid] for cid, ids in zip(clusters, spans_of, strict=True))
        summed = _prefix_sums(clusters, None if every else chunk)
        for cid, sid, prefix, seconds in conn.execute(summed):
            if sid in wanted[cid]:
                sums.setdefault(owner[cid, sid], []).append((prefix, seconds))
    # Dask can have merged user spans only in a cluster whose computations name two or
    # more spans of the tag; there, which computations fed which run
    computations = _tag_computations(conn, wanted, tag)
    fed: dict[tuple[str, str], set[str]] = {}
    merging = {cid: wanted[cid] for cid in {c.cluster_id for c in computations.values()}}
    for clusters, chunk in _in_spans(merging):
        for part in _chunks(c.id for c in computations.values() if c.cluster_id in clusters):
            query = (
                sa.select(g.cluster_id, g.span_id, g.computation_id)
                .where(g.cluster_id.in_(clusters), g.span_id.in_(chunk))
                .where(g.computation_id.in_(part))
                .distinct()
            )
            for cid, sid, comp in conn.execute(query):
                if sid in wanted[cid]:
                    fed.setdefault(owner[cid, sid], set()).add(comp)
    runs = []
    for r in spans:
        key = (r["cluster_id"], r["span_id"])
        named = {user_span_id(computations[c].annotations, tag) for c in fed.get(key, ())}
        if len(named - {None}) <= 1:
            runs.append({**r, "prefixes": by_prefix(sums.get(key, ()))})
        else:  # Dask merged several user spans: their group records one by one
            runs.extend(_split(r, _groups_in(conn, {key[0]: subtrees[key]}), computations, tag))
    runs.sort(key=lambda r: (r["enqueued_at"], r["span_id"]))
    return runs


def span_runs(
    store: Database | sa.Engine,
    tag: str,
    *,
    account: str | None = None,
    limit: int = HISTORY_LIMIT,
    offset: int = 0,
) -> list[Row]:
    """The newest ``limit`` runs of the span tag ``tag`` after the ``offset`` newest
    (paging back: :func:`run_count` says how many there are), oldest first: the spans
    carrying it (the outermost of each tagged subtree), those Dask merged split back
    into one run per user span (the module's docstring); their columns but the bulky
    JSON ones (states, durations, code), each with its cluster's ``cluster_name``,
    ``account``, ``core_seconds`` and ``memory_limit_byte_seconds``, and ``prefixes``,
    its subtree's task time by task prefix (from its group records)."""
    sp, c, st = s.spans.c, s.clusters.c, s.span_tags.c
    # The tag index gives the newest outermost spans of the tag; the full rows after
    query = sa.select(st.id).where(st.tag == tag_key(tag), st.outermost)
    if account is not None:
        query = query.where(st.cluster_id.in_(sa.select(c.id).where(c.account == account)))
    query = query.order_by(st.enqueued_at.desc(), st.id)
    short = len(tag) <= TAG_CHARS  # else the index holds only its start: confirm on names
    if short:
        query = query.offset(offset).limit(limit)
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
        if not short:  # the page of the confirmed spans, newest first
            rows = rows[: max(0, len(rows) - offset)]
        return _span_runs(conn, rows[-limit:], tag)[-limit:]


def workflow_runs(
    store: Database | sa.Engine, name: str, *, account: str | None = None,
    limit: int = HISTORY_LIMIT, offset: int = 0,
) -> list[Row]:  # fmt: skip
    """The newest ``limit`` workflow runs named ``name`` after the ``offset`` newest,
    oldest first, each with ``prefixes``: the task
    time by prefix of its computations' group records (else of its span's subtree;
    empty without a recorded cluster)."""
    r = s.workflow_runs.c
    query = sa.select(s.workflow_runs).where(r.name == name)
    if account is not None:
        mine = sa.select(s.clusters.c.id).where(s.clusters.c.account == account)
        query = query.where(sa.or_(r.account == account, r.cluster_id.in_(mine)))
    query = query.order_by(r.started_at.desc(), r.id).offset(offset).limit(limit)
    with as_engine(store).connect() as conn:
        rows = [dict(x._mapping) for x in conn.execute(query)]
        rows.reverse()
        g = s.task_groups.c
        columns = [g[k] for k in _GROUP_FIELDS]
        with_span = [x for x in rows if x["cluster_id"] and not x["computation_ids"]]
        children = _children(conn, {x["cluster_id"] for x in with_span if x["span_id"]})
        for run in rows:
            cid, groups = run["cluster_id"], list[Any]()
            if cid and run["computation_ids"]:
                for chunk in _chunks(run["computation_ids"]):
                    query = sa.select(*columns).where(
                        g.cluster_id == cid, g.computation_id.in_(chunk)
                    )
                    groups.extend(conn.execute(query))
            elif cid and run["span_id"]:
                ids = _subtree(children.get(cid, {}), run["span_id"])
                groups = _groups_in(conn, {cid: ids})
            run["prefixes"] = _prefix_times(groups)
    return rows


def cluster_runs(
    store: Database | sa.Engine, name: str, *, account: str | None = None,
    limit: int = HISTORY_LIMIT, offset: int = 0,
) -> list[Row]:  # fmt: skip
    """The newest ``limit`` clusters named ``name`` after the ``offset`` newest, oldest
    first, each with ``prefixes``: its task time by prefix (its prefix records)."""
    c = s.clusters.c
    query = (
        sa.select(s.clusters)
        .where(c.name == name, _account(account))
        .order_by(c.started_at.desc(), c.id)
        .offset(offset)
        .limit(limit)
    )
    p = s.task_prefixes.c
    with as_engine(store).connect() as conn:
        rows = [dict(x._mapping) for x in conn.execute(query)]
        prefixes: dict[str, list[tuple[str, float | None]]] = {}
        for chunk in _chunks(x["id"] for x in rows):
            read = sa.select(p.cluster_id, p.name, p.duration_s).where(p.cluster_id.in_(chunk))
            for x in conn.execute(read):
                prefixes.setdefault(x.cluster_id, []).append((x.name, x.duration_s))
    rows.reverse()
    for row in rows:
        row["prefixes"] = by_prefix(prefixes.get(row["id"], []))
    return rows


def run_count(
    store: Database | sa.Engine, kind: str, name: str, *, account: str | None = None
) -> int:
    """How many runs of ``kind`` ("span", "run" or "cluster") named ``name`` there are
    (what :func:`span_runs`, :func:`workflow_runs` and :func:`cluster_runs` page
    through): a span tag's outermost spans (a span Dask merged several user spans into
    counts once), the workflow runs or the clusters of that name."""
    c = s.clusters.c
    with as_engine(store).connect() as conn:
        if kind == "cluster":
            query = sa.select(sa.func.count()).where(c.name == name, _account(account))
            return int(conn.execute(query).scalar_one())
        if kind == "run":
            r = s.workflow_runs.c
            query = sa.select(sa.func.count()).where(r.name == name)
            if account is not None:
                mine = sa.select(c.id).where(c.account == account)
                query = query.where(sa.or_(r.account == account, r.cluster_id.in_(mine)))
            return int(conn.execute(query).scalar_one())
        st = s.span_tags.c
        where = [st.tag == tag_key(name), st.outermost]
        if account is not None:
            where.append(st.cluster_id.in_(sa.select(c.id).where(c.account == account)))
        if len(name) <= TAG_CHARS:
            return int(conn.execute(sa.select(sa.func.count()).where(*where)).scalar_one())
        # the index holds only the tag's start: confirm on the spans' names
        sp = s.spans.c
        ids = sa.select(st.id).where(*where)
        names = conn.execute(sa.select(sp.name).where(sp.id.in_(ids))).scalars()
        return sum(outermost(n, name) for n in names)


def recurring_names(
    store: Database | sa.Engine, *, min_runs: int, account: str | None = None,
    since: float | None = None,
) -> dict[str, list[str]]:  # fmt: skip
    """Per kind ("span", "run", "cluster"), the names seen at least ``min_runs`` times
    (a span tag counted once per outermost span carrying it, or per user span where
    Dask merged them: :func:`_merged_tags`) since ``since`` (clusters and runs started,
    spans enqueued and computations started, on or after it)."""
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
        tags = {
            str(x)
            for x in conn.execute(
                tag_query.group_by(st.tag).having(sa.func.count() >= min_runs)
            ).scalars()
        }
        tags |= _merged_tags(conn, tag_query, tags, min_runs=min_runs, since=since)
        return {
            "span": sorted(tags),
            "run": [str(x) for x in runs],
            "cluster": [str(x) for x in clusters],
        }


def _merged_tags(
    conn: sa.Connection, tag_query: sa.Select[Any], known: set[str], *, min_runs: int,
    since: float | None,
) -> set[str]:  # fmt: skip
    """The tags (of ``tag_query``'s outermost spans, not in ``known``) that ran at least
    ``min_runs`` times counting, per cluster, the larger of its outermost spans of the
    tag and the user spans of the tag its computations name (:func:`user_span_id`):
    Dask may have merged a tag's spans into one (the module's docstring). Only clusters
    with two or more computations that carry a span annotation are read."""
    st, cp = s.span_tags.c, s.computations.c
    pairs = tag_query.with_only_columns(st.cluster_id, st.tag, sa.func.count().label("n"))
    if known:
        pairs = pairs.where(st.tag.not_in(sorted(known)))
    spans = {
        (r.cluster_id, str(r.tag)): int(r.n)
        for r in conn.execute(pairs.group_by(st.cluster_id, st.tag))
    }
    recent = cp.started_at >= since if since is not None else sa.true()
    annotated = _ANNOTATED
    busy: list[str] = []
    for chunk in _chunks(cid for cid, _ in spans):
        busy.extend(
            conn.execute(
                sa.select(cp.cluster_id)
                .where(cp.cluster_id.in_(chunk), recent, annotated)
                .group_by(cp.cluster_id)
                .having(sa.func.count() >= 2)
            ).scalars()
        )
    ids: dict[tuple[str, str], set[str]] = {}
    for chunk in _chunks(busy):
        read = sa.select(cp.cluster_id, cp.annotations).where(
            cp.cluster_id.in_(chunk), recent, annotated
        )
        for cid, notes in conn.execute(read):
            span = notes.get("span") if isinstance(notes, Mapping) else None
            name = span.get("name") if isinstance(span, Mapping) else None
            for tag in {t for t in name or () if isinstance(t, str)}:
                key = (cid, tag_key(tag))
                sid = user_span_id(notes, tag)
                if key in spans and sid is not None:
                    ids.setdefault(key, set()).add(sid)
    runs: dict[str, int] = {}
    for (cid, tag), n in spans.items():
        runs[tag] = runs.get(tag, 0) + max(n, len(ids.get((cid, tag), ())))
    return {tag for tag, n in runs.items() if n >= min_runs}
