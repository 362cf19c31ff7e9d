"""The one formatter: how bytes, durations, timestamps, rates, money, counts, fractions and
"not measured" read, wherever daskscope shows a number.

Rich tables (``cli/``), Jinja filters (``web/render.py``) and the page scripts all use
these definitions; the scripts get them as data (:data:`SPEC`, served with the page
helpers, ``static/common.js``), so the browser and the terminal print the same text for
the same value. A value of ``None`` (or NaN, infinity) is a number that was not measured
and reads :data:`MISSING`, never a made-up zero.

Rounding is half away from zero on the value's exact binary expansion, which is what
JavaScript's ``toFixed`` does: ``1.25`` bytes-as-KiB reads ``1.3`` on both sides.
"""

from __future__ import annotations

import datetime as dt
import decimal
import math
from typing import Any, Final

__all__ = [
    "MISSING",
    "SPEC",
    "UNITS",
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
    "money": {"decimals": 2, "small_decimals": 4, "currency": "USD"},
    "percent": {"decimals": 1},
    # epoch seconds of years 1 to 9999; others read as a plain number
    "timestamp": {"range": [-62135596800, 253402300800]},
    # significant digits of a rate or a non-integral number; outside 10^[low, high)
    # a mantissa and a power of ten
    "significant": 3,
    "scientific": [-9, 21],
    # Every unit a figure can have (the metric catalogue's and Dask's fine metrics'):
    # how its values read. kind: duration, bytes, timestamp, percent (value x scale),
    # number (integers whole, else significant digits), count (whole), money,
    # significant; suffix follows the text.
    "units": {
        "seconds": {"kind": "duration"},
        "s": {"kind": "duration"},
        "bytes": {"kind": "bytes"},
        "bytes/s": {"kind": "bytes", "suffix": "/s"},
        "byte-seconds": {"kind": "bytes", "suffix": "·s"},
        "timestamp": {"kind": "timestamp"},
        "fraction": {"kind": "percent", "scale": 100},
        "percent": {"kind": "percent", "scale": 1},
        "count": {"kind": "number"},
        "tasks": {"kind": "number"},
        "": {"kind": "number"},
        "cores": {"kind": "number", "suffix": " cores"},
        "core-hours": {"kind": "number", "suffix": " core-hours"},
        "GiB-hours": {"kind": "number", "suffix": " GiB-hours"},
        "hours": {"kind": "number", "suffix": " h"},
        "currency": {"kind": "money"},
        "Gbit/s": {"kind": "significant", "suffix": " Gbit/s"},
        "kHz": {"kind": "significant", "suffix": " kHz"},
        "ratio": {"kind": "significant", "suffix": "\u00d7"},  # a multiplication sign
    },
}

#: The units :func:`value_text` knows by name (others read as a number and the unit).
UNITS: Final = frozenset(SPEC["units"])

# Exact arithmetic on a float's binary expansion, whatever its size
_EXACT = decimal.Context(prec=1200, rounding=decimal.ROUND_HALF_UP)


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and not math.isfinite(value))


def _fixed(v: float, decimals: int, grouping: bool = False) -> str:
    """``v`` with ``decimals`` decimals as JavaScript's ``toFixed`` rounds (half away from
    zero, on the exact value); no sign on a zero.

    Python's own formatting rounds the exact value too, and differs only on a tie (a
    value exactly halfway, which it takes to the even side). A float ``v`` is a tie
    exactly when ``v · 2^(decimals + 1)`` is an odd integer (``v · 10^decimals`` is then
    an integer and a half), a product that is exact: only those take the slower exact
    arithmetic (a history's thousands of texts read several times faster)."""
    v = v + 0.0
    if abs(v) >= 1e21:  # where toFixed gives up too
        return _scientific(v)
    scaled = v * 2.0 ** (decimals + 1)
    if scaled.is_integer() and scaled % 2:
        exact = _EXACT.create_decimal_from_float(v)
        q = exact.quantize(decimal.Decimal(1).scaleb(-decimals), context=_EXACT)
        text = f"{q:,.{decimals}f}" if grouping else f"{q:.{decimals}f}"
    else:
        text = f"{v:,.{decimals}f}" if grouping else f"{v:.{decimals}f}"
    return text[1:] if text.startswith("-") and not any(c in text for c in "123456789") else text


def _floordiv(a: float, b: float) -> str:
    # Python's float floor division, spelled as common.js spells it (a, b > 0)
    mod = math.fmod(a, b)
    div = (a - mod) / b
    floor = math.floor(div)
    return _fixed(floor + 1 if div - floor > 0.5 else floor, 0)


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
            return f"{_fixed(size, decimals)} {unit}"
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
            return f"{sign}{_fixed(s * scale, decimals)} {unit}"
    for below, big, big_scale, small, small_scale in spec["large"]:
        if s < below:
            return _two_units(sign, s, big, big_scale, small, small_scale)
    return _two_units(sign, s, *spec["largest"])


