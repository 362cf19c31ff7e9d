"""Two recorded things side by side (``/compare?a=…&b=…``, ``daskscope compare A B``).

(Over 400 lines: the reference syntax, the four kinds of side and their figure, sum and
prefix rows, one view whose row dataclasses are most of the lines.)

A side is named by a reference whose form says its kind:

- ``CLUSTER``: a cluster (its id or a unique start of it);
- ``CLUSTER/COMPUTATION``: one computation of that cluster (id or a unique start);
- ``CLUSTER/span:TAG``: every span of that cluster carrying the tag ``TAG`` (Dask's
  ``span("TAG")``), taken together;
- ``run:RUN``: a workflow run (id or a unique start).

Both sides must be of the same kind. Every catalogue figure of the kind's scope is shown
with its difference (b − a), ratio (b ÷ a) and, where the catalogue says which way is
better, whether b is better or worse, or the same within the noise
(:func:`daskscope.analysis.compare.verdict`: the floors of the regression check, widened
by the run-to-run noise of the history when both sides are runs of one recurring thing).
"""

# ruff: noqa: RUF001, RUF002 (the typographic minus, times and sigma of the docs)

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from daskscope import catalogue
from daskscope.analysis import regression
from daskscope.analysis.cluster import cluster_statistics
from daskscope.analysis.compare import (
    compare_figures,
    compare_sums,
    compute_by_prefix,
    match_prefixes,
    sum_by,
    tagged_totals,
    verdict,
)
from daskscope.format import MISSING, value_text
from daskscope.pricing import cost_rates
from daskscope.store import Store
from daskscope.views.history import PREFIX_FIGURE, history_noise

__all__ = [
    "REFERENCE_SYNTAX",
    "BadReference",
    "CompareView",
    "FigureRow",
    "PrefixRow",
    "Reference",
    "Side",
    "SumRow",
    "compare_view",
    "parse_reference",
]

Kind = Literal["cluster", "computation", "span", "run"]

REFERENCE_SYNTAX = (
    "CLUSTER, CLUSTER/COMPUTATION, CLUSTER/span:TAG or run:RUN (ids or unique starts of them)"
)

# The scope of the catalogue each kind's figures come from
_SCOPE: dict[Kind, catalogue.Scope] = {
    "cluster": "cluster", "computation": "computation", "span": "span", "run": "workflow",
}  # fmt: skip
# Cluster-wide figures shown for every kind: the workers and memory it ran on
_CLUSTER_FIGURES = ("workers_peak", "threads_peak", "memory_limit_peak", "core_seconds")


class BadReference(ValueError):
    """A side that is not written in :data:`REFERENCE_SYNTAX`, or two of unlike kinds."""


@dataclass(frozen=True)
class Reference:
    """A parsed side: ``kind`` and the parts its form names."""

    text: str
    kind: Kind
    cluster: str | None = None
    part: str | None = None  # the computation or the tag
    run: str | None = None


def parse_reference(text: str) -> Reference:
    """``text`` read as :data:`REFERENCE_SYNTAX`; :class:`BadReference` otherwise."""
    ref = text.strip()
    if not ref:
        raise BadReference(f"a side is empty; write {REFERENCE_SYNTAX}")
    if ref.startswith("run:"):
        run = ref[4:].strip()
        if not run:
            raise BadReference(f"{text!r} names no run; write run:RUN")
        return Reference(ref, "run", run=run)
    cluster, slash, rest = ref.partition("/")
    if not slash:
        return Reference(ref, "cluster", cluster=cluster)
    if not cluster or not rest:
        raise BadReference(f"{text!r} is not {REFERENCE_SYNTAX}")
    if rest.startswith("span:"):
        tag = rest[5:]
        if not tag:
            raise BadReference(f"{text!r} names no tag; write CLUSTER/span:TAG")
        return Reference(ref, "span", cluster=cluster, part=tag)
    return Reference(ref, "computation", cluster=cluster, part=rest)


