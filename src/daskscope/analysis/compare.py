"""Two recorded things side by side: figures with their difference and ratio, sums by
key (fine-metric activities, task prefixes), task prefixes matched by name, spans
matched by tag, and the code that changed.

Plain rows in, plain dicts out; which figures to compare comes from the catalogue (the
caller passes them in).
"""

# ruff: noqa: RUF002 (the typographic minus, times and sigma of the docs)

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal, Protocol

from daskscope.analysis import regression
from daskscope.analysis.duration import elapsed

__all__ = [
    "COMPUTE_ACTIVITIES",
    "compare_figures",
    "compare_sums",
    "compute_by_prefix",
    "figure_value",
    "match_prefixes",
    "ratio",
    "sum_by",
    "tagged_spans",
    "tagged_totals",
    "verdict",
]

Row = Mapping[str, Any]
Verdict = Literal["better", "worse", "same"] | None


class Figure(Protocol):
    """What a comparison needs of a catalogue figure."""

    @property
    def id(self) -> str: ...
    @property
    def key(self) -> str: ...
    @property
    def unit(self) -> str: ...
    @property
    def better(self) -> str | None: ...


#: The fine-metric activities of a task's own run on its thread, context ``execute``:
#: what Dask's task stream times as ``compute`` (``executor`` and ``other`` are waiting
#: and unattributed time around it, not the task's)
COMPUTE_ACTIVITIES = ("thread-cpu", "thread-noncpu")


def figure_value(row: Row, key: str) -> float | None:
    """The value of a (possibly dotted) figure key in ``row``; None when absent or not
    a number."""
    value: Any = row
    for part in key.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return None
        value = value[part]
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def ratio(a: float | None, b: float | None) -> float | None:
    """``b / a``; None when either is missing or ``a`` is zero."""
    if a is None or b is None or a == 0:
        return None
    return b / a


def verdict(
    a: float | None, b: float | None, better: str | None, *, unit: str | None = None,
    relative_sigma: float | None = None,
) -> Verdict:  # fmt: skip
    """Whether ``b`` is better or worse than ``a`` for a figure whose ``better`` is
    "higher" or "lower"; "same" when the change is within the noise
    (:func:`daskscope.analysis.regression.changed`: the minimum change of the unit,
    25 % of ``a``, and ``K`` times ``relative_sigma`` (the figure's robust σ ÷ median
    over a history of such runs) of ``a``); None without a direction or a value."""
    if better is None or a is None or b is None:
        return None
    noisy = not regression.changed(
        a, b, relative_sigma=relative_sigma, min_abs=regression.min_absolute(unit)
    )
    if noisy:
        return "same"
    up = b > a
    return "better" if up == (better == "higher") else "worse"


def compare_figures(
    figures: Iterable[Figure], a: Row, b: Row, *, noise: Mapping[str, float] | None = None
) -> list[dict[str, Any]]:
    """Each figure measured on either side: ``a``, ``b``, ``difference`` (b − a),
    ``ratio`` (b / a) and ``verdict`` (with ``noise``, the relative σ of a history by
    figure id, where one is known)."""
    out = []
    for f in figures:
        va, vb = figure_value(a, f.key), figure_value(b, f.key)
        if va is None and vb is None:
            continue
        sigma = (noise or {}).get(f.id)
        out.append({
            "figure": f,
            "a": va,
            "b": vb,
            "difference": None if va is None or vb is None else vb - va,
            "ratio": ratio(va, vb),
            "verdict": verdict(va, vb, f.better, unit=f.unit, relative_sigma=sigma),
        })  # fmt: skip
    return out


def sum_by(rows: Iterable[Row], key: str, value: str = "value") -> dict[str, float]:
    """``rows`` summed by ``row[key]``."""
    sums: dict[str, float] = {}
    for row in rows:
        name = str(row[key])
        sums[name] = sums.get(name, 0.0) + float(row[value] or 0.0)
    return sums


def compute_by_prefix(metrics: Iterable[Row]) -> dict[str, float]:
    """Fine metrics (rows of ``context``, ``prefix``, ``activity``, ``value`` in seconds)
    summed by prefix over the :data:`COMPUTE_ACTIVITIES` of context ``execute``: each
    prefix's compute seconds, as Dask's task stream times them."""
    return sum_by(
        (m for m in metrics
         if m.get("context") == "execute" and m["activity"] in COMPUTE_ACTIVITIES),
        "prefix",
    )  # fmt: skip


