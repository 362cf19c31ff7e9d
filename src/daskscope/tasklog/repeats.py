"""Telling a repeated report of an execution from a new execution.

When the scheduler asks a worker for a task whose result the worker still holds (the
key was released and submitted again before the worker freed it), the worker does not
run it again: it answers with the startstops of the execution it already ran, and the
scheduler reports that execution a second time (Dask's task stream shows it twice, and
its task-group durations count it twice). One execution is the same key on the same
worker with the same first start; the task log keeps it once.

The check runs in the writer thread over a segment's columns (numpy, no Python loop per
execution, a Python step only for exactly equal starts) against the executions of the
segments encoded lately: a repeat of an execution older than the last ``capacity``
executions is kept as a second one.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from typing import TypeAlias

    import numpy as np
    import numpy.typing as npt

    Objects: TypeAlias = npt.NDArray[np.object_]

__all__ = ["RepeatFilter"]


class RepeatFilter:
    """The recent executions of one cluster's task log, by first start (writer thread)."""

    def __init__(self, capacity: int = 100_000) -> None:
        self.capacity = capacity
        #: per segment: its starts sorted, and the keys and workers in the same order
        self._recent: deque[tuple[npt.NDArray[np.float64], Objects, Objects]] = deque()
        self._held = 0

    def repeated(
        self,
        start: npt.NDArray[np.float64],
        order: npt.NDArray[np.int64],
        keys: Objects,
        workers: Objects,
    ) -> npt.NDArray[np.bool_]:
        """Which rows repeat an execution already seen (earlier in the segment, or in
        the recent segments); remembers the others. ``order`` sorts ``start``."""
        import numpy as np

        n = len(start)
        repeat = np.zeros(n, dtype=bool)
        s_start = start[order]
        s_keys, s_workers = keys[order], workers[order]
        # within the segment: equal neighbours once sorted by start
        for i in np.flatnonzero(s_start[1:] == s_start[:-1]).tolist():
            for j in range(i, -1, -1):  # any earlier row of the same start
                if s_start[j] != s_start[i + 1]:
                    break
                if s_keys[j] == s_keys[i + 1] and s_workers[j] == s_workers[i + 1]:
                    repeat[order[i + 1]] = True
                    break
        # across segments: the same start in a recent one
        for past_start, past_keys, past_workers in self._recent:
            at = np.searchsorted(past_start, s_start)
            inside = at < len(past_start)
            equal = np.zeros(n, dtype=bool)
            equal[inside] = past_start[at[inside]] == s_start[inside]
            for i in np.flatnonzero(equal).tolist():
                j = int(at[i])
                while j < len(past_start) and past_start[j] == s_start[i]:
                    if past_keys[j] == s_keys[i] and past_workers[j] == s_workers[i]:
                        repeat[order[i]] = True
                        break
                    j += 1
        self._remember(s_start, s_keys, s_workers, ~repeat[order])
        return repeat

    def _remember(
        self,
        s_start: npt.NDArray[np.float64],
        s_keys: Objects,
        s_workers: Objects,
        kept: npt.NDArray[np.bool_],
    ) -> None:
        if not kept.all():
            s_start, s_keys, s_workers = s_start[kept], s_keys[kept], s_workers[kept]
        self._recent.append((s_start, s_keys, s_workers))
        self._held += len(s_start)
        while self._held - len(self._recent[0][0]) >= self.capacity:
            self._held -= len(self._recent.popleft()[0])