@dataclass(frozen=True)
class Side:
    """One side as resolved: what it is, where it ran, and its page."""

    reference: str
    kind: Kind
    title: str
    cluster_id: str | None
    cluster_name: str | None
    started_at: float | None
    url: str


@dataclass(frozen=True)
class FigureRow:
    """A catalogue figure on both sides; ``verdict`` is b against a ("better", "worse",
    "same"; None without a direction)."""

    id: str
    label: str
    unit: str
    better: str | None
    a: float | None
    b: float | None
    a_text: str
    b_text: str
    difference: float | None
    difference_text: str
    ratio: float | None
    ratio_text: str
    verdict: str | None


@dataclass(frozen=True)
class SumRow:
    """Seconds of one activity (or task prefix) on both sides; ``verdict`` as a
    figure's for a task prefix's compute seconds (lower is better), None for an
    activity."""

    key: str
    a: float | None
    b: float | None
    a_text: str
    b_text: str
    difference_text: str
    ratio: float | None
    ratio_text: str
    verdict: str | None


@dataclass(frozen=True)
class PrefixRow:
    """Task groups of one prefix on both sides; ``status`` "both", "added" (only in b)
    or "removed" (only in a)."""

    prefix: str
    status: str
    a_tasks: float | None
    b_tasks: float | None
    a_seconds: float | None
    b_seconds: float | None
    a_bytes: float | None
    b_bytes: float | None
    seconds_ratio: float | None
    ratio_text: str
    verdict: str | None


@dataclass(frozen=True)
class CompareView:
    """Two things of one kind side by side: catalogue figures, fine metrics by activity
    and each task prefix's compute seconds (``thread-cpu`` + ``thread-noncpu``), task
    groups matched by prefix, the clusters' workers and memory, and a unified diff of
    their code (empty: the same code). ``same`` says when a change reads "same" (within
    the noise); ``noise_runs``, how many runs of a recurring thing both sides belong to
    widened it (0: none)."""

    kind: str
    a: Side
    b: Side
    same: str
    noise_runs: int
    figures: list[FigureRow]
    activities: list[SumRow]
    activities_source: str
    prefixes: list[SumRow]
    task_prefixes: list[PrefixRow]
    added_prefixes: list[str]
    removed_prefixes: list[str]
    cluster: list[FigureRow]
    code_diff: list[str]
    code_note: str | None


def ratio_text(ratio: float | None) -> str:
    """``×2.00``: b in units of a."""
    if ratio is None:
        return MISSING
    return f"×{ratio:,.2f}" if abs(ratio) < 1000 else f"×{ratio:,.0f}"


def difference_text(value: float | None, unit: str) -> str:
    """A signed difference in the figure's unit (``+1.20 s``, ``−3``)."""
    if value is None:
        return MISSING
    if value == 0:
        return value_text(0.0, unit)
    sign = "+" if value > 0 else "\u2212"
    return sign + value_text(abs(value), unit)


def code_diff(a_code: Sequence[str], b_code: Sequence[str]) -> list[str]:
    """A unified diff (lines without their newlines) from a's code snippets to b's;
    empty when they are the same."""
    a_lines = "\n".join(a_code).splitlines()
    b_lines = "\n".join(b_code).splitlines()
    return list(difflib.unified_diff(a_lines, b_lines, "a", "b", lineterm=""))


def _figure_rows(figures: Sequence[catalogue.Figure], a: Mapping[str, Any],
                 b: Mapping[str, Any], noise: Mapping[str, float]) -> list[FigureRow]:  # fmt: skip
    rows = []
    for c in compare_figures(figures, a, b, noise=noise):
        f: catalogue.Figure = c["figure"]
        diff_unit = "seconds" if f.unit == "timestamp" else f.unit
        rows.append(FigureRow(
            id=f.id, label=f.label, unit=f.unit, better=f.better, a=c["a"], b=c["b"],
            a_text=f.text(c["a"]), b_text=f.text(c["b"]), difference=c["difference"],
            difference_text=difference_text(c["difference"], diff_unit),
            ratio=None if f.unit == "timestamp" else c["ratio"],
            ratio_text=MISSING if f.unit == "timestamp" else ratio_text(c["ratio"]),
            verdict=c["verdict"],
        ))  # fmt: skip
    return rows