def _two_units(sign: str, s: float, big: str, big_scale: float, small: str, scale: float) -> str:
    return (
        f"{sign}{_floordiv(s, big_scale)} {big} {_floordiv(math.fmod(s, big_scale), scale)} {small}"
    )


def timestamp_text(epoch: float | None, *, millis: bool = False) -> str:
    """UTC epoch seconds as ``"2026-11-23 13:45:01"`` (UTC), ``.123`` more with ``millis``."""
    if _missing(epoch):
        return MISSING
    low, high = SPEC["timestamp"]["range"]
    if not low <= float(epoch) < high:  # type: ignore[arg-type]
        return number_text(epoch)
    moment = dt.datetime.fromtimestamp(float(epoch), dt.UTC)  # type: ignore[arg-type]
    text = moment.strftime("%Y-%m-%d %H:%M:%S")
    return f"{text}.{moment.microsecond // 1000:03d}" if millis else text


def number_text(value: float | None) -> str:
    """Integers with thousands separators; other numbers to three significant digits."""
    if _missing(value):
        return MISSING
    v = float(value)  # type: ignore[arg-type]
    if v.is_integer() and abs(v) < 1e15:
        return _fixed(v, 0, grouping=True)
    return _significant(v)


def count_text(value: float | None) -> str:
    """A count: whole, with thousands separators."""
    if _missing(value):
        return MISSING
    v = float(value)  # type: ignore[arg-type]
    return _fixed(v, 0, grouping=True) if abs(v) < 1e21 else _significant(v)


def rate_text(value: float | None, unit: str) -> str:
    """``rate_text(0.01234, "Gbit/s")`` → ``"0.0123 Gbit/s"`` (three significant digits)."""
    return MISSING if _missing(value) else f"{_significant(float(value))} {unit}"  # type: ignore[arg-type]


def percent_text(fraction: float | None) -> str:
    """A fraction as a percentage: ``0.123`` → ``"12.3 %"``."""
    return _percent(fraction, 100)


def _percent(value: float | None, scale: float) -> str:
    if _missing(value):
        return MISSING
    return f"{_fixed(float(value) * scale, SPEC['percent']['decimals'])} %"  # type: ignore[arg-type]


def money_text(amount: float | None, currency: str = "USD") -> str:
    """``12.3`` → ``"12.30 USD"``; four decimals below one unit (``"0.0042 USD"``)."""
    if _missing(amount):
        return MISSING
    v = float(amount)  # type: ignore[arg-type]
    spec = SPEC["money"]
    decimals = spec["small_decimals"] if 0 < abs(v) < 1 else spec["decimals"]
    return f"{_fixed(v, decimals, grouping=True)} {currency}"


def value_text(value: float | None, unit: str, *, currency: str | None = None) -> str:
    """A value in its unit's form: the units of the metric catalogue and of Dask's fine
    metrics (:data:`UNITS`: ``seconds``, ``bytes``, ``count``, ``fraction``, ...); others
    as a number followed by the unit. ``currency`` names the money of a ``currency``
    value (default ``USD``)."""
    if _missing(value):
        return MISSING
    spec = SPEC["units"].get(unit)
    if spec is None:
        return f"{number_text(value)} {unit}"
    kind, suffix = spec["kind"], spec.get("suffix", "")
    text: str
    if kind == "duration":
        text = duration_text(value)
    elif kind == "bytes":
        text = bytes_text(value)
    elif kind == "timestamp":
        text = timestamp_text(value)
    elif kind == "percent":
        text = _percent(value, spec["scale"])
    elif kind == "money":
        text = money_text(value, currency or SPEC["money"]["currency"])
    elif kind == "significant":
        text = _significant(float(value))  # type: ignore[arg-type]
    elif kind == "count":
        text = count_text(value)
    else:
        text = number_text(value)
    return text + str(suffix)


def _significant(v: float) -> str:
    if v == 0:
        return "0"
    digits = SPEC["significant"]
    magnitude = math.floor(math.log10(abs(v)))
    low, high = SPEC["scientific"]
    if not low <= magnitude < high:
        return _scientific(v)
    return _fixed(v, max(0, digits - 1 - magnitude), grouping=True)


def _scientific(v: float) -> str:
    # the power of ten parsed, not computed: both languages get the nearest double
    magnitude = math.floor(math.log10(abs(v)))
    return f"{_fixed(v / float(f'1e{magnitude}'), SPEC['significant'] - 1)}e{magnitude}"
