"""What spans and computations cost (``/costs``, ``/api/v1/costs``, ``daskscope costs``):
the cost of a span tag in a time range per member and per tag, and one cluster's cost
split over its root spans and its computations with the idle remainder
(``/api/v1/clusters/ID/costs``). Attribution: :mod:`daskscope.analysis.span_cost`."""

# ruff: noqa: RUF001 (the typographic times and division signs of the formula)

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from daskscope.analysis.cost import RatesOf, cost_parts
from daskscope.analysis.span_cost import attributed_cost, idle_cost
from daskscope.format import duration_text, money_text, percent_text, timestamp_text
from daskscope.pricing import cost_rates
from daskscope.store import Store
from daskscope.views.run import time_bound

__all__ = [
    "FORMULA",
    "ClusterCostsView",
    "CostRow",
    "CostTotal",
    "CostsView",
    "PartCost",
    "cluster_costs_view",
    "computation_costs",
    "costs_view",
]

By = Literal["member", "tag"]

#: The attribution, in words, as the page and the CLI state it
FORMULA = (
    "a span costs its cluster's cost × (the span subtree's task time ÷ the cluster's core "
    "time); a computation the same with its task groups' task time; what no task used is "
    "the cluster's idle cost, not attributed"
)


@dataclass(frozen=True)
class CostRow:
    """The spans of one member or one tag, in one currency."""

    name: str
    currency: str | None
    spans: int
    clusters: int
    task_seconds: float
    task_text: str
    #: None: none of these spans' clusters has a price
    cost: float | None
    cost_text: str


@dataclass(frozen=True)
class CostTotal:
    currency: str
    cost: float
    cost_text: str


@dataclass(frozen=True)
class CostsView:
    """The cost of the outermost spans of ``tag`` (None: every tag) enqueued in
    ``[since, until)``, per member and per tag, largest first. Without a tag, the
    members' rows and the totals count root spans only (each task once); the tags'
    rows overlap where tags nest."""

    tag: str | None
    since: float | None
    until: float | None
    since_text: str
    until_text: str
    formula: str
    members: list[CostRow]
    tags: list[CostRow]
    totals: list[CostTotal]
    #: the spans the totals count: the tag's outermost (without a tag: the root spans)
    spans: int
    #: of the spans the totals count, those whose account has no price (not costed)
    unpriced_spans: int
    message: str | None


@dataclass(frozen=True)
class PartCost:
    """A root span or a computation of one cluster, or the idle remainder."""

    id: str
    label: str
    task_seconds: float | None
    share: float | None
    share_text: str
    cost: float | None
    cost_text: str


@dataclass(frozen=True)
class ClusterCostsView:
    """One cluster's cost split over its root spans and, separately, its computations;
    each split's idle remainder makes it add up to the cluster's cost."""

    cluster_id: str
    currency: str | None
    core_seconds: float
    cost: float | None
    cost_text: str
    formula: str
    spans: list[PartCost]
    spans_idle: PartCost
    computations: list[PartCost]
    computations_idle: PartCost


def _rows(sums: Iterable[Mapping[str, Any]], rates: RatesOf) -> list[CostRow]:
    """One row per name and currency from the store's sums per name and account, each
    account's attributed capacity priced at its rates (``cost_parts``)."""
    merged: dict[tuple[str, str | None], dict[str, Any]] = {}
    for r in sums:
        cost = cost_parts(r["core_seconds"] or 0.0, r["memory_byte_seconds"] or 0.0,
                          rates(r["account"]))  # fmt: skip
        currency = None if cost is None else str(cost["currency"])
        entry = merged.setdefault(
            (str(r["key"]), currency), {"spans": 0, "clusters": 0, "seconds": 0.0, "cost": 0.0}
        )
        entry["spans"] += int(r["spans"])
        entry["clusters"] += int(r["clusters"])  # a cluster is of one account
        entry["seconds"] += float(r["task_seconds"] or 0.0)
        if cost is not None:
            entry["cost"] += float(cost["total"])
    out = [
        CostRow(
            name=name, currency=currency, spans=e["spans"], clusters=e["clusters"],
            task_seconds=e["seconds"], task_text=duration_text(e["seconds"]),
            cost=None if currency is None else e["cost"],
            cost_text=money_text(e["cost"], currency) if currency is not None else MISSING_COST,
        )
        for (name, currency), e in merged.items()
    ]  # fmt: skip
    out.sort(key=lambda r: (r.cost is None, -(r.cost or 0.0), -r.task_seconds, r.name))
    return out


def _cluster_cost(row: Mapping[str, Any], rates: RatesOf) -> dict[str, Any] | None:
    return cost_parts(
        float(row.get("core_seconds") or 0.0),
        float(row.get("memory_limit_byte_seconds") or 0.0),
        rates(row["account"]),
    )


