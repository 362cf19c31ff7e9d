"""Regression flags: has a figure of a recurring thing (a span tag, a workflow run name,
a cluster name) moved beyond its own run-to-run noise?

The statistic (``docs/metrics.md``, "Regressions"): of a figure's values in run order,
take the last :data:`RECENT` runs and the up to :data:`BASELINE` runs before them. With
``m`` and ``s`` the mean and (sample, n − 1) standard deviation of that baseline and
``σ = max(s, NOISE_FLOOR·|m|)``, the figure regressed when every one of the recent runs
is beyond ``m + K·σ`` (better lower) or below ``m − K·σ`` (better higher). It needs at
least :data:`MIN_BASELINE` baseline runs; one noisy run never flags, as all recent runs
must agree; the floor keeps a near-constant history from flagging a tiny change.
"""

# ruff: noqa: RUF002, RUF003 (the typographic minus, times and sigma of the docs)

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal, NamedTuple

__all__ = [
    "BASELINE",
    "MIN_BASELINE",
    "NOISE_FLOOR",
    "RECENT",
    "Check",
    "K",
    "check_series",
]

#: How many standard deviations a recent run must be beyond the baseline's mean
K = 3.0
#: The latest runs that must all be beyond the threshold
RECENT = 3
#: At most this many runs before the recent ones form the baseline
BASELINE = 10
#: Fewer baseline runs than this: no verdict
MIN_BASELINE = 5
#: σ is at least this fraction of the baseline's mean (relative noise)
NOISE_FLOOR = 0.02

Status = Literal["regressed", "ok", "too few runs"]


class Check(NamedTuple):
    """The verdict on one figure's series: ``threshold`` is ``mean ± k·sigma`` on the
    worse side; ``recent`` the values tested against it; ``baseline_runs`` how many runs
    the mean and sigma came from."""

    status: Status
    better: Literal["higher", "lower"]
    runs: int
    baseline_runs: int
    recent: tuple[float, ...]
    mean: float | None
    sigma: float | None
    threshold: float | None


def check_series(
    values: Sequence[float | None],
    better: Literal["higher", "lower"],
    *,
    k: float = K,
    recent: int = RECENT,
    baseline: int = BASELINE,
    min_baseline: int = MIN_BASELINE,
    noise_floor: float = NOISE_FLOOR,
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
        return Check("too few runs", better, len(measured), len(before), last, None, None, None)
    mean = math.fsum(before) / len(before)
    spread = math.sqrt(math.fsum((v - mean) ** 2 for v in before) / (len(before) - 1))
    sigma = max(spread, noise_floor * abs(mean))
    if better == "lower":
        threshold = mean + k * sigma
        regressed = all(v > threshold for v in last)
    else:
        threshold = mean - k * sigma
        regressed = all(v < threshold for v in last)
    status: Status = "regressed" if regressed else "ok"
    return Check(status, better, len(measured), len(before), last, mean, sigma, threshold)
