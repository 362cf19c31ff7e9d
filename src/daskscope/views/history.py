"""The history of one recurring thing (``/history?kind=span&name=load``, ``daskscope
history span load``): each catalogue figure over time, one point per run, with the
regression check of each figure that has a better direction, and the task time of each
task prefix over the runs, checked too; and every recurring thing that regressed
(``/regressions``, ``daskscope regressions``).

A run is, per kind: ``span``, one span carrying the tag (the outermost of a tagged
subtree; a span Dask merged several of the user's spans into counts once per user span:
:mod:`daskscope.store.history`); ``run``, one workflow run of that name; ``cluster``, one
cluster of that name.
"""

# ruff: noqa: RUF001, RUF002 (the typographic minus, times and sigma of the docs)

from __future__ import annotations

import dataclasses
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
from daskscope.store.history import HISTORY_LIMIT

__all__ = [
    "KINDS",
    "STATISTIC",
    "HistoryPoint",
    "HistorySeries",
    "HistoryView",
    "RegressionCheck",
    "RegressionItem",
    "RegressionsView",
    "history_noise",
    "history_url",
    "history_view",
    "regressions_view",
]

Kind = Literal["span", "run", "cluster"]
KINDS: tuple[Kind, ...] = ("span", "run", "cluster")
_SCOPE: dict[Kind, catalogue.Scope] = {"span": "span", "run": "workflow", "cluster": "cluster"}

