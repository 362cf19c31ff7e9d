"""The one formatter: how bytes, durations, timestamps, rates, money, counts, fractions and
"not measured" read, wherever daskscope shows a number.

Rich tables (``cli/``), Jinja filters (``web/render.py``) and the page scripts all use
these definitions; the scripts get them as data (:data:`SPEC`, served with the page
helpers), so the browser and the terminal print the same text for the same value.
A value of ``None`` is a number that was not measured and reads :data:`MISSING`,
never a made-up zero.
"""

from __future__ import annotations

import datetime as dt
import math
from typing import Any, Final

__all__ = [
    "MISSING",
    "SPEC",
    "bytes_text",
    "count_text",
    "duration_text",
    "money_text",
    "number_text",
    "percent_text",
    "rate_text",
    "timestamp_text",
    "value_text",
]

#: What a number that was not measured reads as, everywhere.
MISSING: Final = "\u2013"  # an en dash

#: The definitions, as data: the page scripts format from this same mapping.
SPEC: Final[dict[str, Any]] = {
    "missing": MISSING,
    # binary multiples; bytes whole, larger units with one decimal
    "bytes": {"base": 1024, "units": ["B", "KiB", "MiB", "GiB", "TiB", "PiB"], "decimals": 1},
    # below a minute one unit with decimals, then two units (largest first)
    "duration": {
        "small": [[1e-3, "µs", 1e6, 0], [1.0, "ms", 1e3, 0], [60.0, "s", 1.0, 1]],
        "large": [[3600.0, "min", 60.0, "s", 1.0], [86400.0, "h", 3600.0, "min", 60.0]],
        "largest": ["d", 86400.0, "h", 3600.0],
    },
    # money: cents, and four decimals below one unit so small clusters do not read 0.00
    "money": {"decimals": 2, "small_decimals": 4},
    "percent": {"decimals": 1},
    # significant digits of a rate or a non-integral number
    "significant": 3,
}


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def bytes_text(value: float | None) -> str:
    """``1536`` → ``"1.5 KiB"``; whole bytes below 1 KiB."""
    if _missing(value):
        return MISSING
    spec = SPEC["bytes"]
    size = float(value)  # type: ignore[arg-type]
    units = spec["units"]
    for unit in units:
        if abs(size) < spec["base"] or unit == units[-1]:
            decimals = 0 if unit == units[0] else spec["decimals"]
            return f"{size:.{decimals}f} {unit}"
        size /= spec["base"]
    raise AssertionError("unreachable")


def duration_text(seconds: float | None) -> str:
    """``0.0123`` → ``"12 ms"``, ``12.34`` → ``"12.3 s"``, ``754`` → ``"12 min 34 s"``,
    ``7500`` → ``"2 h 5 min"``, ``97200`` → ``"1 d 3 h"``."""
    if _missing(seconds):
        return MISSING
    s = float(seconds)  # type: ignore[arg-type]
    sign = "-" if s < 0 else ""
    s = abs(s)
    spec = SPEC["duration"]
    if s == 0:
        return "0 s"
    for below, unit, scale, decimals in spec["small"]:
        if s < below:
            return f"{sign}{s * scale:.{decimals}f} {unit}"
    for below, big, big_scale, small, small_scale in spec["large"]:
        if s < below:
            return f"{sign}{int(s // big_scale)} {big} {int(s % big_scale // small_scale)} {small}"
    big, big_scale, small, small_scale = spec["largest"]
    return f"{sign}{int(s // big_scale)} {big} {int(s % big_scale // small_scale)} {small}"


def timestamp_text(epoch: float | None, *, millis: bool = False) -> str:
    """UTC epoch seconds as ``"2026-11-23 13:45:01"`` (UTC), ``.123`` more with ``millis``."""
    if _missing(epoch):
        return MISSING
    moment = dt.datetime.fromtimestamp(float(epoch), dt.UTC)  # type: ignore[arg-type]
    text = moment.strftime("%Y-%m-%d %H:%M:%S")
    return f"{text}.{moment.microsecond // 1000:03d}" if millis else text


def number_text(value: float | None) -> str:
    """Integers with thousands separators; other numbers to three significant digits."""
    if _missing(value):
        return MISSING
    v = float(value)  # type: ignore[arg-type]
    if v.is_integer() and abs(v) < 1e15:
        return f"{int(v):,}"
    return _significant(v)


def count_text(value: float | None) -> str:
    """A count: whole, with thousands separators."""
    return MISSING if _missing(value) else f"{round(float(value)):,}"  # type: ignore[arg-type]


def rate_text(value: float | None, unit: str) -> str:
    """``rate_text(0.01234, "Gbit/s")`` → ``"0.0123 Gbit/s"`` (three significant digits)."""
    return MISSING if _missing(value) else f"{_significant(float(value))} {unit}"  # type: ignore[arg-type]


def percent_text(fraction: float | None) -> str:
    """A fraction as a percentage: ``0.123`` → ``"12.3 %"``."""
    if _missing(fraction):
        return MISSING
    return f"{float(fraction) * 100:.{SPEC['percent']['decimals']}f} %"  # type: ignore[arg-type]


def money_text(amount: float | None, currency: str = "USD") -> str:
    """``12.3`` → ``"12.30 USD"``; four decimals below one unit (``"0.0042 USD"``)."""
    if _missing(amount):
        return MISSING
    v = float(amount)  # type: ignore[arg-type]
    spec = SPEC["money"]
    decimals = spec["small_decimals"] if 0 < abs(v) < 1 else spec["decimals"]
    return f"{v:,.{decimals}f} {currency}"


def value_text(value: float | None, unit: str) -> str:
    """A value in its unit's form: the units of the metric catalogue and of Dask's fine
    metrics (``seconds``, ``bytes``, ``count``, ``fraction``, ...); others as a number
    followed by the unit."""
    if _missing(value):
        return MISSING
    if unit in ("seconds", "s"):
        return duration_text(value)
    if unit == "bytes":
        return bytes_text(value)
    if unit == "timestamp":
        return timestamp_text(value)
    if unit == "fraction":
        return percent_text(value)
    if unit in ("count", "tasks", ""):
        return number_text(value)
    return f"{number_text(value)} {unit}"


def _significant(v: float) -> str:
    if v == 0:
        return "0"
    digits = SPEC["significant"]
    magnitude = math.floor(math.log10(abs(v)))
    decimals = max(0, digits - 1 - magnitude)
    return f"{v:,.{decimals}f}"
