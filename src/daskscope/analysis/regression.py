"""Regression flags: has a figure of a recurring thing (a span tag, a workflow run name,
a cluster name) moved beyond its own run-to-run noise? And the same noise tolerance for
two things side by side (:func:`changed`, what ``compare`` calls "same").

The noise model (``docs/metrics.md``, "Regressions"), robust statistics because a shared
machine's stalls are outliers, not a spread: of a figure's values in run order, take the
last :data:`RECENT` runs and the up to :data:`BASELINE` runs before them. With ``m`` the
median of that baseline and ``σ = 1.4826 · MAD`` (its median absolute deviation scaled to
a normal distribution's standard deviation), a run is beyond the noise when it is further
than ``margin = max(K·σ, MIN_CHANGE·|m|, min_abs)`` from ``m`` on the worse side; the
figure regressed when every one of the recent runs is. It needs at least
:data:`MIN_BASELINE` baseline runs. One noisy run never flags, as all recent runs must
agree (the change must repeat); a stall in the baseline barely moves the median and the
MAD, where it would have widened a mean ± standard deviation; the minimum relative
change keeps a quiet history from flagging a shift the machine's load alone can make,
and ``min_abs`` (:data:`MIN_ABSOLUTE`, per unit) one below what a busy machine measures
reliably.
"""

# ruff: noqa: RUF002 (the typographic minus, times and sigma of the docs)

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from typing import Literal, NamedTuple

__all__ = [
    "BASELINE",
    "MAD_SCALE",
    "MIN_ABSOLUTE",
    "MIN_BASELINE",
    "MIN_CHANGE",
    "RECENT",
    "Check",
    "K",
    "changed",
    "check_series",
    "margin",
    "min_absolute",
    "robust_spread",
]

#: How many robust standard deviations a recent run must be beyond the baseline's median
K = 3.0
#: The latest runs that must all be beyond the threshold
RECENT = 3
#: At most this many runs before the recent ones form the baseline
BASELINE = 10
#: Fewer baseline runs than this: no verdict
MIN_BASELINE = 5
#: A change smaller than this fraction of the baseline's median (of A, in a comparison)
#: is noise, however quiet the history: a busy shared machine moves times this much
MIN_CHANGE = 0.25
#: The MAD times this estimates a normal distribution's standard deviation
MAD_SCALE = 1.4826
#: A change smaller than this, per unit, is noise: seconds below a tenth of a second are
#: scheduler ticks, thread wake-ups and stalls on a busy machine
MIN_ABSOLUTE: Mapping[str, float] = {"seconds": 0.1}

Status = Literal["regressed", "ok", "too few runs"]
Better = Literal["higher", "lower"]


def min_absolute(unit: str | None) -> float:
    """The smallest change of a figure in ``unit`` that is not noise (0: any)."""
    return MIN_ABSOLUTE.get(unit or "", 0.0)


def robust_spread(values: Sequence[float]) -> tuple[float, float]:
    """``(median, 1.4826 · MAD)`` of ``values`` (at least one)."""
    middle = statistics.median(values)
    return middle, MAD_SCALE * statistics.median(abs(v - middle) for v in values)


def margin(
    median: float, sigma: float, *, k: float = K, min_change: float = MIN_CHANGE,
    min_abs: float = 0.0,
) -> float:  # fmt: skip
    """How far from ``median`` a value must be to be beyond the noise:
    ``max(k·sigma, min_change·|median|, min_abs)``."""
    return max(k * sigma, min_change * abs(median), min_abs)


class Check(NamedTuple):
    """The verdict on one figure's series: ``threshold`` is ``median ± margin`` on the
    worse side; ``recent`` the values tested against it and ``z`` their robust z-scores
    (``(v − median) / sigma`` towards the worse side; None when sigma is 0);
    ``baseline_runs`` how many runs the median and sigma came from."""

    status: Status
    better: Better
    runs: int
    baseline_runs: int
    recent: tuple[float, ...]
    median: float | None
    sigma: float | None
    margin: float | None
    threshold: float | None
    z: tuple[float | None, ...]


def check_series(
    values: Sequence[float | None],
    better: Better,
    *,
    k: float = K,
    recent: int = RECENT,
    baseline: int = BASELINE,
    min_baseline: int = MIN_BASELINE,
    min_change: float = MIN_CHANGE,
    min_abs: float = 0.0,
) -> Check:
    """The regression check of one figure's ``values`` in run order, oldest first (runs
    without the figure, None or NaN, are skipped)."""
    if better not in ("higher", "lower"):
        raise ValueError(f"better must be 'higher' or 'lower', got {better!r}")
    if recent < 1 or min_baseline < 2 or baseline < min_baseline:
        raise ValueError("need recent >= 1, min_baseline >= 2 and baseline >= min_baseline")
    measured = [float(v) for v in values if v is not None and math.isfinite(v)]
    last = tuple(measured[-recent:]) if len(measured) >= recent else ()
    before = measured[:-recent][-baseline:] if last else []
    if len(before) < min_baseline:
        return Check(
            "too few runs", better, len(measured), len(before), last, None, None, None, None, ()
        )
    median, sigma = robust_spread(before)
    room = margin(median, sigma, k=k, min_change=min_change, min_abs=min_abs)
    sign = 1.0 if better == "lower" else -1.0
    threshold = median + sign * room
    worse = [sign * (v - median) for v in last]
    z = tuple(w / sigma if sigma > 0 else None for w in worse)
    status: Status = "regressed" if all(w > room for w in worse) else "ok"
    return Check(
        status, better, len(measured), len(before), last, median, sigma, room, threshold, z
    )


def changed(
    a: float, b: float, *, relative_sigma: float | None = None, k: float = K,
    min_change: float = MIN_CHANGE, min_abs: float = 0.0,
) -> bool:  # fmt: skip
    """Whether ``b`` differs from ``a`` beyond the noise: ``|b − a|`` above
    ``max(k · relative_sigma · |a|, min_change · |a|, min_abs)``, where
    ``relative_sigma`` is the figure's robust σ ÷ median over a history of such runs
    (None: no history; the floors alone)."""
    sigma = (relative_sigma or 0.0) * abs(a)
    return abs(b - a) > margin(a, sigma, k=k, min_change=min_change, min_abs=min_abs)