def costs_view(
    store: Store,
    *,
    tag: str | None = None,
    since: str | None = None,
    until: str | None = None,
    account: str | None = None,
    rates: RatesOf = cost_rates,
) -> CostsView:
    """The cost of ``tag``'s spans (None or "": every tag) from day or time ``since`` to
    ``until`` (ISO 8601, UTC; a day ``until`` includes that day). ValueError for a time
    that does not parse or a range that ends before it starts."""
    start, end = time_bound(since), time_bound(until, end=True)
    if start is not None and end is not None and end <= start:
        raise ValueError(f"until ({until}) must be after since ({since})")
    priced = functools.cache(rates)  # one config lookup per account

    def sums(by: Literal["user", "tag"], roots_only: bool = False) -> list[dict[str, Any]]:
        return store.span_cost_sums(by, tag or None, since=start, until=end, account=account,
            roots_only=roots_only,
        )  # fmt: skip

    # Without a tag, members' costs and the total count root spans only: tags nest, and
    # a child span's cost is in its parent's already
    members, tags = _rows(sums("user", roots_only=not tag), priced), _rows(sums("tag"), priced)
    totals: dict[str, float] = {}
    for r in members:
        if r.currency is not None and r.cost is not None:
            totals[r.currency] = totals.get(r.currency, 0.0) + r.cost
    spans = sum(r.spans for r in members)
    what = f"span tag {tag!r}" if tag else "span"
    return CostsView(
        tag=tag or None, since=start, until=end,
        since_text=timestamp_text(start) if start is not None else "the first",
        until_text=timestamp_text(end) if end is not None else "now",
        formula=FORMULA, members=members, tags=tags,
        totals=[CostTotal(c, v, money_text(v, c)) for c, v in sorted(totals.items())],
        spans=spans, unpriced_spans=sum(r.spans for r in members if r.cost is None),
        message=None if spans else f"no {what} recorded in this time range",
    )  # fmt: skip


def _part(id: str, label: str, seconds: float | None, cost: Mapping[str, Any] | None) -> PartCost:
    share = None if cost is None else float(cost["share"])
    return PartCost(
        id=id, label=label, task_seconds=seconds, share=share, share_text=percent_text(share),
        cost=None if cost is None else float(cost["total"]),
        cost_text=MISSING_COST if cost is None else money_text(cost["total"], cost["currency"]),
    )  # fmt: skip


def computation_costs(
    store: Store, cluster: Mapping[str, Any], *, rates: RatesOf = cost_rates
) -> dict[str, dict[str, Any]]:
    """Per computation of the ``cluster`` row: ``{"task_seconds", "cost"}``, its groups'
    summed task time and its attributed cost (None: the cluster has no price)."""
    cost = _cluster_cost(cluster, rates)
    core = float(cluster.get("core_seconds") or 0.0)
    return {
        cid: {"task_seconds": seconds, "cost": attributed_cost(cost, seconds, core)}
        for cid, seconds in store.computation_task_seconds(cluster["id"]).items()
    }


#: What a part's cost reads when its cluster has no price
MISSING_COST = "no price"


def cluster_costs_view(
    store: Store, cluster_id: str, *, rates: RatesOf = cost_rates
) -> ClusterCostsView:
    """The cost of the cluster with this full id split over its root spans and over its
    computations (:class:`~daskscope.store.UnknownCluster` if none)."""
    cluster = store.cluster_row(cluster_id)
    core = float(cluster["core_seconds"] or 0.0)
    cost = _cluster_cost(cluster, rates)

    def split(parts: list[tuple[str, str, float]]) -> tuple[list[PartCost], PartCost]:
        rows = [_part(i, label, s, attributed_cost(cost, s, core)) for i, label, s in parts]
        rows.sort(key=lambda p: (-(p.task_seconds or 0.0), p.label))
        busy = sum(s for _, _, s in parts)
        idle = _part("idle", "idle (not attributed)", None, idle_cost(cost, busy, core))
        return rows, idle

    spans, spans_idle = split(
        [(r["span_id"], " / ".join(map(str, r["name"])), float(r["duration_s"] or 0.0))
         for r in store.root_spans(cluster_id)]
    )  # fmt: skip
    computations, computations_idle = split(
        [(cid, f"computation {cid[:8]}", s)
         for cid, s in store.computation_task_seconds(cluster_id).items()]
    )  # fmt: skip
    return ClusterCostsView(
        cluster_id=cluster_id, currency=None if cost is None else cost["currency"],
        core_seconds=core, cost=None if cost is None else float(cost["total"]),
        cost_text=MISSING_COST if cost is None else money_text(cost["total"], cost["currency"]),
        formula=FORMULA, spans=spans, spans_idle=spans_idle,
        computations=computations, computations_idle=computations_idle,
    )  # fmt: skip
