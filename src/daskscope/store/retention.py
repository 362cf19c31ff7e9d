"""Retention of the task log: how long each account keeps its clusters' task executions,
and ``prune``, which removes what is past it.

The task log (``task_segments``) is the table that grows: every execution of every task.
An account keeps it for the days its policy says (its own row in ``retention_policies``,
set by an admin of the account, else the ``retention.task-log-days`` setting; None: for
ever), counted from the cluster's end (``stopped_at``, or ``last_seen_at`` for a cluster
that never said it stopped). A cluster's task log goes whole or not at all, so a timeline
is never half there; the cluster is then marked in ``task_log_prunes`` and its timeline
says when and by which policy. Aggregates (clusters, computations, task groups and
prefixes, spans, metrics, costs) are never touched.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass

import sqlalchemy as sa

from daskscope import config
from daskscope.store.database import IMMEDIATE, Database
from daskscope.store.errors import StoreError, short_reason
from daskscope.store.partitions import Partition, ensure_partitions, is_partitioned, partitions
from daskscope.store.schema import (
    accounts,
    clusters,
    retention_policies,
    task_log_prunes,
    task_segments,
    users,
)

__all__ = [
    "AccountPrune",
    "ExpiredCluster",
    "PruneReport",
    "PrunedTaskLog",
    "RetentionError",
    "account_policies",
    "clear_task_log_days",
    "cluster_end",
    "expired_clusters",
    "policies",
    "prune_task_log",
    "pruned_task_log",
    "set_task_log_days",
    "task_log_days",
]

DAY_S = 86400.0
#: The moment a cluster ended, as the policy counts it
cluster_end = sa.func.coalesce(clusters.c.stopped_at, clusters.c.last_seen_at)
#: Bytes of a segment row's binary columns: what its removal frees, near enough (the
#: payload is almost all of a row; the group names and fixed columns are left out)
_segment_bytes = (
    sa.func.length(task_segments.c.payload)
    + sa.func.length(task_segments.c.summary)
    + sa.func.length(task_segments.c.key_filter)
)


class RetentionError(StoreError):
    """A policy that cannot be set: bad days, or a user who is no admin of the account."""


@dataclass(frozen=True, slots=True)
class PrunedTaskLog:
    """A cluster whose task log was pruned: when, under which policy, and how much."""

    cluster_id: str
    pruned_at: float
    task_log_days: float
    segments: int
    executions: int
    bytes: int


@dataclass(frozen=True, slots=True)
class ExpiredCluster:
    """A cluster whose task log is past its account's policy, and what it holds."""

    cluster_id: str
    account: str
    ended_at: float
    task_log_days: float
    segments: int
    executions: int
    bytes: int


@dataclass(slots=True)
class AccountPrune:
    """What pruning removes (or, in a dry run, would remove) of one account."""

    account: str
    task_log_days: float
    clusters: int = 0
    segments: int = 0
    executions: int = 0
    bytes: int = 0


def _configured_days() -> float | None:
    value = config.get("retention.task-log-days")
    if value is None:
        return None
    return _valid_days(value, "the setting retention.task-log-days")


def _valid_days(value: object, what: str) -> float:
    try:
        days = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        days = float("nan")
    if not days > 0 or days == float("inf"):
        raise RetentionError(
            f"{what} must be a positive number of days (or null: keep for ever), got {value!r}"
        )
    return days


def policies(conn: sa.Connection) -> dict[str, float | None]:
    """Each account's own policy (days, None: for ever), as stored."""
    rows = conn.execute(sa.select(retention_policies.c.account, retention_policies.c.task_log_days))
    return {account: days for account, days in rows}


def task_log_days(store: Database, account: str) -> float | None:
    """The days ``account`` keeps its task log: its own policy, else the setting."""
    with store.engine.connect() as conn:
        own = policies(conn)
    return own.get(account, _configured_days())


def account_policies(store: Database) -> list[tuple[str, float | None, bool]]:
    """Every account (named, or holding clusters) with the days it keeps its task log
    (None: for ever) and whether that is its own policy (else the setting), by name."""
    with store.engine.connect() as conn:
        own = policies(conn)
        names = set(conn.execute(sa.select(accounts.c.name)).scalars())
        names |= set(conn.execute(sa.select(clusters.c.account).distinct()).scalars())
    default = _configured_days()
    return [(n, own.get(n, default), n in own) for n in sorted(names | set(own))]


