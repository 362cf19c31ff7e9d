"""A zoomed-out timeline window's bins, column-wise: one array per figure for every
worker thread at once (seconds per activity, executions overlapping, the main group),
added up from decoded segments and from segment summaries without a Python object or a
loop per bin or per thread. :mod:`daskscope.tasklog.window` puts the result in its
lanes (:class:`~daskscope.tasklog.forms.LaneColumns`, the only form of a binned lane).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from daskscope.tasklog.forms import COMPUTE, LaneColumns
from daskscope.tasklog.summaries import Summary, overlaps

if TYPE_CHECKING:
    from daskscope.tasklog.segments import DecodedSegment

__all__ = ["BinSums"]


#: cells x groups of a segment up to which its main groups are found in a dense table
#: (one bincount) rather than by sorting its (cell, group) pairs
_DENSE_CELLS = 4_000_000


class BinSums:
    """The window's figures as ``(lanes, bins)`` arrays."""

    def __init__(self, lanes: list[tuple[str, int]], start: float, stop: float, bins: int):
        self.lanes = lanes
        self.lane_index = {lane: i for i, lane in enumerate(lanes)}
        self.bins = bins
        self.start, self.stop = start, stop
        self.width = (stop - start) / bins
        self.edges = np.linspace(start, stop, bins + 1)
        shape = (len(lanes), bins)
        self.busy: dict[str, npt.NDArray[np.float64]] = {}
        self.counts = np.zeros(shape, dtype=np.int64)
        # the main group: the best candidate yet (most compute in one segment's part)
        self.top_seconds = np.zeros(shape, dtype=np.float64)
        self.top_group = np.full(shape, -1, dtype=np.int32)
        self.group_ids: dict[str, int] = {}

    def _gids(self, names: list[str]) -> npt.NDArray[np.int32]:
        ids = self.group_ids
        return np.array([ids.setdefault(n, len(ids)) for n in names], dtype=np.int32)

    def _busy(self, activity: str) -> npt.NDArray[np.float64]:
        held = self.busy.get(activity)
        if held is None:
            held = self.busy[activity] = np.zeros((len(self.lanes), self.bins))
        return held

    def _add_cells(
        self, activity: str, cells: npt.NDArray[np.intp], seconds: npt.NDArray[np.float64]
    ) -> None:
        size = len(self.lanes) * self.bins
        flat = self._busy(activity).reshape(-1)
        flat += np.bincount(cells, weights=seconds, minlength=size)

    def _merge_top(
        self,
        rows: npt.NDArray[np.intp],
        cols: npt.NDArray[np.intp],
        seconds: npt.NDArray[np.float64],
        groups: npt.NDArray[np.int32],
    ) -> None:
        """Candidates for the main group of cells (rows, cols): kept where better."""
        better = seconds > self.top_seconds[rows, cols]
        rows, cols = rows[better], cols[better]
        self.top_seconds[rows, cols] = seconds[better]
        self.top_group[rows, cols] = groups[better]

    def add_decoded(
        self,
        seg: DecodedSegment,
        chosen: npt.NDArray[np.intp],
        first: npt.NDArray[np.float64],
        last: npt.NDArray[np.float64],
    ) -> None:
        """Exact figures of a decoded segment's chosen executions."""
        bins, edges = self.bins, self.edges
        # each row's lane: (worker, thread) as one integer (1-D unique is fast)
        threads, thread_of = np.unique(seg.thread[chosen], return_inverse=True)
        combined = seg.worker[chosen].astype(np.int64) * len(threads) + thread_of.ravel()
        pairs, inverse = np.unique(combined, return_inverse=True)
        to_lane = np.array(
            [
                self.lane_index[(seg.names[p // len(threads)], int(threads[p % len(threads)]))]
                for p in pairs.tolist()
            ],
            dtype=np.int64,
        )
        lane = to_lane[inverse.ravel()]
        # compute (an execution without compute has a zero-length one: it adds nothing)
        which, b, seconds = overlaps(seg.start[chosen], seg.stop[chosen], edges)
        cells = lane[which] * bins + b
        self._add_cells(COMPUTE, cells, seconds)
        which_all, b_all, _ = overlaps(first[chosen], last[chosen], edges)
        self.counts.reshape(-1)[:] += np.bincount(
            lane[which_all] * bins + b_all, minlength=self.counts.size
        )
        # the main group of each cell within this segment: most compute seconds
        codes, local = np.unique(seg.group[chosen], return_inverse=True)
        gids = self._gids([seg.names[c] for c in codes.tolist()])
        n_groups = len(codes)
        combo = cells * n_groups + local.ravel()[which]
        size = len(self.lanes) * bins
        if size * n_groups <= _DENSE_CELLS:  # few groups: a (cells, groups) table
            table = np.bincount(combo, weights=seconds, minlength=size * n_groups)
            table = table.reshape(size, n_groups)
            best_group = table.argmax(axis=1)
            cell_of = np.flatnonzero(table[np.arange(size), best_group] > 0)
            best_sums, best_gids = table[cell_of, best_group[cell_of]], gids[best_group[cell_of]]
        else:
            combos, at = np.unique(combo, return_inverse=True)
            sums = np.bincount(at.ravel(), weights=seconds).astype(np.float64)
            cells_of = combos // n_groups
            order = np.lexsort((sums, cells_of))
            best = (
                order[np.r_[cells_of[order][1:] != cells_of[order][:-1], True]]
                if len(order)
                else order
            )
            cell_of, best_sums = cells_of[best], sums[best]
            best_gids = gids[combos[best] % n_groups]
        self._merge_top(cell_of // bins, cell_of % bins, best_sums, best_gids)
        # the other actions, by the lane of their execution
        row_lane = np.full(len(seg), -1, dtype=np.int64)
        row_lane[chosen] = lane
        a_lane = row_lane[seg.action_row]
        mine = a_lane >= 0
        for code in np.unique(seg.action_name[mine]).tolist():
            sel = np.flatnonzero(mine & (seg.action_name == code))
            which, b, seconds = overlaps(seg.action_start[sel], seg.action_stop[sel], edges)
            self._add_cells(seg.names[code], a_lane[sel][which] * bins + b, seconds)

    def add_summary(self, summary: Summary) -> None:
        """A summary's figures spread over the window's bins (its bins are no wider than
        the window's: each splits between the one or two it overlaps, for the part inside
        the window). Its executions count in the bin holding the middle of the summary
        bin they started in."""
        start, width, bins = self.start, self.width, self.bins
        own = summary.start + summary.width * np.arange(summary.bins)
        lo = np.clip(own, start, self.stop)
        hi = np.clip(own + summary.width, start, self.stop)
        left = np.clip(((lo - start) / width).astype(np.int64), 0, bins - 1)
        right = np.clip(((hi - start) / width).astype(np.int64), 0, bins - 1)
        boundary = start + (left + 1) * width
        part = np.where(hi > lo, (np.minimum(boundary, hi) - lo) / np.maximum(hi - lo, 1e-300), 0)
        part = np.where(left == right, 1.0, np.clip(part, 0.0, 1.0))
        inside = (hi - lo) / summary.width
        centre = own + summary.width / 2
        counted = (centre >= start) & (centre < self.stop)
        middle = np.clip(((centre - start) / width).astype(np.int64), 0, bins - 1)
        if not (inside > 0).any() and not counted.any():
            return
        # the window bins base..base+k-1 it touches, as (its lanes, k) cells
        base = int(left.min())
        k = int(max(right.max(), middle.max())) - base + 1
        n = len(summary.lanes)
        rows = (np.arange(n) * k)[:, None]
        cells_left, cells_right = (rows + (left - base)).ravel(), (rows + (right - base)).ravel()
        share, rest = part * inside, (1.0 - part) * inside
        lanes = np.array([self.lane_index[lane] for lane in summary.lanes], dtype=np.int64)
        window = slice(base, base + k)
        for j, activity in enumerate(summary.activities):
            seconds = summary.busy[:, j, :]
            spread = np.bincount(cells_left, (seconds * share).ravel(), minlength=n * k)
            spread += np.bincount(cells_right, (seconds * rest).ravel(), minlength=n * k)
            self._busy(activity)[lanes, window] += spread.reshape(n, k)
        starts = np.bincount(
            (rows + (middle - base)).ravel(), (summary.starts * counted).ravel(), minlength=n * k
        )
        self.counts[lanes, window] += np.rint(starts).astype(np.int64).reshape(n, k)
        self._add_summary_top(summary, lanes, counted, middle)

    def _add_summary_top(
        self,
        summary: Summary,
        lanes: npt.NDArray[np.int64],
        counted: npt.NDArray[np.bool_],
        middle: npt.NDArray[np.int64],
    ) -> None:
        """Per lane and window bin, the summary bin whose main group computed most."""
        cols = np.flatnonzero(counted)
        if not len(cols):
            return
        where = middle[cols]  # non-decreasing: the summary's bins in time order
        seconds = np.where(summary.top[:, cols] >= 0, summary.top_seconds[:, cols], -1.0)
        runs = np.flatnonzero(np.r_[True, where[1:] != where[:-1]])
        run_of = np.cumsum(np.r_[True, where[1:] != where[:-1]]) - 1
        most = np.maximum.reduceat(seconds, runs, axis=1)
        # the first column of each run holding its most
        place = np.where(seconds == most[:, run_of], np.arange(len(cols)), len(cols))
        pick = np.minimum.reduceat(place, runs, axis=1)
        groups = self._gids(summary.groups)
        codes = np.take_along_axis(summary.top[:, cols], pick, axis=1)
        found = most > 0
        rows = np.broadcast_to(lanes[:, None], most.shape)[found]
        window_bins = np.broadcast_to(where[runs][None, :], most.shape)[found]
        self._merge_top(rows, window_bins, most[found].astype(np.float64), groups[codes[found]])

    def columns(self) -> list[LaneColumns]:
        names = tuple(sorted(self.group_ids, key=self.group_ids.__getitem__))
        starts, stops = self.edges[:-1], self.edges[1:]
        top = np.where(self.top_seconds > 0, self.top_group, -1).astype(np.int32)
        return [
            LaneColumns(
                starts,
                stops,
                self.counts[i],
                {a: seconds[i] for a, seconds in self.busy.items()},
                top[i],
                names,
            )
            for i in range(len(self.lanes))
        ]
