"""A task-log segment's coarse summary: busy seconds per worker thread and activity in
:data:`BINS` bins over the segment's time range, executions started and the main group
per bin, and each group's slowest executions. A zoomed-out timeline window adds up
summaries instead of decoding every segment (what keeps it fast at ten million tasks).

Built in the recorder's writer thread from the arrays :mod:`daskscope.tasklog.segments` encodes;
stored in :attr:`~daskscope.model.TaskSegmentRecord.summary` as a JSON header and the
arrays, zstd-compressed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = [
    "BINS",
    "SLOWEST_PER_GROUP",
    "Summary",
    "busy_per_bin",
    "overlaps",
    "read_summary",
    "summarize",
]

BINS = 256
#: executions kept per group for "the slowest tasks of a group"
SLOWEST_PER_GROUP = 20
_VERSION = 1


def busy_per_bin(
    starts: npt.NDArray[np.float64], stops: npt.NDArray[np.float64], edges: npt.NDArray[np.float64]
) -> npt.NDArray[np.float64]:
    """Seconds of the intervals inside each bin: differences of F(edge), where F(t) is
    the time covered before t (the sum of t - s over starts before t, less the sum of
    t - e over stops before t); times relative to the first edge keep the sums precise."""
    import numpy as np

    origin = edges[0]
    ss = np.sort(np.clip(starts, edges[0], edges[-1]) - origin)
    es = np.sort(np.clip(stops, edges[0], edges[-1]) - origin)
    at = edges - origin
    cs = np.concatenate(([0.0], np.cumsum(ss)))
    ce = np.concatenate(([0.0], np.cumsum(es)))
    ns = np.searchsorted(ss, at, "left")
    ne = np.searchsorted(es, at, "left")
    covered = (ns * at - cs[ns]) - (ne * at - ce[ne])
    busy: npt.NDArray[np.float64] = np.maximum(np.diff(covered), 0.0)
    return busy


def overlaps(
    lo: npt.NDArray[np.float64], hi: npt.NDArray[np.float64], edges: npt.NDArray[np.float64]
) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.intp], npt.NDArray[np.float64]]:
    """Every (interval, bin) pair where ``[lo, hi]`` overlaps a bin of ``edges``: the
    interval's index, the bin and the seconds inside it. An interval counts in a bin when
    it starts before the bin's end and ends after its start (a zero-length one strictly
    inside counts, one on an edge nowhere)."""
    import numpy as np

    bins = len(edges) - 1
    first = np.maximum(np.searchsorted(edges, lo, "right") - 1, 0)
    last = np.minimum(np.searchsorted(edges, hi, "left") - 1, bins - 1)
    spread = np.maximum(last - first + 1, 0)
    if len(spread) and spread.min() == 1 and spread.max() == 1:  # zoomed out: each in one
        seconds = np.minimum(hi, edges[first + 1]) - np.maximum(lo, edges[first])
        return np.arange(len(lo)), first, np.maximum(seconds, 0.0)
    which = np.repeat(np.arange(len(lo)), spread)
    # each pair's bin: the interval's first bin plus its place among the interval's pairs
    before = np.cumsum(spread) - spread
    b = first[which] + (np.arange(len(which)) - before[which])
    seconds = np.minimum(hi[which], edges[b + 1]) - np.maximum(lo[which], edges[b])
    return which, b, np.maximum(seconds, 0.0)


@dataclass(frozen=True, slots=True)
class Summary:
    start: float
    width: float
    lanes: list[tuple[str, int]]
    activities: list[str]
    groups: list[str]
    computations: list[str | None]
    spans: list[str | None]
    #: (lanes, activities, BINS) seconds
    busy: npt.NDArray[np.float32]
    #: (lanes, BINS) executions started in the bin
    starts: npt.NDArray[np.int32]
    #: (lanes, BINS) index into ``groups`` of the group with most compute started (-1)
    top: npt.NDArray[np.int32]
    #: (lanes, BINS) compute seconds of that group
    top_seconds: npt.NDArray[np.float32]
    #: rows (in the segment) of each group's slowest executions, and their durations
    slowest_group: npt.NDArray[np.int32]
    slowest_row: npt.NDArray[np.int32]
    slowest_duration: npt.NDArray[np.float64]
    #: the same figures in fewer, wider bins (:meth:`coarse`), made once each
    _levels: dict[int, Summary] = field(default_factory=dict, compare=False, repr=False)

    @property
    def bins(self) -> int:
        return int(self.starts.shape[1])

    @property
    def stop(self) -> float:
        return self.start + self.width * self.bins

    def coarse(self, widest: float) -> Summary | None:
        """The coarsest level of this summary (its bins merged by 4, 16, 64 or 256)
        whose bins are no wider than ``widest``; None when even its own are wider. A
        zoomed-out window adds up a few bins per segment instead of hundreds."""
        if self.width > widest:
            return None
        factor = 1
        while factor < self.bins and self.width * factor * 4 <= widest:
            factor *= 4
        if factor == 1:
            return self
        level = self._levels.get(factor)
        if level is None:
            level = self._levels[factor] = self._merged(factor)
        return level

    def _merged(self, factor: int) -> Summary:
        """Every ``factor`` neighbouring bins as one: seconds and starts added, the main
        group the one of the merged bin where it computed most."""
        import numpy as np

        lanes, bins = self.starts.shape[0], self.bins // factor
        busy = self.busy.reshape(lanes, -1, bins, factor).sum(axis=3, dtype=np.float32)
        starts = self.starts.reshape(lanes, bins, factor).sum(axis=2, dtype=np.int32)
        seconds = np.where(self.top >= 0, self.top_seconds, -1.0).reshape(lanes, bins, factor)
        pick = seconds.argmax(axis=2)[..., None]
        top = np.take_along_axis(self.top.reshape(lanes, bins, factor), pick, axis=2)[..., 0]
        top_seconds = np.take_along_axis(seconds, pick, axis=2)[..., 0]
        return Summary(
            start=self.start,
            width=self.width * factor,
            lanes=self.lanes,
            activities=self.activities,
            groups=self.groups,
            computations=self.computations,
            spans=self.spans,
            busy=busy,
            starts=starts,
            top=top.astype(np.int32),
            top_seconds=np.maximum(top_seconds, 0.0).astype(np.float32),
            slowest_group=self.slowest_group,
            slowest_row=self.slowest_row,
            slowest_duration=self.slowest_duration,
        )

    @property
    def nbytes(self) -> int:
        """Memory its arrays hold (what a cache of summaries weighs)."""
        arrays = (self.busy, self.starts, self.top, self.top_seconds, self.slowest_duration)
        return sum(a.nbytes for a in arrays) + 2 * self.slowest_row.nbytes + 1000


def summarize(
    names: list[str],
    *,
    first: float,
    last: float,
    start: npt.NDArray[np.float64],
    stop: npt.NDArray[np.float64],
    span_first: npt.NDArray[np.float64],
    span_last: npt.NDArray[np.float64],
    group: npt.NDArray[np.int32],
    worker: npt.NDArray[np.int32],
    thread: npt.NDArray[np.int64],
    computation: npt.NDArray[np.int32],
    span: npt.NDArray[np.int32],
    action_row: npt.NDArray[np.int64],
    action_name: npt.NDArray[np.int32],
    action_start: npt.NDArray[np.float64],
    action_stop: npt.NDArray[np.float64],
) -> bytes:
    """The summary of one segment's executions (rows in the segment's order)."""
    import numpy as np
    import pyarrow as pa  # type: ignore[import-untyped]

    width = max(last - first, 1e-6) / BINS
    edges = np.asarray(first + width * np.arange(BINS + 1), dtype=np.float64)
    # each row's lane: (worker, thread) as one integer (a 1-D unique is fast)
    threads, thread_of = np.unique(thread, return_inverse=True)
    pairs, lane_of = np.unique(
        worker.astype(np.int64) * len(threads) + thread_of.ravel(), return_inverse=True
    )
    lane_of = lane_of.ravel()
    lane_pairs = [(int(p // len(threads)), int(threads[p % len(threads)])) for p in pairs.tolist()]
    n_lanes = len(lane_pairs)
    activity_codes = sorted(set(np.unique(action_name).tolist()))
    activities = ["compute", *(names[a] for a in activity_codes)]
    busy = np.zeros((len(activities), n_lanes * BINS), dtype=np.float64)
    # every lane at once: each interval's seconds in the bins it overlaps
    which, b, seconds = overlaps(start, stop, edges)
    busy[0] = np.bincount(lane_of[which] * BINS + b, seconds, minlength=n_lanes * BINS)
    a_lane = lane_of[action_row] if len(action_row) else action_row
    for i, code in enumerate(activity_codes, start=1):
        sel = np.flatnonzero(action_name == code)
        which, b, seconds = overlaps(action_start[sel], action_stop[sel], edges)
        cells = a_lane[sel][which] * BINS + b
        busy[i] = np.bincount(cells, seconds, minlength=n_lanes * BINS)
    per_lane = busy.reshape(len(activities), n_lanes, BINS).transpose(1, 0, 2)
    busy_s = np.ascontiguousarray(per_lane, dtype=np.float32)  # (lanes, activities, BINS)
    start_bin = np.clip(((span_first - first) / width).astype(np.int64), 0, BINS - 1)
    cell = lane_of * BINS + start_bin
    starts = np.bincount(cell, minlength=n_lanes * BINS).astype(np.int32)
    # the main group of a cell: most compute seconds started in it
    group_codes, group_of = np.unique(group, return_inverse=True)
    n_groups = len(group_codes)
    # (sparse: a segment may hold thousands of groups)
    combos, inverse = np.unique(cell * n_groups + group_of, return_inverse=True)
    group_seconds = np.bincount(inverse.ravel(), weights=stop - start)
    cells = combos // n_groups
    by_cell = np.lexsort((group_seconds, cells))
    best = by_cell[np.r_[cells[by_cell][1:] != cells[by_cell][:-1], True]]
    top = np.full(n_lanes * BINS, -1, dtype=np.int32)
    top_seconds = np.zeros(n_lanes * BINS, dtype=np.float32)
    top[cells[best]] = (combos[best] % n_groups).astype(np.int32)
    top_seconds[cells[best]] = group_seconds[best]
    # each group's slowest executions
    duration = span_last - span_first
    order = np.lexsort((-duration, group_of))
    sorted_groups = group_of[order]
    rank = np.arange(len(order)) - np.searchsorted(sorted_groups, sorted_groups, "left")
    kept = order[rank < SLOWEST_PER_GROUP]
    header = {
        "version": _VERSION,
        "start": first,
        "width": width,
        "lanes": [[names[w], t] for w, t in lane_pairs],
        "activities": activities,
        "groups": [names[int(g)] for g in group_codes],
        "computations": [names[c] if c >= 0 else None for c in np.unique(computation).tolist()],
        "spans": [names[c] if c >= 0 else None for c in np.unique(span).tolist()],
        "slowest": len(kept),
    }
    body = b"".join(
        a.tobytes()
        for a in (
            busy_s,
            starts,
            top,
            top_seconds,
            group_of[kept].astype(np.int32),
            kept.astype(np.int32),
            duration[kept].astype(np.float64),
        )
    )
    text = json.dumps(header).encode()
    packed = pa.compress(body, codec="zstd", asbytes=True)
    return len(text).to_bytes(4, "little") + text + len(body).to_bytes(8, "little") + bytes(packed)


def read_summary(blob: bytes) -> Summary | None:
    """The summary in ``blob``; None when there is none (or of a version not known)."""
    if len(blob) < 4:
        return None
    import numpy as np
    import pyarrow as pa

    size = int.from_bytes(blob[:4], "little")
    header: dict[str, Any] = json.loads(blob[4 : 4 + size])
    if header.get("version") != _VERSION:
        return None
    raw = int.from_bytes(blob[4 + size : 12 + size], "little")
    body = pa.decompress(blob[12 + size :], decompressed_size=raw, codec="zstd", asbytes=True)
    lanes = [(str(w), int(t)) for w, t in header["lanes"]]
    n_lanes, n_acts, kept = len(lanes), len(header["activities"]), header["slowest"]
    shapes: list[tuple[Any, tuple[int, ...]]] = [
        (np.float32, (n_lanes, n_acts, BINS)),
        (np.int32, (n_lanes, BINS)),
        (np.int32, (n_lanes, BINS)),
        (np.float32, (n_lanes, BINS)),
        (np.int32, (kept,)),
        (np.int32, (kept,)),
        (np.float64, (kept,)),
    ]
    arrays = []
    offset = 0
    for dtype, shape in shapes:
        count = int(np.prod(shape))
        arrays.append(np.frombuffer(body, dtype=dtype, count=count, offset=offset).reshape(shape))
        offset += count * np.dtype(dtype).itemsize
    return Summary(
        start=float(header["start"]),
        width=float(header["width"]),
        lanes=lanes,
        activities=list(header["activities"]),
        groups=list(header["groups"]),
        computations=list(header["computations"]),
        spans=list(header["spans"]),
        busy=arrays[0],
        starts=arrays[1],
        top=arrays[2],
        top_seconds=arrays[3],
        slowest_group=arrays[4],
        slowest_row=arrays[5],
        slowest_duration=arrays[6],
    )
