"""The history of one recurring thing (``/history?kind=span&name=load``, ``daskscope
history span load``): each catalogue figure over time, one point per run, with the
regression check of each figure that has a better direction; and every recurring thing
that regressed (``/regressions``, ``daskscope regressions``).

A run is, per kind: ``span``, one span carrying the tag (the outermost of a tagged
subtree); ``run``, one workflow run of that name; ``cluster``, one cluster of that name.
"""

# ruff: noqa: RUF001 (the typographic minus, times and sigma of the docs)

from __future__ import annotations

import functools
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import urlencode

from daskscope import catalogue
from daskscope.analysis import regression
from daskscope.analysis.cluster import cluster_statistics
from daskscope.analysis.compare import figure_value, tagged_totals
from daskscope.analysis.cost import cost_parts
from daskscope.analysis.span_cost import attributed_cost
from daskscope.format import timestamp_text
from daskscope.pricing import cost_rates
from daskscope.store import Store
from daskscope.store.history import (
    HISTORY_LIMIT,
    cluster_runs,
    recurring_names,
    span_runs,
    workflow_runs,
)

__all__ = [
    "KINDS",
    "STATISTIC",
    "HistoryPoint",
    "HistorySeries",
    "HistoryView",
    "RegressionCheck",
    "RegressionItem",
    "RegressionsView",
    "history_url",
    "history_view",
    "regressions_view",
]

Kind = Literal["span", "run", "cluster"]
KINDS: tuple[Kind, ...] = ("span", "run", "cluster")
_SCOPE: dict[Kind, catalogue.Scope] = {"span": "span", "run": "workflow", "cluster": "cluster"}

#: The rule, in words, as the pages and the CLI state it
STATISTIC = (
    f"a figure regressed when each of the last {regression.RECENT} runs is beyond "
    f"mean ± {regression.K:g}·σ of the up to {regression.BASELINE} runs before them, on "
    f"the worse side (σ at least {regression.NOISE_FLOOR:.0%} of the mean; at least "
    f"{regression.MIN_BASELINE} earlier runs needed)"
)
#: The regression listing looks at names seen in this many days
RECENT_DAYS = 90
#: The newest runs the listing reads of each name: the check needs the last RECENT and
#: BASELINE before them, with room for runs that lack a figure
CHECKED_RUNS = 4 * (regression.BASELINE + regression.RECENT)


@dataclass(frozen=True)
class HistoryPoint:
    """One run: when it started, what it is, its page and its reference for compare."""

    id: str
    at: float | None
    at_text: str
    label: str
    url: str
    reference: str


@dataclass(frozen=True)
class RegressionCheck:
    """A figure's check (:mod:`daskscope.analysis.regression`) with its numbers as
    they read."""

    status: str
    runs: int
    baseline_runs: int
    mean: float | None
    sigma: float | None
    threshold: float | None
    recent: list[float]
    mean_text: str
    sigma_text: str
    threshold_text: str
    recent_text: list[str]
    summary: str


@dataclass(frozen=True)
class HistorySeries:
    """One figure over the runs (None where a run lacks it); ``flagged``, the points
    (indexes into the history's points) of a regression."""

    id: str
    label: str
    unit: str
    better: str | None
    values: list[float | None]
    texts: list[str]
    check: RegressionCheck | None
    flagged: list[int]


@dataclass(frozen=True)
class HistoryView:
    """A recurring thing's runs, oldest first, and each figure over them."""

    kind: str
    name: str
    points: list[HistoryPoint]
    series: list[HistorySeries]
    regressed: list[str]
    statistic: str
    message: str | None


@dataclass(frozen=True)
class RegressionItem:
    """A figure of a recurring thing that regressed."""

    kind: str
    name: str
    figure: str
    label: str
    unit: str
    check: RegressionCheck
    history_url: str


@dataclass(frozen=True)
class RegressionsView:
    """Every recurring thing (seen at least ``min_runs`` times in the last
    ``recent_days``; only those named ``name`` when given) checked; those that
    regressed."""

    checked: int
    min_runs: int
    recent_days: int
    name: str | None
    regressions: list[RegressionItem]
    statistic: str


def history_url(kind: str, name: str) -> str:
    return "/history?" + urlencode({"kind": kind, "name": name})


def _check(figure: catalogue.Figure, values: list[float | None]) -> RegressionCheck | None:
    if figure.better is None:
        return None
    c = regression.check_series(values, figure.better)
    if c.status == "too few runs":
        summary = (
            f"too few runs: {c.baseline_runs} before the last {regression.RECENT}, "
            f"{regression.MIN_BASELINE} needed"
        )
    else:
        side = "above" if figure.better == "lower" else "below"
        recent = ", ".join(figure.text(v) for v in c.recent)
        summary = (
            f"last {len(c.recent)} runs ({recent}) "
            f"{'all ' + side if c.status == 'regressed' else 'not all ' + side} "
            f"{figure.text(c.threshold)} = {figure.text(c.mean)} "
            f"{'+' if figure.better == 'lower' else '−'} {regression.K:g} × "
            f"{figure.text(c.sigma)} (mean and σ of {c.baseline_runs} runs before)"
        )
    return RegressionCheck(
        status=c.status, runs=c.runs, baseline_runs=c.baseline_runs, mean=c.mean,
        sigma=c.sigma, threshold=c.threshold, recent=list(c.recent),
        mean_text=figure.text(c.mean), sigma_text=figure.text(c.sigma),
        threshold_text=figure.text(c.threshold),
        recent_text=[figure.text(v) for v in c.recent], summary=summary,
    )  # fmt: skip


