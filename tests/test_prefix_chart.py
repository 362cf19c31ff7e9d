"""The task-prefix chart's one definition (web/prefix_chart.py), which the server draws
and plotly draws after it: which bars, their lengths on the axes, the ticks and their
texts, against the prefixes given (the drawings themselves: test_cluster_first_chart_
browser.py)."""

from __future__ import annotations

from dataclasses import dataclass
from itertools import pairwise
from typing import Any

import pytest

from daskscope import format
from daskscope.web.prefix_chart import TOP, prefix_chart


@dataclass(frozen=True)
class Prefix:
    name: str
    tasks_executed: int
    duration_s: float


def check_axis(chart_axis: Any, values: list[float]) -> None:
    ticks = chart_axis.ticks
    assert ticks[0] == 0 and 2 <= len(ticks) <= 7
    steps = {round((b - a) / ticks[1], 6) for a, b in pairwise(ticks)}
    assert len(steps) == 1  # evenly spaced
    assert ticks[-1] <= chart_axis.top and max(values, default=0) <= chart_axis.top
    assert chart_axis.tick_shares == pytest.approx([t / chart_axis.top for t in ticks])
    assert len(set(chart_axis.tick_texts)) == len(ticks)  # no tick reads as another


def test_the_top_prefixes_and_the_rest_summed() -> None:
    prefixes = [Prefix(f"p{i:02d}", 1000 - i * 10, i + 0.5) for i in range(30)]
    chart = prefix_chart(reversed(prefixes))  # order given does not matter
    assert chart.labels == [p.name for p in prefixes[:TOP]] + ["10 other prefixes"]
    assert chart.other == 10
    tasks, time = chart.panels
    assert [b.value for b in tasks.bars] == [p.tasks_executed for p in prefixes[:TOP]] + [
        sum(p.tasks_executed for p in prefixes[TOP:])
    ]
    assert [b.value for b in time.bars][-1] == sum(p.duration_s for p in prefixes[TOP:])
    for panel in (tasks, time):
        values = [b.value for b in panel.bars]
        check_axis(panel.axis, values)
        assert [b.share for b in panel.bars] == pytest.approx([v / panel.axis.top for v in values])
        assert panel.bars[-1].colour != panel.bars[0].colour  # the rest in its own grey
    assert tasks.axis.title == "Tasks executed" and time.axis.title == "Task time (s)"
    assert tasks.bars[0].hover == "1,000 tasks"
    assert time.bars[0].hover == format.duration_text(0.5)
    assert tasks.axis.tick_texts == [format.count_text(t) for t in tasks.axis.ticks]
    # the heights: a row per bar, two plots stacked when narrow
    assert chart.height == chart.margin_top + chart.plot_height + chart.margin_bottom
    assert chart.narrow_height == chart.height + chart.plot_height + chart.margin_bottom


@pytest.mark.parametrize(
    "tasks, seconds",
    [(1, 0.0123), (0, 0.0), (123_456, 12_345.6), (7, 3e-7)],
    ids=["one", "zero", "large", "tiny"],
)
def test_axes_of_any_size(tasks: int, seconds: float) -> None:
    chart = prefix_chart([Prefix("only", tasks, seconds)])
    for panel, value in zip(chart.panels, (tasks, seconds), strict=True):
        check_axis(panel.axis, [value])
        assert 0 <= panel.bars[0].share <= 1
    # whole ticks for counts; seconds without the zeros of three significant digits
    assert all(float(t).is_integer() for t in chart.panels[0].axis.ticks)
    assert not any(t.endswith("0") and "." in t for t in chart.panels[1].axis.tick_texts)


def test_no_prefixes() -> None:
    chart = prefix_chart([])
    assert chart.labels == [] and chart.other == 0
    assert all(not p.bars for p in chart.panels)
