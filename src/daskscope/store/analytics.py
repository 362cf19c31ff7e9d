"""Read queries behind the account page: totals over a time range, weekly usage per
member, and the cluster listing (filtered, sorted and paged in the database).

Weeks are binned in SQL. Times are epoch-second floats, so a week is
``floor((started_at - MONDAY) / WEEK)``; ``floor`` is spelled per dialect (see
:class:`_floor`) because SQLite's math functions are an optional build feature.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.expression import ColumnElement, FunctionElement

from daskscope.analysis.duration import elapsed
from daskscope.store import schema as s
from daskscope.store.database import Database, as_engine
from daskscope.store.queries import list_clusters

__all__ = [
    "MONDAY",
    "RUNNING_WITHIN",
    "SORTS",
    "WEEK",
    "Prices",
    "account_totals",
    "cluster_page",
    "clusters_in_week",
    "computation_groups",
    "running_clause",
    "span_rows",
    "weekly_usage",
    "worker_events",
]

#: 1970-01-05 00:00 UTC, the first Monday after the epoch: weeks start on Mondays (UTC).
MONDAY = 4 * 86400.0
WEEK = 7 * 86400.0

Row = dict[str, Any]


class _floor(FunctionElement[int]):
    """``floor(x)`` for x >= 0 on both dialects (only non-negative offsets are binned)."""

    type = sa.BigInteger()
    inherit_cache = True


@compiles(_floor)
def _floor_default(element: _floor, compiler: Any, **kw: Any) -> str:
    return f"floor({compiler.process(element.clauses, **kw)})"


@compiles(_floor, "sqlite")
def _floor_sqlite(element: _floor, compiler: Any, **kw: Any) -> str:
    # CAST truncates toward zero in SQLite, which is floor for non-negative values.
    return f"CAST({compiler.process(element.clauses, **kw)} AS INTEGER)"


def _end(c: Any) -> ColumnElement[Any]:
    return sa.func.coalesce(c.stopped_at, c.last_seen_at)


def _range(query: sa.Select[Any], since: float | None, until: float | None) -> sa.Select[Any]:
    c = s.clusters.c
    if since is not None:
        query = query.where(c.started_at >= since)
    if until is not None:
        query = query.where(c.started_at < until)
    return query


#: Largest term of a sum: a row written before the wire refused such values (or
#: straight to the store) must not make a sum overflow for the whole account
#: (PostgreSQL raises, SQLite returns inf, which JSON cannot carry)
_TERM_CAP = 1e30


def _capped(value: Any) -> ColumnElement[Any]:
    return sa.case((value > _TERM_CAP, _TERM_CAP), (value < -_TERM_CAP, -_TERM_CAP), else_=value)


def _sum(value: Any, *, integer: bool = False) -> ColumnElement[Any]:
    # Integers are summed as floats: SQLite raises on a 64-bit integer overflow
    term = sa.cast(value, sa.Double) if integer else value
    return sa.func.coalesce(sa.func.sum(_capped(term)), 0.0)


def _sums() -> list[Any]:
    c = s.clusters.c
    return [
        sa.func.count().label("clusters"),
        _sum(_end(c) - c.started_at).label("cluster_seconds"),
        _sum(c.core_seconds).label("core_seconds"),
        _sum(c.compute_seconds).label("compute_seconds"),
        _sum(c.memory_limit_byte_seconds).label("memory_limit_byte_seconds"),
        _sum(c.bytes_processed, integer=True).label("bytes_processed"),
        _sum(c.tasks_executed, integer=True).label("tasks_executed"),
        _sum(c.tasks_erred, integer=True).label("tasks_erred"),
    ]


_INTEGERS = ("clusters", "bytes_processed", "tasks_executed", "tasks_erred", "week")
_FLOATS = ("cluster_seconds", "core_seconds", "compute_seconds", "memory_limit_byte_seconds")


def _plain_rows(result: sa.CursorResult[Any]) -> list[Row]:
    """Rows as dicts with the sums' Python types (keys read once: a row's own mapping
    would build them again, which costs more than the query for thousands of bins)."""
    keys = list(result.keys())
    ints = [k for k in _INTEGERS if k in keys]
    floats = [k for k in _FLOATS if k in keys]
    rows = []
    for values in result.all():
        out = dict(zip(keys, values, strict=True))
        for key in ints:
            if out[key] is not None:
                out[key] = int(out[key])
        for key in floats:
            if out[key] is not None:
                out[key] = float(out[key])
        rows.append(out)
    return rows


def account_totals(
    store: Database | sa.Engine,
    *,
    since: float | None = None,
    until: float | None = None,
    account: str | None = None,
) -> list[Row]:
    """Totals of the clusters started in ``[since, until)``, one row per account (cost
    rates are per account); cluster seconds count to the stop, else the last sign of life.
    ``account`` keeps only that account's row."""
    c = s.clusters.c
    query = _range(sa.select(c.account, *_sums()), since, until).group_by(c.account)
    if account is not None:
        query = query.where(c.account == account)
    with as_engine(store).connect() as conn:
        return _plain_rows(conn.execute(query.order_by(c.account)))