def set_task_log_days(store: Database, account: str, days: float | None, *, by: str | None) -> None:
    """Set ``account``'s own policy (None: keep for ever). ``by`` is the member who sets
    it, who must be an admin of the account; None is the server's operator (the
    command line, which holds the database itself)."""
    if days is not None:
        days = _valid_days(days, "task-log days")
    with store.engine.begin() as conn:
        if by is not None:
            admin = conn.execute(
                sa.select(users.c.is_admin).where(users.c.name == by, users.c.account == account)
            ).scalar()
            if not admin:
                raise RetentionError(
                    f"{by!r} is not an admin of account {account!r}: only an account's "
                    "admins (daskscope user add NAME --account A --admin) set its retention"
                )
        conn.execute(retention_policies.delete().where(retention_policies.c.account == account))
        conn.execute(
            retention_policies.insert().values(
                account=account, task_log_days=days, set_by=by or "operator", set_at=time.time()
            )
        )


def clear_task_log_days(store: Database, account: str) -> None:
    """Remove ``account``'s own policy: it follows the setting again."""
    with store.engine.begin() as conn:
        conn.execute(retention_policies.delete().where(retention_policies.c.account == account))


def _accounts_policies(conn: sa.Connection, account: str | None) -> dict[str, float]:
    """The accounts with clusters (or only ``account``) whose task log expires, and the
    days each keeps it; accounts that keep it for ever are left out."""
    own = policies(conn)
    default = _configured_days()
    if account is not None:
        names: Iterable[str] = [account]
    else:
        names = conn.execute(sa.select(clusters.c.account).distinct()).scalars()
    out = {}
    for name in names:
        days = own.get(name, default)
        if days is not None:
            out[name] = days
    return out


def _expired_query(account: str, cutoff: float) -> sa.Select[str, float, int, int, int]:
    return (
        sa.select(
            clusters.c.id,
            cluster_end,
            sa.func.count(),
            sa.func.coalesce(sa.func.sum(task_segments.c.executions), 0),
            sa.func.coalesce(sa.func.sum(_segment_bytes), 0),
        )
        .join(task_segments, task_segments.c.cluster_id == clusters.c.id)
        .where(clusters.c.account == account, cluster_end < cutoff)
        .group_by(clusters.c.id, cluster_end)
        .order_by(cluster_end, clusters.c.id)
    )


def expired_clusters(
    store: Database, *, account: str | None = None, now: float | None = None
) -> list[ExpiredCluster]:
    """The clusters with a task log past their account's policy, oldest end first."""
    now = time.time() if now is None else now
    out = []
    with store.engine.connect() as conn:
        for name, days in sorted(_accounts_policies(conn, account).items()):
            for cluster_id, ended, segments, executions, size in conn.execute(
                _expired_query(name, now - days * DAY_S)
            ):
                out.append(
                    ExpiredCluster(
                        cluster_id, name, ended, days, int(segments), int(executions), int(size)
                    )
                )
    return out


@dataclass(frozen=True, slots=True)
class PruneReport:
    """What a prune removed (or, in a dry run, would remove): per account, and the
    month partitions of the task log dropped whole (PostgreSQL)."""

    accounts: list[AccountPrune]
    partitions: list[str]


def prune_task_log(
    store: Database, *, account: str | None = None, dry_run: bool = False, now: float | None = None
) -> PruneReport:
    """Remove the task log of every cluster past its account's policy (only
    ``account``'s with one). On PostgreSQL a month partition whose rows all belong to
    such clusters is dropped whole first; the rest goes row by row, one transaction a
    cluster, so that an interrupted prune leaves every cluster either whole or pruned
    and marked. ``dry_run``: remove nothing, say what would go."""
    now = time.time() if now is None else now
    plan = {c.cluster_id: c for c in expired_clusters(store, account=account, now=now)}
    report: dict[str, AccountPrune] = {}
    seen: set[str] = set()

    def tally(expired: ExpiredCluster, segments: int, executions: int, size: int) -> None:
        one = report.setdefault(
            expired.account, AccountPrune(expired.account, expired.task_log_days)
        )
        one.clusters += expired.cluster_id not in seen
        seen.add(expired.cluster_id)
        one.segments += segments
        one.executions += executions
        one.bytes += size

    with store.engine.begin() as conn:
        if not dry_run:
            ensure_partitions(conn, now)
        droppable = _droppable_partitions(conn, plan, now)
    if dry_run:
        for expired in plan.values():
            tally(expired, expired.segments, expired.executions, expired.bytes)
        return PruneReport(list(report.values()), [p.name for p in droppable])
    dropped = []
    for part in droppable:
        removed = _drop_partition(store, part, plan, now)
        if removed is not None:
            dropped.append(part.name)
            for cluster_id, totals in removed.items():
                tally(plan[cluster_id], *totals)
    for expired in plan.values():
        try:
            rows = _prune_cluster(store, expired, now)
        except sa.exc.DBAPIError as exc:
            done = sum(r.clusters for r in report.values())
            raise RetentionError(
                f"pruning the task log of cluster {expired.cluster_id} failed "
                f"({short_reason(exc)}); it is untouched, and the clusters pruned before it "
                f"({done}) are pruned and marked; run daskscope prune again"
            ) from exc
        if rows is not None:
            tally(expired, *rows)
    return PruneReport(list(report.values()), dropped)


