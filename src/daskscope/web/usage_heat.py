"""The account page's usage heat map as the server draws it: each cell's colour, text and
tooltip, the week labels and the colour scale, from a :class:`~daskscope.views.account.
UsageMap`. The page shows it as an HTML table at first paint (no chart library)."""

from __future__ import annotations

from dataclasses import dataclass
from itertools import pairwise

from daskscope import format
from daskscope.catalogue import Figure
from daskscope.views.account import UsageMap

__all__ = ["IDLE", "SCALE", "HeatMap", "colour", "heat_map"]

#: A week without use: grey, apart from the blues of any use
IDLE = "#eceef2"
#: Light to dark blue over (0, top of the scale]
SCALE = ((0.0, "#d6e4f5"), (0.5, "#5b92d6"), (1.0, "#0b3d91"))


def _rgb(hex_colour: str) -> tuple[int, int, int]:
    return int(hex_colour[1:3], 16), int(hex_colour[3:5], 16), int(hex_colour[5:7], 16)


_STOPS = [(at, _rgb(c)) for at, c in SCALE]


def colour(value: float, top: float) -> str:
    """The cell colour of ``value`` on a scale ending at ``top`` (values above it take
    the darkest blue: the "others" row sums many members)."""
    if not value > 0:
        return IDLE
    share = min(1.0, value / top) if top > 0 else 1.0
    for (a, low), (b, high) in pairwise(_STOPS):
        if share <= b:
            t = (share - a) / (b - a)
            mixed = (round(x + (y - x) * t) for x, y in zip(low, high, strict=True))
            return "#{:02x}{:02x}{:02x}".format(*mixed)
    return SCALE[-1][1]


@dataclass(frozen=True)
class HeatCell:
    colour: str
    #: what the cell says to a screen reader (and in its tooltip): member, week, value
    #: as written, clusters
    label: str


@dataclass(frozen=True)
class HeatRow:
    user: str | None
    label: str
    cells: list[HeatCell]


@dataclass(frozen=True)
class HeatMap:
    #: "cluster hours (h)": the figure's label and its unit as its values are written
    title: str
    weeks: list[str]
    rows: list[HeatRow]
    #: the scale's ends as written ("0 h", "12.3 h")
    low: str
    high: str
    #: CSS gradient of the scale
    gradient: str


def _unit(fig: Figure, currency: str) -> str:
    spec = format.SPEC["units"].get(fig.unit, {})
    if spec.get("kind") == "money":
        return currency
    return str(spec.get("suffix", fig.unit)).strip()


def heat_map(usage: UsageMap, fig: Figure, currency: str) -> HeatMap:
    """The drawn heat map of ``usage`` (whose figure is ``fig``), money in ``currency``."""
    weeks = [format.timestamp_text(w)[:10] for w in usage.weeks]
    top = usage.scale_max

    zero = format.value_text(0.0, fig.unit, currency=currency)

    def text(value: float) -> str:
        return format.value_text(value, fig.unit, currency=currency) if value else zero

    def cell(label: str, week: str, value: float, clusters: int) -> HeatCell:
        count = f"{format.count_text(clusters)} cluster{'' if clusters == 1 else 's'}"
        return HeatCell(colour(value, top), f"{label}, week of {week}: {text(value)}, {count}")

    rows = [
        HeatRow(
            user=row.user,
            label=row.label,
            cells=[
                cell(row.label, week, value, clusters)
                for week, value, clusters in zip(weeks, row.values, row.clusters, strict=True)
            ],
        )
        for row in usage.members
    ]
    stops = ", ".join(f"{c} {round(100 * at)}%" for at, c in SCALE)
    return HeatMap(
        title=f"{fig.label} ({_unit(fig, currency)})",
        weeks=weeks,
        rows=rows,
        low=text(0.0),
        high=text(top),
        gradient=f"linear-gradient(to right, {stops})",
    )