Run = tuple[HistoryPoint, Mapping[str, Any]]


def _runs(store: Store, kind: Kind, name: str, account: str | None, limit: int) -> list[Run]:
    """Each run's point and the row its figures are read from."""
    out: list[Run] = []
    rates = functools.cache(cost_rates)  # one config lookup per account
    if kind == "span":
        for span in span_runs(store, name, account=account, limit=limit):
            row = {**span, "wall_s": tagged_totals([span])["wall_s"]}
            core, memory = span["core_seconds"], span["memory_limit_byte_seconds"]
            cluster_cost = cost_parts(core, memory, rates(span["account"]))
            row["cost"] = attributed_cost(cluster_cost, span["duration_s"], core)
            at = span["started_at"] if span["started_at"] is not None else span["enqueued_at"]
            cid = span["cluster_id"]
            point = HistoryPoint(
                id=f"{cid}/{span['span_id']}", at=at, at_text=timestamp_text(at),
                label=f"{span['cluster_name'] or 'cluster'} {cid[:8]}",
                url=f"/clusters/{cid}", reference=f"{cid}/span:{name}",
            )  # fmt: skip
            out.append((point, row))
    elif kind == "run":
        for run in workflow_runs(store, name, account=account, limit=limit):
            row = {**(run["metrics"] or {}), "wall_time_s": run["wall_time_s"]}
            point = HistoryPoint(
                id=run["id"], at=run["started_at"], at_text=timestamp_text(run["started_at"]),
                label=f"run {run['id'][:8]}", url=f"/runs/{run['id']}",
                reference=f"run:{run['id']}",
            )  # fmt: skip
            out.append((point, row))
    else:
        for cluster in cluster_runs(store, name, account=account, limit=limit):
            row = {**cluster, **cluster_statistics(cluster, cost_rates(cluster["account"]))}
            point = HistoryPoint(
                id=cluster["id"], at=cluster["started_at"],
                at_text=timestamp_text(cluster["started_at"]),
                label=f"cluster {cluster['id'][:8]}", url=f"/clusters/{cluster['id']}",
                reference=cluster["id"],
            )  # fmt: skip
            out.append((point, row))
    return out


def _flagged(values: list[float | None], check: RegressionCheck | None) -> list[int]:
    if check is None or check.status != "regressed":
        return []
    measured = [i for i, v in enumerate(values) if v is not None]
    return measured[-len(check.recent) :]


def history_view(
    store: Store, kind: str, name: str, *, account: str | None = None,
    limit: int = HISTORY_LIMIT,
) -> HistoryView:  # fmt: skip
    """``kind``'s newest ``limit`` runs named ``name``, oldest first, each figure over
    them with its check. ValueError for an unknown kind or an empty name."""
    if kind not in KINDS:
        raise ValueError(f"unknown kind {kind!r}; kinds: {', '.join(KINDS)}")
    if not name:
        raise ValueError("name the span tag, run name or cluster name to follow")
    known: Kind = kind
    runs = _runs(store, known, name, account, limit)
    series = []
    for f in catalogue.figures(_SCOPE[known]):
        if f.unit == "timestamp":
            continue
        values = [figure_value(row, f.key) for _, row in runs]
        if all(v is None for v in values):
            continue
        check = _check(f, values)
        series.append(HistorySeries(
            id=f.id, label=f.label, unit=f.unit, better=f.better, values=values,
            texts=[f.text(v) for v in values], check=check, flagged=_flagged(values, check),
        ))  # fmt: skip
    message = None if runs else f"no {kind} named {name!r} recorded"
    return HistoryView(
        kind=kind, name=name, points=[p for p, _ in runs], series=series,
        regressed=[s.id for s in series if s.check and s.check.status == "regressed"],
        statistic=STATISTIC, message=message,
    )  # fmt: skip


def regressions_view(
    store: Store, *, account: str | None = None, name: str | None = None,
    now: float | None = None,
) -> RegressionsView:  # fmt: skip
    """Every span tag, run name and cluster name seen at least ``MIN_BASELINE + RECENT``
    times in the last :data:`RECENT_DAYS` days (with ``name``, only those of that name),
    checked on their newest :data:`CHECKED_RUNS` runs; the figures that regressed."""
    min_runs = regression.MIN_BASELINE + regression.RECENT
    since = (time.time() if now is None else now) - RECENT_DAYS * 86400
    names = recurring_names(store, min_runs=min_runs, account=account, since=since)
    found: list[RegressionItem] = []
    checked = 0
    for kind in KINDS:
        for recurring in names[kind]:
            if name is not None and recurring != name:
                continue
            name_checked = recurring
            checked += 1
            view = history_view(store, kind, name_checked, account=account, limit=CHECKED_RUNS)
            for s in view.series:
                if s.check is not None and s.check.status == "regressed":
                    found.append(RegressionItem(
                        kind=kind, name=name_checked, figure=s.id, label=s.label,
                        unit=s.unit, check=s.check, history_url=history_url(kind, name_checked),
                    ))  # fmt: skip
    return RegressionsView(
        checked=checked, min_runs=min_runs, recent_days=RECENT_DAYS, name=name,
        regressions=found, statistic=STATISTIC,
    )  # fmt: skip
