"""Alerts in the store (issue 30): the conditions a rule watches, read from what is
recorded, and the ``alerts`` table, which is both the deduplication state (one open
alert per rule and condition until it clears) and the outbox of notifications (a
restarted server delivers what is still pending).

Every change is one short transaction; a notification is claimed before it is sent
(``claimed_until``), so that two server processes never send the same one at once.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from daskscope.model import stable_id
from daskscope.store.analytics import RUNNING_WITHIN
from daskscope.store.database import IMMEDIATE, Database
from daskscope.store.schema import (
    alert_rules,
    alerts,
    clusters,
    task_groups,
    task_segments,
    worker_samples,
)

__all__ = [
    "Condition",
    "alert_history",
    "claim_due",
    "clear_others",
    "delete_rule",
    "failed_clusters",
    "fire",
    "idle_clusters",
    "put_rule",
    "record_attempt",
    "stored_rules",
]


@dataclass(frozen=True, slots=True)
class Condition:
    """One thing a rule found to hold: ``key`` names it among the rule's conditions."""

    key: str
    summary: str
    detail: dict[str, Any]


def failed_clusters(store: Database, account: str, since: float) -> list[Condition]:
    """Clusters of ``account`` started since ``since`` with a task that failed."""
    c = clusters.c
    query = (
        sa.select(c.id, c.name, c.tasks_erred, c.started_at)
        .where(c.account == account, c.tasks_erred > 0, c.started_at >= since)
        .order_by(c.started_at)
    )
    with store.engine.connect() as conn:
        rows = conn.execute(query).all()
    return [
        Condition(
            key=f"cluster:{r.id}",
            summary=f"cluster {r.name} ({r.id[:8]}): {r.tasks_erred:,} tasks failed",
            detail={"cluster_id": r.id, "cluster": r.name, "tasks_erred": int(r.tasks_erred)},
        )
        for r in rows
    ]


def idle_clusters(store: Database, account: str, idle_for: float, now: float) -> list[Condition]:
    """Running clusters of ``account`` that hold workers (a worker sampled within
    :data:`RUNNING_WITHIN`) and ran no task for ``idle_for`` seconds: their last task
    ended (task log or task groups), or they started, that long ago."""
    c, g, t, w = clusters.c, task_groups.c, task_segments.c, worker_samples.c
    running = sa.select(c.id, c.name, c.started_at).where(
        c.account == account, c.stopped_at.is_(None), c.last_seen_at >= now - RUNNING_WITHIN
    )
    found = []
    with store.engine.connect() as conn:
        for cid, name, started in conn.execute(running).all():
            workers = conn.execute(
                sa.select(sa.func.count(sa.distinct(w.worker))).where(
                    w.cluster_id == cid, w.sampled_at >= now - RUNNING_WITHIN
                )
            ).scalar_one()
            if not workers:
                continue
            last_group = conn.execute(
                sa.select(sa.func.max(g.stopped_at)).where(g.cluster_id == cid)
            ).scalar()
            last_task = conn.execute(
                sa.select(sa.func.max(t.last_stop)).where(t.cluster_id == cid)
            ).scalar()
            last = max(x for x in (started, last_group, last_task) if x is not None)
            if now - last >= idle_for:
                found.append(
                    Condition(
                        key=f"cluster:{cid}",
                        summary=f"cluster {name} ({cid[:8]}) idle for "
                        f"{(now - last) / 60:.0f} min holding {workers} workers",
                        detail={
                            "cluster_id": cid,
                            "cluster": name,
                            "workers": int(workers),
                            "idle_since": last,
                        },
                    )
                )
    return found


def fire(
    store: Database,
    *,
    rule: str,
    account: str,
    kind: str,
    condition: Condition,
    webhook: str,
    body_format: str,
    now: float,
) -> bool:
    """Open an alert for ``condition`` unless one is open for it already; True when
    opened (its notification then waits in the outbox)."""
    row = {
        "id": stable_id("alert", rule, condition.key, now),
        "rule": rule,
        "account": account,
        "kind": kind,
        "condition": condition.key,
        "summary": condition.summary,
        "detail": condition.detail,
        "fired_at": now,
        "cleared_at": None,
        "webhook": webhook,
        "body_format": body_format,
        "delivery": "pending",
        "attempts": 0,
        "next_attempt_at": now,
        "claimed_until": None,
        "delivered_at": None,
        "last_error": None,
    }
    a = alerts.c
    with store.engine.connect() as conn, conn.execution_options(**{IMMEDIATE: True}).begin():
        held = conn.execute(
            sa.select(a.id).where(
                a.rule == rule, a.condition == condition.key, a.cleared_at.is_(None)
            )
        ).first()
        if held is not None:
            return False
        try:
            with conn.begin_nested():
                conn.execute(alerts.insert().values(**row))
        except sa.exc.IntegrityError:  # another server process opened it first
            return False
    return True