def _prefix_verdict(
    prefix: str, a: float | None, b: float | None, noise: Mapping[str, float]
) -> str | None:
    """A task prefix's seconds judged as its task time is (lower is better)."""
    f = catalogue.figure(PREFIX_FIGURE)
    sigma = noise.get(f"{f.id}:{prefix}")
    return verdict(a, b, f.better, unit=f.unit, relative_sigma=sigma)


def _sum_rows(
    a: Mapping[str, float], b: Mapping[str, float], noise: Mapping[str, float] | None = None
) -> list[SumRow]:
    """Rows by key; with ``noise``, the keys are task prefixes and get a verdict."""
    return [
        SumRow(
            key=r["key"],
            a=r["a"],
            b=r["b"],
            a_text=value_text(r["a"], "seconds"),
            b_text=value_text(r["b"], "seconds"),
            difference_text=difference_text(r["difference"], "seconds"),
            ratio=r["ratio"],
            ratio_text=ratio_text(r["ratio"]),
            verdict=None if noise is None else _prefix_verdict(r["key"], r["a"], r["b"], noise),
        )
        for r in compare_sums(a, b)
    ]


def _activities(side: Mapping[str, Any]) -> dict[str, float]:
    """Seconds by activity: Dask's fine metrics, else (a computation) its groups'
    durations by action."""
    if side["metrics"] is not None:
        return sum_by(side["metrics"], "activity")
    sums: dict[str, float] = {}
    for g in side["groups"]:
        for action, seconds in (g.get("durations") or {}).items():
            sums[action] = sums.get(action, 0.0) + float(seconds)
    return sums


def _same_rule(recurring: tuple[str, str] | None, runs: int) -> str:
    """When a change reads "same", in words."""
    rule = (
        f"a change reads “same” when |B − A| is at most the largest of "
        f"{regression.MIN_CHANGE * 100:g} % of A, "
        f"{regression.MIN_ABSOLUTE['seconds'] * 1000:g} ms for times"
    )
    if recurring is None or not runs:
        return rule + " (no history shared by both sides to widen it)"
    kind, name = recurring
    return (
        f"{rule} and {regression.K:g} × the run-to-run σ (1.4826 × MAD ÷ median, of A) "
        f"of the last {runs} runs of {kind} “{name}”"
    )


def _resolve(store: Store, ref: Reference, account: str | None) -> tuple[Side, dict[str, Any]]:
    """The side's data (as :mod:`daskscope.store.compare` reads it, with ``row``, the
    figures' row, and ``recurring``, the history kind and name it is a run of, if any)
    and how it is described."""
    if ref.kind == "run":
        run_id = store.resolve_run_id(ref.run or "", account=account)
        data = store.run_side(run_id)
        run = data["row"]
        data["row"] = {**(run["metrics"] or {}), "wall_time_s": run["wall_time_s"]}
        data["recurring"] = ("run", run["name"]) if run["name"] else None
        title, url, started = (
            f"run {run['name']} ({run_id[:8]})",
            f"/runs/{run_id}",
            run["started_at"],
        )
    else:
        cluster_id = store.resolve_cluster_id(ref.cluster or "", account=account)
        if ref.kind == "cluster":
            data = store.cluster_side(cluster_id)
            rates = cost_rates(data["cluster"]["account"])
            data["row"] = {**data["cluster"], **cluster_statistics(data["cluster"], rates)}
            name = data["cluster"]["name"]
            data["recurring"] = ("cluster", name) if name else None
            title, url = f"cluster {cluster_id[:8]}", f"/clusters/{cluster_id}"
        elif ref.kind == "computation":
            data = store.computation_side(cluster_id, ref.part or "")
            comp = data["row"]
            duration = (
                None if comp["stopped_at"] is None else comp["stopped_at"] - comp["started_at"]
            )
            data["row"] = {**comp, "duration_s": duration}
            data["recurring"] = None
            title = f"computation {comp['id'][:8]} of cluster {cluster_id[:8]}"
            url = f"/clusters/{cluster_id}/computations/{comp['id']}"
        else:
            data = store.span_side(cluster_id, ref.part or "")
            totals = tagged_totals(data["spans"])
            data["row"], data["code"] = totals, totals["code"]
            data["recurring"] = ("span", ref.part or "")
            count = totals["spans"]
            title = (
                f"span {ref.part!r} of cluster {cluster_id[:8]} ({count} span{'s' * (count != 1)})"
            )
            url = f"/clusters/{cluster_id}"
        started = data["row"].get("started_at")
    cluster = data["cluster"]
    side = Side(
        reference=ref.text, kind=ref.kind, title=title,
        cluster_id=cluster["id"] if cluster else None,
        cluster_name=cluster["name"] if cluster else None,
        started_at=started, url=url,
    )  # fmt: skip
    return side, data