def weekly_usage(
    store: Database | sa.Engine,
    *,
    since: float | None = None,
    until: float | None = None,
    account: str | None = None,
    user: str | None = None,
) -> list[Row]:
    """Per member (user, account) and week: clusters, cluster, core and compute seconds
    and memory-limit byte-seconds (the totals of :func:`account_totals` that usage
    shows), optionally of one account and/or one member.

    Each row has ``week`` (an index) and ``week_start`` (epoch seconds of its Monday);
    a cluster counts in the week it started.
    """
    c = s.clusters.c
    week = _floor((c.started_at - MONDAY) / WEEK).label("week")
    # Only the sums the usage shows, so that the covering index ``ix_clusters_usage``
    # answers the query without reading the wide cluster rows
    sums = [
        sa.func.count().label("clusters"),
        _sum(_end(c) - c.started_at).label("cluster_seconds"),
        _sum(c.core_seconds).label("core_seconds"),
        _sum(c.compute_seconds).label("compute_seconds"),
        _sum(c.memory_limit_byte_seconds).label("memory_limit_byte_seconds"),
    ]
    query = _range(sa.select(c.user, c.account, week, *sums), since, until)
    if account is not None:
        query = query.where(c.account == account)
    if user is not None:
        query = query.where(c.user == user)
    # Only non-negative offsets are binned, so the dialect-specific floor is exact.
    query = query.where(c.started_at >= MONDAY).group_by(c.user, c.account, week)
    with as_engine(store).connect() as conn:
        rows = _plain_rows(conn.execute(query))
    # Ordered here, not in SQL: an ORDER BY makes PostgreSQL group by sorting 10,000
    # rows instead of hashing them
    rows.sort(key=lambda r: (r["week"], r["user"], r["account"]))
    for row in rows:
        row["week_start"] = MONDAY + row["week"] * WEEK
    return rows


def clusters_in_week(
    store: Database | sa.Engine,
    *,
    user: str | None = None,
    week_start: float | None = None,
    since: float | None = None,
    until: float | None = None,
    limit: int | None = 100,
    account: str | None = None,
) -> list[Row]:
    """The cluster listing: newest first, optionally one member's and/or one week's.

    ``week_start`` narrows ``[since, until)`` to that week (served by the
    ``(user, started_at)`` and ``started_at`` indexes).
    """
    if week_start is not None:
        since = week_start if since is None else max(since, week_start)
        until = week_start + WEEK if until is None else min(until, week_start + WEEK)
    return list_clusters(store, limit=limit, user=user, since=since, until=until, account=account)


#: A cluster without a stop that wrote within this many seconds is running (the
#: recorder writes every few seconds: ``daskscope.flush-interval``, 5 s by default)
RUNNING_WITHIN = 120.0

#: What the listing sorts by: a column, or an expression of the row
SORTS = ("started", "name", "user", "duration", "workers", "tasks", "errors", "cost", "bytes")

#: An account's prices for sorting by cost: (per core-hour, per GiB-hour), None: unpriced
Prices = Callable[[str], tuple[float | None, float | None]]


def _cost(accounts: list[str], prices: Prices) -> ColumnElement[Any]:
    """Each cluster's cost by its account's prices, as ``analysis.cost`` computes it
    (NULL without a core price)."""
    c = s.clusters.c
    whens = []
    for account in accounts:
        core, gib = prices(account)
        if core is None:
            continue
        value = c.core_seconds / 3600.0 * core
        if gib is not None:
            value = value + c.memory_limit_byte_seconds / float(2**30) / 3600.0 * gib
        whens.append((c.account == account, value))
    return sa.case(*whens, else_=sa.null()) if whens else sa.null()


def running_clause(now: float) -> ColumnElement[bool]:
    c = s.clusters.c
    return sa.and_(c.stopped_at.is_(None), c.last_seen_at >= now - RUNNING_WITHIN)