#: The rule, in words, as the pages and the CLI state it
STATISTIC = (
    f"a figure (and each task prefix's task time) regressed when each of the last "
    f"{regression.RECENT} runs is further from the median of the up to "
    f"{regression.BASELINE} runs before them, on the worse side, than the largest of "
    f"{regression.K:g}·σ (σ = {regression.MAD_SCALE}·MAD, their median absolute "
    f"deviation), {regression.MIN_CHANGE * 100:g} % of the median and, for times, "
    f"{regression.MIN_ABSOLUTE['seconds'] * 1000:g} ms (at least "
    f"{regression.MIN_BASELINE} earlier runs needed)"
)
#: The task prefixes a history shows (those with the longest task time in any run; a
#: prefix that regressed is shown too): every prefix is checked
PREFIX_SERIES = 12
#: The prefix figure whose unit, formula and direction a prefix's series takes
PREFIX_FIGURE = "prefix.duration_s"
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
    they read: the baseline's ``median`` and robust ``sigma``, the ``margin`` a run must
    exceed (``max(K·σ, MIN_CHANGE·|median|, the unit's minimum)``), the ``threshold``
    it makes on the worse side, the ``recent`` runs and their robust ``z`` (None when
    σ is 0)."""

    status: str
    runs: int
    baseline_runs: int
    median: float | None
    sigma: float | None
    margin: float | None
    threshold: float | None
    recent: list[float]
    z: list[float | None]
    median_text: str
    sigma_text: str
    margin_text: str
    threshold_text: str
    recent_text: list[str]
    summary: str


@dataclass(frozen=True)
class HistorySeries:
    """One figure over the runs (None where a run lacks it); ``flagged``, the points
    (indexes into the history's points) of a regression; ``prefix``, the task prefix
    of a prefix's task time (``id`` ``prefix.duration_s:NAME``), else None."""

    id: str
    prefix: str | None
    label: str
    unit: str
    better: str | None
    values: list[float | None]
    texts: list[str]
    check: RegressionCheck | None
    flagged: list[int]


@dataclass(frozen=True)
class HistoryView:
    """A recurring thing's runs, oldest first, and each figure over them: the catalogue
    figures of its scope, then the task time of its task prefixes (the
    :data:`PREFIX_SERIES` longest, and any that regressed, of ``prefixes_checked``)."""

    kind: str
    name: str
    points: list[HistoryPoint]
    series: list[HistorySeries]
    regressed: list[str]
    prefixes_checked: int
    statistic: str
    message: str | None
    #: what is left out: the runs recorded (a span tag's outermost spans), the page's
    #: size and how many of the newest it skips (``offset``), the runs older than those
    #: shown and newer (``older_runs`` 0: the oldest are shown)
    total_runs: int
    limit: int
    offset: int
    older_runs: int
    newer_runs: int


@dataclass(frozen=True)
class RegressionItem:
    """A figure of a recurring thing that regressed (``prefix``: the task prefix whose
    task time regressed, else None)."""

    kind: str
    name: str
    figure: str
    prefix: str | None
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
    floor = regression.min_absolute(figure.unit)
    c = regression.check_series(values, figure.better, min_abs=floor)
    if c.status == "too few runs":
        summary = (
            f"too few runs: {c.baseline_runs} before the last {regression.RECENT}, "
            f"{regression.MIN_BASELINE} needed"
        )
    else:
        side = "above" if figure.better == "lower" else "below"
        recent = ", ".join(figure.text(v) for v in c.recent)
        parts = [
            f"{regression.K:g} × σ {figure.text(c.sigma)}",
            f"{regression.MIN_CHANGE * 100:g} % of the median",
        ]
        if floor:
            parts.append(figure.text(floor))
        summary = (
            f"last {len(c.recent)} runs ({recent}) "
            f"{'all ' + side if c.status == 'regressed' else 'not all ' + side} "
            f"{figure.text(c.threshold)} = median {figure.text(c.median)} "
            f"{'+' if figure.better == 'lower' else '−'} {figure.text(c.margin)} "
            f"(the largest of {', '.join(parts)}; the median, and σ = "
            f"{regression.MAD_SCALE} × MAD, of the {c.baseline_runs} runs before)"
        )
    return RegressionCheck(
        status=c.status, runs=c.runs, baseline_runs=c.baseline_runs, median=c.median,
        sigma=c.sigma, margin=c.margin, threshold=c.threshold, recent=list(c.recent),
        z=list(c.z), median_text=figure.text(c.median), sigma_text=figure.text(c.sigma),
        margin_text=figure.text(c.margin), threshold_text=figure.text(c.threshold),
        recent_text=[figure.text(v) for v in c.recent], summary=summary,
    )  # fmt: skip


#: A run: its point, the row its figures are read from, its task time by prefix
Run = tuple[HistoryPoint, Mapping[str, Any], Mapping[str, float]]


def _runs(
    store: Store, kind: Kind, name: str, account: str | None, limit: int, offset: int = 0
) -> list[Run]:
    """Each run's point, the row its figures are read from and its task time by
    prefix (the newest ``limit`` after the ``offset`` newest)."""
    out: list[Run] = []
    rates = functools.cache(cost_rates)  # one config lookup per account
    if kind == "span":
        for span in store.span_runs(name, account=account, limit=limit, offset=offset):
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
            out.append((point, row, span["prefixes"]))
    elif kind == "run":
        for run in store.workflow_runs(name, account=account, limit=limit, offset=offset):
            row = {**(run["metrics"] or {}), "wall_time_s": run["wall_time_s"]}
            point = HistoryPoint(
                id=run["id"], at=run["started_at"], at_text=timestamp_text(run["started_at"]),
                label=f"run {run['id'][:8]}", url=f"/runs/{run['id']}",
                reference=f"run:{run['id']}",
            )  # fmt: skip
            out.append((point, row, run["prefixes"]))
    else:
        for cluster in store.cluster_runs(name, account=account, limit=limit, offset=offset):
            row = {**cluster, **cluster_statistics(cluster, cost_rates(cluster["account"]))}
            point = HistoryPoint(
                id=cluster["id"], at=cluster["started_at"],
                at_text=timestamp_text(cluster["started_at"]),
                label=f"cluster {cluster['id'][:8]}", url=f"/clusters/{cluster['id']}",
                reference=cluster["id"],
            )  # fmt: skip
            out.append((point, row, cluster["prefixes"]))
    return out


def _flagged(values: list[float | None], check: RegressionCheck | None) -> list[int]:
    if check is None or check.status != "regressed":
        return []
    measured = [i for i, v in enumerate(values) if v is not None]
    return measured[-len(check.recent) :]


def history_view(
    store: Store, kind: str, name: str, *, account: str | None = None,
    limit: int = HISTORY_LIMIT, offset: int = 0,
) -> HistoryView:  # fmt: skip
    """``kind``'s newest ``limit`` runs named ``name`` after the ``offset`` newest (a
    page back), oldest first, each figure over them with its check, and how many runs
    are left out either side. ValueError for an unknown kind or an empty name."""
    return _history(store, kind, name, account=account, limit=limit, offset=offset)


def _history(
    store: Store, kind: str, name: str, *, account: str | None, limit: int, offset: int = 0,
    texts: bool = True,
) -> HistoryView:  # fmt: skip
    """:func:`history_view`; with ``texts=False`` its series carry no texts of their
    values (``texts`` empty) and ``total_runs`` counts the runs read: what the regression
    listing and the noise read (the values and checks), without formatting every value
    of every series or counting every run recorded."""
    if kind not in KINDS:
        raise ValueError(f"unknown kind {kind!r}; kinds: {', '.join(KINDS)}")
    if not name:
        raise ValueError("name the span tag, run name or cluster name to follow")
    known: Kind = kind
    runs = _runs(store, known, name, account, limit, offset)
    total = store.run_count(known, name, account=account) if texts else len(runs)
    series = []
    for f in catalogue.figures(_SCOPE[known]):
        if f.unit == "timestamp":
            continue
        values = [figure_value(row, f.key) for _, row, _ in runs]
        if all(v is None for v in values):
            continue
        series.append(_series(f, values, texts=texts))
    # every prefix is checked; only those shown are written out
    prefixes = _prefix_series(runs)
    message = None if runs else f"no {kind} named {name!r} recorded"
    if not runs and total:
        message = f"no {kind} named {name!r} this far back: {total:,} runs recorded"
    shown = [*series, *(_with_texts(s) if texts else s for s in _shown(prefixes))]
    return HistoryView(
        kind=kind, name=name, points=[p for p, _, _ in runs], series=shown,
        regressed=[s.id for s in shown if s.check and s.check.status == "regressed"],
        prefixes_checked=len(prefixes), statistic=STATISTIC, message=message,
        total_runs=total, limit=limit, offset=offset,
        older_runs=max(0, total - offset - limit), newer_runs=min(offset, total),
    )  # fmt: skip


def _series(
    f: catalogue.Figure, values: list[float | None], *, prefix: str | None = None,
    texts: bool = True,
) -> HistorySeries:  # fmt: skip
    check = _check(f, values)
    return HistorySeries(
        id=f.id if prefix is None else f"{f.id}:{prefix}", prefix=prefix,
        label=f.label if prefix is None else f"{f.label} of {prefix}", unit=f.unit,
        better=f.better, values=values, texts=[f.text(v) for v in values] if texts else [],
        check=check, flagged=_flagged(values, check),
    )  # fmt: skip


def _prefix_series(runs: list[Run]) -> list[HistorySeries]:
    """Each task prefix's task time over the runs (None in a run without it), the
    longest (in any run) first, each checked as :data:`PREFIX_FIGURE`; without texts
    (:func:`_with_texts` gives those of the series shown)."""
    f = catalogue.figure(PREFIX_FIGURE)
    longest: dict[str, float] = {}
    for _, _, prefixes in runs:
        for prefix, seconds in prefixes.items():
            longest[prefix] = max(longest.get(prefix, 0.0), seconds)
    order = sorted(longest, key=lambda p: (-longest[p], p))
    return [_series(f, [r[2].get(p) for r in runs], prefix=p, texts=False) for p in order]


def _with_texts(series: HistorySeries) -> HistorySeries:
    """A prefix's series (:func:`_prefix_series`) with the texts of its values."""
    f = catalogue.figure(PREFIX_FIGURE)
    return dataclasses.replace(series, texts=[f.text(v) for v in series.values])


def _shown(prefixes: list[HistorySeries]) -> list[HistorySeries]:
    """The :data:`PREFIX_SERIES` longest prefixes and every one that regressed."""
    return [
        s for i, s in enumerate(prefixes)
        if i < PREFIX_SERIES or (s.check is not None and s.check.status == "regressed")
    ]  # fmt: skip


def history_noise(
    store: Store, kind: str, name: str, *, account: str | None = None
) -> tuple[dict[str, float], int]:
    """The run-to-run noise of ``kind`` ``name``: per series id (figures and prefixes'
    task time), robust σ ÷ |median| over its newest ``BASELINE + RECENT`` runs, where
    at least ``MIN_BASELINE`` runs have the figure and the median is not 0; and how
    many runs were read (0, and no noise, with fewer than ``MIN_BASELINE``). What
    ``compare`` widens its "same" by."""
    runs = regression.BASELINE + regression.RECENT
    view = _history(store, kind, name, account=account, limit=runs, texts=False)
    noise: dict[str, float] = {}
    if len(view.points) < regression.MIN_BASELINE:
        return noise, 0
    for s in view.series:
        measured = [v for v in s.values if v is not None]
        if len(measured) < regression.MIN_BASELINE:
            continue
        median, sigma = regression.robust_spread(measured)
        if median:
            noise[s.id] = sigma / abs(median)
    return noise, len(view.points)


def regressions_view(
    store: Store, *, account: str | None = None, name: str | None = None,
    now: float | None = None,
) -> RegressionsView:  # fmt: skip
    """Every span tag, run name and cluster name seen at least ``MIN_BASELINE + RECENT``
    times in the last :data:`RECENT_DAYS` days (with ``name``, only those of that name),
    checked on their newest :data:`CHECKED_RUNS` runs; the figures that regressed."""
    min_runs = regression.MIN_BASELINE + regression.RECENT
    since = (time.time() if now is None else now) - RECENT_DAYS * 86400
    names = store.recurring_names(min_runs=min_runs, account=account, since=since)
    found: list[RegressionItem] = []
    checked = 0
    for kind in KINDS:
        for recurring in names[kind]:
            if name is not None and recurring != name:
                continue
            name_checked = recurring
            checked += 1
            view = _history(
                store, kind, name_checked, account=account, limit=CHECKED_RUNS, texts=False
            )
            for s in view.series:
                if s.check is not None and s.check.status == "regressed":
                    found.append(RegressionItem(
                        kind=kind, name=name_checked, figure=s.id, prefix=s.prefix,
                        label=s.label, unit=s.unit, check=s.check,
                        history_url=history_url(kind, name_checked),
                    ))  # fmt: skip
    return RegressionsView(
        checked=checked, min_runs=min_runs, recent_days=RECENT_DAYS, name=name,
        regressions=found, statistic=STATISTIC,
    )  # fmt: skip
