"""A binned lane's columns (:class:`daskscope.tasklog.forms.LaneColumns`) read bin by
bin, for tests that check one bin's figures against the executions they wrote."""

from __future__ import annotations

from dataclasses import dataclass

from daskscope.tasklog.forms import Lane


@dataclass(frozen=True)
class Bin:
    start: float
    stop: float
    #: seconds by activity, those above 0
    busy_s: dict[str, float]
    tasks: int
    #: the group that computed most in the bin; None when nothing computed
    top_group: str | None


def lane_bins(lane: Lane) -> list[Bin]:
    """The lane's bins in time order (none when the window was raw)."""
    columns = lane.columns
    if columns is None:
        return []
    busy = {name: seconds.tolist() for name, seconds in columns.busy.items()}
    return [
        Bin(
            start,
            stop,
            {name: per_bin[i] for name, per_bin in busy.items() if per_bin[i] > 0},
            tasks,
            columns.groups[top] if top >= 0 else None,
        )
        for i, (start, stop, tasks, top) in enumerate(
            zip(
                columns.start.tolist(),
                columns.stop.tolist(),
                columns.tasks.tolist(),
                columns.top.tolist(),
                strict=True,
            )
        )
    ]