def _droppable_partitions(
    conn: sa.Connection, plan: dict[str, ExpiredCluster], now: float
) -> list[Partition]:
    """The month partitions, of months over, that hold rows of expired clusters only."""
    if not plan or not is_partitioned(conn):
        return []
    out = []
    for part in partitions(conn):
        if part.stop > now:
            continue
        held = set(
            conn.exec_driver_sql(f"SELECT DISTINCT cluster_id FROM {part.qualified}").scalars()
        )
        if held and held <= plan.keys():
            out.append(part)
    return out


def _drop_partition(
    store: Database, part: Partition, plan: dict[str, ExpiredCluster], now: float
) -> dict[str, tuple[int, int, int]] | None:
    """Drop ``part`` and mark its clusters, in one transaction; None (nothing done)
    when it now holds a row of a cluster not in the plan."""
    with store.engine.begin() as conn:
        # no row may arrive while it is counted and dropped
        conn.exec_driver_sql(f"LOCK TABLE {part.qualified} IN ACCESS EXCLUSIVE MODE")
        counted = conn.exec_driver_sql(
            "SELECT cluster_id, count(*), coalesce(sum(executions), 0), "
            "coalesce(sum(length(payload) + length(summary) + length(key_filter)), 0) "
            f"FROM {part.qualified} GROUP BY cluster_id"
        ).all()
        removed = {row[0]: (int(row[1]), int(row[2]), int(row[3])) for row in counted}
        if not removed.keys() <= plan.keys():
            return None
        for cluster_id, totals in removed.items():
            _mark(conn, cluster_id, plan[cluster_id].task_log_days, now, totals)
        conn.exec_driver_sql(f"DROP TABLE {part.qualified}")
    return removed


def _prune_cluster(
    store: Database, expired: ExpiredCluster, now: float
) -> tuple[int, int, int] | None:
    cutoff = now - expired.task_log_days * DAY_S
    with store.engine.connect() as conn:
        conn = conn.execution_options(**{IMMEDIATE: True})
        with conn.begin():
            # counted again in the transaction: segments may have arrived since the plan
            counted = conn.execute(
                _expired_query(expired.account, cutoff).where(clusters.c.id == expired.cluster_id)
            ).first()
            if counted is None:
                return None  # pruned meanwhile, or no longer past the policy
            totals = (int(counted[2]), int(counted[3]), int(counted[4]))
            conn.execute(
                task_segments.delete().where(task_segments.c.cluster_id == expired.cluster_id)
            )
            _mark(conn, expired.cluster_id, expired.task_log_days, now, totals)
    return totals


def _mark(
    conn: sa.Connection,
    cluster_id: str,
    days: float,
    now: float,
    totals: tuple[int, int, int],
) -> None:
    """Mark the cluster pruned, adding ``totals`` (segments, executions, bytes) to what
    was removed of it before (a partition, or late segments of a cluster pruned before)."""
    before = conn.execute(
        sa.select(
            task_log_prunes.c.segments, task_log_prunes.c.executions, task_log_prunes.c.bytes
        ).where(task_log_prunes.c.cluster_id == cluster_id)
    ).first()
    values = dict(pruned_at=now, task_log_days=days)
    if before is None:
        conn.execute(
            task_log_prunes.insert().values(
                cluster_id=cluster_id,
                segments=totals[0],
                executions=totals[1],
                bytes=totals[2],
                **values,
            )
        )
        return
    conn.execute(
        task_log_prunes.update()
        .where(task_log_prunes.c.cluster_id == cluster_id)
        .values(
            segments=before[0] + totals[0],
            executions=before[1] + totals[1],
            bytes=before[2] + totals[2],
            **values,
        )
    )


def pruned_task_log(store: Database, cluster_id: str) -> PrunedTaskLog | None:
    """The cluster's prune mark (None: its task log was never pruned)."""
    with store.engine.connect() as conn:
        row = conn.execute(
            sa.select(task_log_prunes).where(task_log_prunes.c.cluster_id == cluster_id)
        ).first()
    if row is None:
        return None
    return PrunedTaskLog(
        row.cluster_id,
        row.pruned_at,
        row.task_log_days,
        int(row.segments),
        int(row.executions),
        int(row.bytes),
    )
