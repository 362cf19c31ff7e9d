"""Reading workflow runs back: plain, JSON-serialisable rows, which
:mod:`daskscope.views.run` turns into the view the CLI and the pages show."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import sqlalchemy as sa

from daskscope.store import schema as s
from daskscope.store.database import Database, as_engine
from daskscope.store.errors import StoreError

__all__ = [
    "SORTS",
    "STATUSES",
    "AmbiguousRun",
    "RunFilter",
    "UnknownRun",
    "count_runs",
    "list_runs",
    "resolve_run_id",
    "run_detail",
    "run_users",
]

MIN_PREFIX = 4
_MAX_CANDIDATES = 10

Row = dict[str, Any]


class UnknownRun(StoreError, LookupError):
    """No workflow run has this id, or this id prefix (which needs ``min_prefix``
    characters)."""

    def __init__(self, run_id: str, *, min_prefix: int | None = None) -> None:
        short = min_prefix is not None and len(run_id) < min_prefix
        super().__init__(
            f"no workflow run with id {run_id!r}"
            + (f" (a prefix needs at least {min_prefix} characters)" if short else "")
        )
        self.run_id = run_id
        self.min_prefix = min_prefix

    def data(self) -> dict[str, Any]:
        return {"run_id": self.run_id}


class AmbiguousRun(StoreError, LookupError):
    """An id prefix matches more than one run; ``candidates`` lists the first of them."""

    #: ids named in the message (``candidates`` may hold one more: "and others")
    SHOWN = _MAX_CANDIDATES

    def __init__(self, prefix: str, candidates: list[str]) -> None:
        shown = ", ".join(candidates[: self.SHOWN]) + (
            ", ..." if len(candidates) > self.SHOWN else ""
        )
        super().__init__(f"{prefix!r} matches several workflow runs ({shown})")
        self.prefix = prefix
        self.candidates = list(candidates)

    def data(self) -> dict[str, Any]:
        return {"prefix": self.prefix, "matches": self.candidates[: self.SHOWN]}


#: How the listing can be ordered: a name for each sortable column
SORTS: dict[str, str] = {
    "started": "started_at",
    "name": "name",
    "user": "user",
    "backend": "backend",
    "status": "status",
    "wall": "wall_time_s",
    "chunks": "chunk_count",
}
STATUSES = ("ok", "failed")


@dataclass(frozen=True)
class RunFilter:
    """Which runs a listing holds: ``q`` a case-insensitive part of the name, the user or
    the start of the id; ``user`` exactly; ``status`` "ok" or "failed"; started in
    ``[since, until)`` (epoch seconds); ``cluster_id`` and ``account`` scope it."""

    q: str | None = None
    user: str | None = None
    status: str | None = None
    since: float | None = None
    until: float | None = None
    cluster_id: str | None = None
    account: str | None = None

    def where(self) -> sa.ColumnElement[bool]:
        c = s.workflow_runs.c
        clauses: list[sa.ColumnElement[bool]] = []
        if self.q:
            text = self.q.strip().lower()
            clauses.append(
                sa.or_(
                    sa.func.lower(c.name).contains(text, autoescape=True),
                    sa.func.lower(c.user).contains(text, autoescape=True),
                    c.id.startswith(self.q.strip(), autoescape=True),
                )
            )
        if self.user:
            clauses.append(c.user == self.user)
        if self.status:
            clauses.append(_status() == self.status)
        if self.since is not None:
            clauses.append(c.started_at >= self.since)
        if self.until is not None:
            clauses.append(c.started_at < self.until)
        if self.cluster_id is not None:
            clauses.append(c.cluster_id == self.cluster_id)
        if self.account is not None:
            clauses.append(_of_account(self.account))
        return sa.and_(sa.true(), *clauses)


def _status() -> sa.ColumnElement[str]:
    # a run is "failed" when its info says so (an exception left the collector's block)
    return sa.func.coalesce(s.workflow_runs.c["info"]["status"].as_string(), "ok")


def list_runs(
    store: Database | sa.Engine,
    *,
    limit: int | None = 100,
    cluster_id: str | None = None,
    account: str | None = None,
    where: RunFilter | None = None,
    sort: str = "started",
    descending: bool = True,
    offset: int = 0,
) -> list[Row]:
    """Workflow runs, newest first unless ``sort`` names another column (:data:`SORTS`;
    ties by start then id, so pages do not overlap); with ``account``, only the runs its
    members sent or ran on its clusters."""
    c = s.workflow_runs.c
    chosen = where or RunFilter()
    if cluster_id is not None:
        chosen = replace(chosen, cluster_id=cluster_id)
    if account is not None:
        chosen = replace(chosen, account=account)
    column = _status() if sort == "status" else c[SORTS[sort]]
    keys = [column, c.started_at, c.id] if sort != "started" else [c.started_at, c.id]
    order = [k.desc() if descending else k.asc() for k in keys]
    query = sa.select(s.workflow_runs).where(chosen.where()).order_by(*order).offset(offset)
    if limit is not None:
        query = query.limit(limit)
    with as_engine(store).connect() as conn:
        return [dict(r._mapping) for r in conn.execute(query)]


def count_runs(store: Database | sa.Engine, where: RunFilter) -> int:
    """How many runs ``where`` holds (the listing's ``total``)."""
    query = sa.select(sa.func.count()).select_from(s.workflow_runs).where(where.where())
    with as_engine(store).connect() as conn:
        return int(conn.execute(query).scalar_one())


def run_users(store: Database | sa.Engine, where: RunFilter, recent: int = 2_000) -> list[str]:
    """The users of the newest ``recent`` runs in ``where``'s scope, by name (a filter's
    suggestions: read through the start-time index, not a scan of every run)."""
    c = s.workflow_runs.c
    newest = (
        sa.select(c.user.label("user")).where(where.where())
        .order_by(c.started_at.desc()).limit(recent).subquery()
    )  # fmt: skip
    query = (
        sa.select(newest.c.user).where(newest.c.user.is_not(None))
        .group_by(newest.c.user).order_by(newest.c.user)
    )  # fmt: skip
    with as_engine(store).connect() as conn:
        return [str(u) for u in conn.execute(query).scalars()]


def _of_account(account: str) -> sa.ColumnElement[bool]:
    """Runs an account's members see: those they sent, and those on its clusters."""
    c = s.workflow_runs.c
    clusters = sa.select(s.clusters.c.id).where(s.clusters.c.account == account)
    return sa.or_(c.account == account, c.cluster_id.in_(clusters))


def resolve_run_id(
    store: Database | sa.Engine, id_or_prefix: str, *, account: str | None = None
) -> str:
    """The full id of the run named by an exact id or a unique prefix of at least
    :data:`MIN_PREFIX` characters; with ``account``, only that account's runs exist for
    this lookup. Raises :class:`UnknownRun` or :class:`AmbiguousRun`."""
    c = s.workflow_runs.c
    text = id_or_prefix.strip()
    scope = _of_account(account) if account is not None else sa.true()
    with as_engine(store).connect() as conn:
        if conn.execute(sa.select(c.id).where(c.id == text, scope)).first():
            return text
        if len(text) < MIN_PREFIX:
            raise UnknownRun(text, min_prefix=MIN_PREFIX)
        found = list(
            conn.execute(
                sa.select(c.id)
                .where(c.id.startswith(text, autoescape=True), scope)
                .order_by(c.id)
                .limit(_MAX_CANDIDATES + 1)
            ).scalars()
        )
    if not found:
        raise UnknownRun(text, min_prefix=MIN_PREFIX)
    if len(found) > 1:
        raise AmbiguousRun(text, found)
    return str(found[0])


def run_detail(store: Database | sa.Engine, run_id: str) -> Row:
    """One run with its chunks (in chunk order)."""
    r, ch = s.workflow_runs.c, s.workflow_chunks.c
    with as_engine(store).connect() as conn:
        run = conn.execute(sa.select(s.workflow_runs).where(r.id == run_id)).first()
        if run is None:
            raise UnknownRun(run_id)
        chunks = [
            dict(row._mapping)
            for row in conn.execute(
                sa.select(s.workflow_chunks).where(ch.run_id == run_id).order_by(ch.chunk_index)
            )
        ]
    return {"run": dict(run._mapping), "chunks": chunks}
