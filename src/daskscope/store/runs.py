"""Reading workflow runs back: plain, JSON-serialisable rows, which
:mod:`daskscope.views.run` turns into the view the CLI and the pages show."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from daskscope.store import schema as s
from daskscope.store.engine import Store, as_engine
from daskscope.store.errors import StoreError

__all__ = ["AmbiguousRun", "UnknownRun", "list_runs", "resolve_run_id", "run_detail"]

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


def list_runs(
    store: Store | sa.Engine,
    *,
    limit: int | None = 100,
    cluster_id: str | None = None,
    account: str | None = None,
) -> list[Row]:
    """Workflow runs, newest first (``ix_workflow_runs_started_at``); with ``account``,
    only the runs its members sent or ran on its clusters."""
    c = s.workflow_runs.c
    query = sa.select(s.workflow_runs).order_by(c.started_at.desc(), c.id.desc())
    if cluster_id is not None:
        query = query.where(c.cluster_id == cluster_id)
    if account is not None:
        query = query.where(_of_account(account))
    if limit is not None:
        query = query.limit(limit)
    with as_engine(store).connect() as conn:
        return [dict(r._mapping) for r in conn.execute(query)]


def _of_account(account: str) -> sa.ColumnElement[bool]:
    """Runs an account's members see: those they sent, and those on its clusters."""
    c = s.workflow_runs.c
    clusters = sa.select(s.clusters.c.id).where(s.clusters.c.account == account)
    return sa.or_(c.account == account, c.cluster_id.in_(clusters))


def resolve_run_id(
    store: Store | sa.Engine, id_or_prefix: str, *, account: str | None = None
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


def run_detail(store: Store | sa.Engine, run_id: str) -> Row:
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
