"""The cluster page's task-prefix chart as data: which bars, in what order and colour,
their hover texts, the axes' titles, ranges and ticks, the chart's height. One
definition, two drawings: the server draws it into the page's HTML
(``templates/cluster_prefix_chart.html``), so the chart is there at first paint without
plotly.js (1.5 MB to fetch and most of a second to compile and run on a fresh
browser); ``static/cluster_prefixes.js`` hands the same data to plotly once plotly has
loaded, and the interactive chart takes the drawn one's place with the same axes.

The most common prefixes are drawn and the rest summed in one bar, and the chart's
height follows its bars, so it never spills over what comes below it."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from typing import Any, Protocol

from daskscope import format
from daskscope.catalogue import figure

__all__ = ["TOP", "PrefixChart", "prefix_chart", "prefix_chart_data"]

#: Bars drawn before "other"
TOP = 20
#: Pixels per bar
ROW = 24
#: Above the plots, and below each: its tick labels and axis title (as much as plotly
#: takes for them, so that its narrow layout's upper title stays clear of the lower plot)
MARGIN_TOP = 10
MARGIN_BOTTOM = 64
#: A plot's room around its bars (half a row's gap above the first and below the last)
PLOT_PAD = 40
#: Bars of tasks executed, of task time, and the bar of all other prefixes
TASKS_COLOUR = "#2f6fd1"
TIME_COLOUR = "#7e57c2"
OTHER_COLOUR = "#b0b7c6"
#: The axes' tick texts: seconds as plain numbers, the unit in the title
SECONDS_UNIT = "s"


class Prefix(Protocol):
    """A task prefix of the cluster's view or of a span filter's scope."""

    @property
    def name(self) -> str: ...
    @property
    def tasks_executed(self) -> int: ...
    @property
    def duration_s(self) -> float: ...


@dataclass(frozen=True)
class Axis:
    #: "Tasks executed", "Task time (s)"
    title: str
    #: the axis runs from 0 to top
    top: float
    ticks: list[float]
    tick_texts: list[str]
    #: each tick's place along the axis, 0 to 1 (the server's drawing)
    tick_shares: list[float]


@dataclass(frozen=True)
class Bar:
    value: float
    #: the bar's length as a share of its axis, 0 to 1 (the server's drawing)
    share: float
    colour: str
    #: the value as it reads in the bar's tooltip ("1,234 tasks", "2 min 3 s")
    hover: str


@dataclass(frozen=True)
class Panel:
    #: "tasks", "time": what the drawings name the plot by
    key: str
    axis: Axis
    #: one per label, in the labels' order
    bars: list[Bar]


@dataclass(frozen=True)
class PrefixChart:
    #: the bars' labels from the top down: the prefixes, then "N other prefixes"
    labels: list[str]
    #: tasks executed, then task time
    panels: list[Panel]
    #: how many prefixes the last bar sums (0: none summed)
    other: int
    #: the height of one plot: its bars and their padding
    plot_height: int
    #: the chart's height with the plots beside each other (wide) and one above the
    #: other (narrow): the plots, MARGIN_TOP above and MARGIN_BOTTOM below each row
    height: int
    narrow_height: int
    margin_top: int = MARGIN_TOP
    margin_bottom: int = MARGIN_BOTTOM
    #: the width below which the plots go one above the other
    narrow_below: int = 640


def _nice_ticks(largest: float, *, whole: bool) -> tuple[float, list[float]]:
    """The axis's top (a little past ``largest``, as plotly pads its bars) and its ticks
    from 0: at most seven, at steps of 1, 2, 2.5 or 5 times a power of ten."""
    top = largest * 1.05 if largest > 0 else 1.0
    rough = top / 6
    power = 10.0 ** math.floor(math.log10(rough))
    step = next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= rough * (1 - 1e-9))
    if whole:
        step = max(1.0, round(step))  # counts: whole ticks
    count = int(top / step + 1e-9)
    return top, [round(i * step, 12) for i in range(count + 1)]


def _axis(title: str, largest: float, text: Callable[[float], str], *, whole: bool) -> Axis:
    top, ticks = _nice_ticks(largest, whole=whole)
    return Axis(title, top, ticks, [text(t) for t in ticks], [t / top for t in ticks])


def prefix_chart(prefixes: Iterable[Prefix]) -> PrefixChart:
    """The chart of ``prefixes``: the TOP by tasks executed (then task time), the rest
    summed in one bar."""
    ordered = sorted(prefixes, key=lambda p: (-p.tasks_executed, -p.duration_s, p.name))
    shown = ordered[:TOP]
    rest = ordered[TOP:]
    labels = [p.name for p in shown]
    tasks = [float(p.tasks_executed) for p in shown]
    seconds = [float(p.duration_s) for p in shown]
    colours = [TASKS_COLOUR] * len(shown), [TIME_COLOUR] * len(shown)
    if rest:
        labels.append(f"{format.count_text(len(rest))} other prefixes")
        tasks.append(float(sum(p.tasks_executed for p in rest)))
        seconds.append(float(sum(p.duration_s for p in rest)))
        colours[0].append(OTHER_COLOUR)
        colours[1].append(OTHER_COLOUR)

    tasks_figure = figure("prefix", "tasks_executed")
    time_figure = figure("prefix", "duration_s")
    tasks_axis = _axis(
        _capital(tasks_figure.label), max(tasks, default=0), format.count_text, whole=True
    )
    time_axis = _axis(
        f"{_capital(time_figure.label)} ({SECONDS_UNIT})",
        max(seconds, default=0),
        _tick_number,
        whole=False,
    )

    def bars(
        values: list[float], axis: Axis, paint: list[str], hover: Callable[[float], str]
    ) -> list[Bar]:
        return [Bar(v, v / axis.top, c, hover(v)) for v, c in zip(values, paint, strict=True)]

    plot_height = ROW * len(labels) + PLOT_PAD
    return PrefixChart(
        labels=labels,
        panels=[
            Panel("tasks", tasks_axis, bars(tasks, tasks_axis, colours[0], _tasks_text)),
            Panel("time", time_axis, bars(seconds, time_axis, colours[1], format.duration_text)),
        ],
        other=len(rest),
        plot_height=plot_height,
        height=MARGIN_TOP + plot_height + MARGIN_BOTTOM,
        narrow_height=MARGIN_TOP + 2 * (plot_height + MARGIN_BOTTOM),
    )


def prefix_chart_data(prefixes: Iterable[Prefix]) -> dict[str, Any]:
    """:func:`prefix_chart` as the page's JSON carries it to its script."""
    return asdict(prefix_chart(prefixes))


def _tick_number(v: float) -> str:
    """A tick as format.py writes numbers, without the zeros that its three significant
    digits add to a round tick ("0.005", not "0.00500")."""
    text = format.number_text(v)
    if "." in text and "e" not in text:
        text = text.rstrip("0").rstrip(".")
    return text


def _tasks_text(n: float) -> str:
    return f"{format.count_text(n)} task{'' if n == 1 else 's'}"


def _capital(text: str) -> str:
    return text[:1].upper() + text[1:]