def clear_others(store: Database, rule: str, holding: Iterable[str], now: float) -> int:
    """Clear the rule's open alerts whose condition no longer holds; returns how many."""
    a = alerts.c
    query = alerts.update().where(a.rule == rule, a.cleared_at.is_(None))
    keys = list(holding)
    if keys:
        query = query.where(a.condition.not_in(keys))
    with store.engine.begin() as conn:
        return int(conn.execute(query.values(cleared_at=now)).rowcount or 0)


def claim_due(store: Database, now: float, *, hold: float, limit: int = 50) -> list[dict[str, Any]]:
    """Pending notifications due by ``now``, each claimed for ``hold`` seconds by this
    process (one another process has claimed is left to it until its claim lapses)."""
    a = alerts.c
    due = (
        sa.select(alerts)
        .where(
            a.delivery == "pending",
            a.next_attempt_at <= now,
            sa.or_(a.claimed_until.is_(None), a.claimed_until < now),
        )
        .order_by(a.next_attempt_at)
        .limit(limit)
    )
    claimed = []
    with store.engine.connect() as conn, conn.execution_options(**{IMMEDIATE: True}).begin():
        for row in conn.execute(due).mappings().all():
            taken = conn.execute(
                alerts.update()
                .where(
                    a.id == row["id"],
                    a.delivery == "pending",
                    sa.or_(a.claimed_until.is_(None), a.claimed_until < now),
                )
                .values(claimed_until=now + hold)
            ).rowcount
            if taken:
                claimed.append(dict(row))
    return claimed


def record_attempt(
    store: Database,
    alert_id: str,
    *,
    now: float,
    error: str | None,
    retry_at: float | None,
) -> None:
    """One delivery attempt's outcome: delivered (``error`` None), to be tried again at
    ``retry_at``, or given up (``retry_at`` None)."""
    a = alerts.c
    if error is None:
        values: dict[str, Any] = {"delivery": "delivered", "delivered_at": now, "last_error": None}
    elif retry_at is not None:
        values = {"next_attempt_at": retry_at, "last_error": error}
    else:
        values = {"delivery": "failed", "last_error": error}
    with store.engine.begin() as conn:
        conn.execute(
            alerts.update()
            .where(a.id == alert_id)
            .values(attempts=a.attempts + 1, claimed_until=None, **values)
        )


def alert_history(
    store: Database, *, accounts: Sequence[str] | None = None, limit: int = 200
) -> list[dict[str, Any]]:
    """Alerts, newest first; of ``accounts`` only when given."""
    a = alerts.c
    query = sa.select(alerts).order_by(a.fired_at.desc(), a.id).limit(limit)
    if accounts is not None:
        query = query.where(a.account.in_(list(accounts)))
    with store.engine.connect() as conn:
        return [dict(r) for r in conn.execute(query).mappings().all()]


def stored_rules(store: Database) -> list[dict[str, Any]]:
    """The rules admins set: ``{"name", "account", "rule", "updated_by", "updated_at"}``."""
    r = alert_rules.c
    with store.engine.connect() as conn:
        rows = conn.execute(sa.select(alert_rules).order_by(r.name)).mappings().all()
    return [dict(row) for row in rows]


def put_rule(
    store: Database, *, name: str, account: str, rule: dict[str, Any], by: str | None, now: float
) -> bool:
    """Create or replace the rule ``name`` of ``account``; False when the name is
    another account's rule (nothing changed)."""
    r = alert_rules.c
    with store.engine.connect() as conn, conn.execution_options(**{IMMEDIATE: True}).begin():
        owner = conn.execute(sa.select(r.account).where(r.name == name)).scalar()
        if owner is not None and owner != account:
            return False
        values = {"account": account, "rule": rule, "updated_by": by, "updated_at": now}
        if owner is None:
            conn.execute(alert_rules.insert().values(name=name, **values))
        else:
            conn.execute(alert_rules.update().where(r.name == name).values(**values))
    return True


def delete_rule(store: Database, *, name: str, account: str | None) -> bool:
    """Delete the rule ``name`` (of ``account`` only, when given); True when deleted."""
    r = alert_rules.c
    query = alert_rules.delete().where(r.name == name)
    if account is not None:
        query = query.where(r.account == account)
    with store.engine.begin() as conn:
        return bool(conn.execute(query).rowcount)