def compare_sums(a: Mapping[str, float], b: Mapping[str, float]) -> list[dict[str, Any]]:
    """Every key of either side with ``a``, ``b`` (None where a side lacks it),
    ``difference`` and ``ratio``, the largest (of either side) first."""
    keys = sorted(set(a) | set(b), key=lambda k: (-max(a.get(k, 0.0), b.get(k, 0.0)), k))
    out = []
    for k in keys:
        va, vb = a.get(k), b.get(k)
        diff = (vb or 0.0) - (va or 0.0)
        out.append({"key": k, "a": va, "b": vb, "difference": diff, "ratio": ratio(va, vb)})
    return out


_PREFIX_FIELDS = ("tasks_executed", "duration_s", "nbytes_total")


def match_prefixes(a_groups: Iterable[Row], b_groups: Iterable[Row]) -> list[dict[str, Any]]:
    """Task groups (or prefix rows) summed by ``prefix`` (else ``name``) on each side and
    matched by it: ``status`` "both", "added" (only in b) or "removed" (only in a), and
    per side ``tasks_executed``, ``duration_s``, ``nbytes_total`` (None on the side that
    lacks the prefix). Longest task time (of either side) first."""

    def totals(rows: Iterable[Row]) -> dict[str, dict[str, float]]:
        out: dict[str, dict[str, float]] = {}
        for row in rows:
            name = str(row.get("prefix") or row["name"])
            sums = out.setdefault(name, dict.fromkeys(_PREFIX_FIELDS, 0.0))
            for field in _PREFIX_FIELDS:
                sums[field] += float(row.get(field) or 0.0)
        return out

    ta, tb = totals(a_groups), totals(b_groups)

    def longest(name: str) -> tuple[float, str]:
        return (-max(ta.get(name, {}).get("duration_s", 0.0),
                     tb.get(name, {}).get("duration_s", 0.0)), name)  # fmt: skip

    rows = []
    for name in sorted(set(ta) | set(tb), key=longest):
        sa, sb = ta.get(name), tb.get(name)
        status = "both" if sa and sb else "removed" if sa else "added"
        row: dict[str, Any] = {"prefix": name, "status": status}
        for field in _PREFIX_FIELDS:
            row[f"a_{field}"] = sa[field] if sa else None
            row[f"b_{field}"] = sb[field] if sb else None
        row["duration_ratio"] = ratio(row["a_duration_s"], row["b_duration_s"])
        rows.append(row)
    return rows


def tagged_spans(spans: Iterable[Row], tag: str) -> list[Row]:
    """The spans carrying ``tag`` in their ``name`` (a list of tags) whose parent does
    not: the outermost of each tagged subtree, so that summing Dask's subtree figures
    counts each task once (a child span carries its parents' tags)."""
    rows = list(spans)
    tagged = {(r.get("cluster_id"), r["span_id"]) for r in rows if tag in (r.get("name") or ())}
    return [
        r
        for r in rows
        if (r.get("cluster_id"), r["span_id"]) in tagged
        and (r.get("cluster_id"), r.get("parent_span_id")) not in tagged
    ]


_SPAN_SUMS = ("duration_s", "active_cpu_seconds", "nbytes_total", "group_count")


def tagged_totals(spans: Sequence[Row]) -> dict[str, Any]:
    """Figures of ``spans`` taken together (as :func:`tagged_spans` returns them): sums
    of task time, active CPU, bytes and groups; the earliest enqueue and start, the
    latest stop (only when all are done) and ``wall_s`` between them; ``spans``, how
    many; ``code``, their code snippets without repeats."""
    out: dict[str, Any] = {k: sum(float(s.get(k) or 0.0) for s in spans) for k in _SPAN_SUMS}
    out["spans"] = len(spans)
    starts = [s["started_at"] for s in spans if s.get("started_at") is not None]
    stops = [s["stopped_at"] for s in spans if s.get("stopped_at") is not None]
    enqueued = [s["enqueued_at"] for s in spans if s.get("enqueued_at") is not None]
    done = bool(spans) and all(s.get("done") for s in spans) and len(stops) == len(spans)
    out["enqueued_at"] = min(enqueued) if enqueued else None
    out["started_at"] = min(starts) if starts else None
    out["stopped_at"] = max(stops) if done else None
    out["wall_s"] = elapsed(out["started_at"], out["stopped_at"])
    code: list[str] = []
    for s in spans:
        code.extend(c for c in s.get("code") or () if c not in code)
    out["code"] = code
    return out
