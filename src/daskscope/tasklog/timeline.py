"""Busy and idle time on a task timeline (pure: intervals in, intervals and series out).

An interval is ``(start, stop)`` in epoch seconds. Busy means a thread computing (Dask's
"compute" action): transfers, disk reads and deserialisation of a task's inputs happen
off its thread, so they do not keep the thread busy.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

__all__ = ["Interval", "clipped_seconds", "idle_gaps", "merged", "spread"]

Interval = tuple[float, float]


def merged(intervals: Iterable[Interval]) -> list[Interval]:
    """The union of ``intervals`` as disjoint intervals in time order (empty ones
    dropped)."""
    ordered = sorted((a, b) for a, b in intervals if b > a)
    out: list[Interval] = []
    for a, b in ordered:
        if out and a <= out[-1][1]:
            if b > out[-1][1]:
                out[-1] = (out[-1][0], b)
        else:
            out.append((a, b))
    return out


def idle_gaps(busy: Iterable[Interval], start: float, stop: float) -> list[Interval]:
    """The parts of ``[start, stop)`` that no busy interval covers, longest first (ties:
    earliest first)."""
    gaps: list[Interval] = []
    at = start
    for a, b in merged(busy):
        if b <= start or a >= stop:
            continue
        if a > at:
            gaps.append((at, a))
        at = max(at, b)
    if stop > at:
        gaps.append((at, stop))
    gaps.sort(key=lambda g: (-(g[1] - g[0]), g[0]))
    return gaps


def spread(
    weighted: Iterable[tuple[float, float, float]], start: float, stop: float, bins: int
) -> list[float]:
    """``bins`` equal bins over ``[start, stop)``: each ``(a, b, amount)`` adds its amount
    to the bins it overlaps, in proportion to the overlap (spread evenly over ``[a, b)``;
    a zero-length one goes whole into the bin holding ``a``). For busy intervals, pass
    ``amount = b - a``: each bin then holds the busy seconds inside it."""
    if bins < 1 or stop <= start:
        return [0.0] * max(bins, 0)
    width = (stop - start) / bins
    out = [0.0] * bins
    for a, b, amount in weighted:
        if b <= a:
            if start <= a < stop:
                out[min(int((a - start) / width), bins - 1)] += amount
            continue
        lo, hi = max(a, start), min(b, stop)
        if hi <= lo:
            continue
        per_second = amount / (b - a)
        first = min(int((lo - start) / width), bins - 1)
        last = min(int((hi - start) / width), bins - 1)
        for i in range(first, last + 1):
            left = start + i * width
            overlap = min(hi, left + width) - max(lo, left)
            if overlap > 0:
                out[i] += overlap * per_second
    return out


def clipped_seconds(intervals: Sequence[Interval], start: float, stop: float) -> float:
    """Seconds of ``intervals`` (counted each, overlaps not merged) inside
    ``[start, stop)``."""
    return sum(max(0.0, min(b, stop) - max(a, start)) for a, b in intervals)