def compare_view(store: Store, a: str, b: str, *, account: str | None = None) -> CompareView:
    """``a`` and ``b`` (:data:`REFERENCE_SYNTAX`) side by side; with ``account``, only
    that account's things exist. :class:`BadReference` for a malformed side or unlike
    kinds; the store's errors for an unknown one."""
    ra, rb = parse_reference(a), parse_reference(b)
    if ra.kind != rb.kind:
        raise BadReference(
            f"{a!r} is a {ra.kind} and {b!r} a {rb.kind}: compare two of one kind "
            f"({REFERENCE_SYNTAX})"
        )
    side_a, da = _resolve(store, ra, account)
    side_b, db = _resolve(store, rb, account)
    noise: dict[str, float] = {}
    runs = 0
    recurring = da["recurring"] if da["recurring"] == db["recurring"] else None
    if recurring is not None:
        noise, runs = history_noise(store, *recurring, account=account)
    scope = _SCOPE[ra.kind]
    figures = [f for f in catalogue.figures(scope) if f.unit != "timestamp"]
    prefixes = match_prefixes(da["groups"], db["groups"])
    has_metrics = da["metrics"] is not None and db["metrics"] is not None
    cluster_figures = [catalogue.figure("cluster", k) for k in _CLUSTER_FIGURES]
    diff = code_diff(da["code"], db["code"])
    note = None
    if not da["code"] and not db["code"]:
        note = "no code recorded on either side"
    elif not diff:
        note = "the same code on both sides"
    return CompareView(
        kind=ra.kind, a=side_a, b=side_b, same=_same_rule(recurring, runs), noise_runs=runs,
        figures=_figure_rows(figures, da["row"], db["row"], noise),
        activities=_sum_rows(_activities(da), _activities(db)),
        activities_source="fine metrics (seconds)" if has_metrics
        else "task groups' durations by action",
        prefixes=_sum_rows(compute_by_prefix(da["metrics"] or []),
                           compute_by_prefix(db["metrics"] or []), noise) if has_metrics else [],
        task_prefixes=[
            PrefixRow(
                prefix=p["prefix"], status=p["status"],
                a_tasks=p["a_tasks_executed"], b_tasks=p["b_tasks_executed"],
                a_seconds=p["a_duration_s"], b_seconds=p["b_duration_s"],
                a_bytes=p["a_nbytes_total"], b_bytes=p["b_nbytes_total"],
                seconds_ratio=p["duration_ratio"], ratio_text=ratio_text(p["duration_ratio"]),
                verdict=_prefix_verdict(p["prefix"], p["a_duration_s"], p["b_duration_s"], noise),
            )
            for p in prefixes
        ],
        added_prefixes=[p["prefix"] for p in prefixes if p["status"] == "added"],
        removed_prefixes=[p["prefix"] for p in prefixes if p["status"] == "removed"],
        cluster=_figure_rows(cluster_figures, da["cluster"] or {}, db["cluster"] or {}, {}),
        code_diff=diff,
        code_note=note,
    )  # fmt: skip