def cluster_page(
    store: Database | sa.Engine,
    *,
    now: float,
    prices: Prices,
    account: str | None = None,
    q: str | None = None,
    user: str | None = None,
    since: float | None = None,
    until: float | None = None,
    errors: bool = False,
    running: bool = False,
    sort: str = "started",
    descending: bool = True,
    offset: int = 0,
    limit: int | None = 100,
) -> tuple[int, list[Row]]:
    """One page of the cluster listing and how many clusters match in all.

    ``q`` is a case-insensitive substring of the name or the user; ``errors`` keeps
    clusters with errored tasks; ``running`` those without a stop that wrote within
    :data:`RUNNING_WITHIN` of ``now``. Ties (and NULLs, last) are ordered newest first.
    """
    if sort not in SORTS:
        raise ValueError(f"sort must be one of {', '.join(SORTS)}, got {sort!r}")
    c = s.clusters.c
    where: list[ColumnElement[bool]] = []
    if account is not None:
        where.append(c.account == account)
    if user is not None:
        where.append(c.user == user)
    if q:
        where.append(
            sa.or_(c.name.icontains(q, autoescape=True), c.user.icontains(q, autoescape=True))
        )
    if since is not None:
        where.append(c.started_at >= since)
    if until is not None:
        where.append(c.started_at < until)
    if errors:
        where.append(c.tasks_erred > 0)
    if running:
        where.append(running_clause(now))
    with as_engine(store).connect() as conn:
        total = conn.execute(sa.select(sa.func.count()).select_from(s.clusters).where(*where))
        count = int(total.scalar_one())
        if sort == "cost":
            listed = sa.select(c.account).where(*where).distinct()
            key: Any = _cost(sorted(conn.execute(listed).scalars()), prices)
        else:
            key = {
                "started": c.started_at,
                "name": c.name,
                "user": c.user,
                "duration": _end(c) - c.started_at,
                "workers": c.workers_peak,
                "tasks": c.tasks_executed,
                "errors": c.tasks_erred,
                "bytes": c.bytes_processed,
            }[sort]
        first = key.desc() if descending else key.asc()
        if sort == "cost":
            # Unpriced clusters (NULL) last. Only cost can be NULL: on the NOT NULL
            # columns NULLS LAST would keep PostgreSQL from reading their index backwards
            first = first.nulls_last()
        order = (first, c.started_at.desc(), c.id.desc())
        # Order and page the ids alone, then read the page's full rows: the sort then
        # carries a few columns per cluster, not all of them
        page = sa.select(c.id).where(*where).order_by(*order).offset(offset)
        if limit is not None:
            page = page.limit(limit)
        query = sa.select(s.clusters).where(c.id.in_(page.scalar_subquery())).order_by(*order)
        rows = [dict(r._mapping) for r in conn.execute(query)]
    for row in rows:
        row["duration_s"] = elapsed(row["started_at"], row["stopped_at"], row["last_seen_at"])
    return count, rows


def computation_groups(
    store: Database | sa.Engine, cluster_id: str, computation_id: str
) -> tuple[Row, list[Row]] | None:
    """One computation and its task groups (None when the cluster has no such one)."""
    comp = s.computations.c
    tg = s.task_groups.c
    with as_engine(store).connect() as conn:
        query = sa.select(s.computations).where(
            comp.cluster_id == cluster_id, comp.id == computation_id
        )
        found = conn.execute(query).first()
        if found is None:
            return None
        groups = conn.execute(
            sa.select(s.task_groups)
            .where(tg.cluster_id == cluster_id, tg.computation_id == computation_id)
            .order_by(tg.name)
        )
        return dict(found._mapping), [dict(g._mapping) for g in groups]


def worker_events(store: Database | sa.Engine, cluster_id: str) -> list[Row]:
    """Worker arrivals and departures of a cluster, in time order."""
    e = s.events.c
    query = (
        sa.select(e.at, e.kind, e.worker, e.detail)
        .where(e.cluster_id == cluster_id, e.kind.in_(("worker-added", "worker-removed")))
        .order_by(e.at)
    )
    with as_engine(store).connect() as conn:
        return [dict(r._mapping) for r in conn.execute(query)]


def span_rows(store: Database | sa.Engine, cluster_id: str) -> tuple[list[Row], list[Row]]:
    """A cluster's spans (id and tags only) and all its fine-metric rows."""
    sp = s.spans.c
    m = s.span_metrics.c
    with as_engine(store).connect() as conn:
        spans = [
            dict(r._mapping)
            for r in conn.execute(sa.select(sp.span_id, sp.name).where(sp.cluster_id == cluster_id))
        ]
        metrics = [
            dict(r._mapping)
            for r in conn.execute(
                sa.select(m.span_id, m.context, m.prefix, m.activity, m.unit, m.value).where(
                    m.cluster_id == cluster_id
                )
            )
        ]
    return spans, metrics
