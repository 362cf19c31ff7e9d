"""The one formatter against hand-written text: thresholds, rounding, missing values,
and every unit of the metric catalogue."""

from __future__ import annotations

import math

import pytest

from daskscope import format as fmt
from daskscope.catalogue import FIGURES
from daskscope.format import (
    MISSING,
    bytes_text,
    count_text,
    duration_text,
    money_text,
    number_text,
    percent_text,
    rate_text,
    timestamp_text,
    value_text,
)

ALL = (bytes_text, count_text, duration_text, money_text, number_text, percent_text)


@pytest.mark.parametrize("value", [None, math.nan, math.inf, -math.inf])
def test_not_measured_reads_the_one_mark(value: float | None) -> None:
    assert MISSING == "\u2013"
    for fn in ALL:
        assert fn(value) == MISSING, fn
    assert timestamp_text(value) == rate_text(value, "kHz") == MISSING
    for unit in fmt.UNITS | {"furlongs"}:
        assert value_text(value, unit) == MISSING


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (0, "0 B"), (1023, "1023 B"), (1024, "1.0 KiB"), (1536, "1.5 KiB"),
        # 1.25 KiB is a tie: half away from zero, as JavaScript's toFixed
        (1280, "1.3 KiB"), (1048575, "1024.0 KiB"), (2**20, "1.0 MiB"),
        (1.5 * 2**30, "1.5 GiB"), (3 * 2**50, "3.0 PiB"), (2**60, "1024.0 PiB"),
        (-1536, "-1.5 KiB"), (0.4, "0 B"),
    ],
)  # fmt: skip
def test_bytes(value: float, text: str) -> None:
    assert bytes_text(value) == text


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (0, "0 s"), (1e-7, "0 µs"), (0.0005, "500 µs"), (0.001, "1 ms"), (0.0123, "12 ms"),
        (0.9995, "1000 ms"), (1, "1.0 s"), (12.34, "12.3 s"), (59.96, "60.0 s"),
        (60, "1 min 0 s"), (754, "12 min 34 s"), (3599.9, "59 min 59 s"),
        (3600, "1 h 0 min"), (7500, "2 h 5 min"), (86400, "1 d 0 h"), (97200, "1 d 3 h"),
        (-754, "-12 min 34 s"), (-0.0123, "-12 ms"),
    ],
)  # fmt: skip
def test_duration(value: float, text: str) -> None:
    assert duration_text(value) == text


def test_timestamps_are_utc() -> None:
    assert timestamp_text(0) == "1970-01-01 00:00:00"
    assert timestamp_text(1795441949.180537) == "2026-11-23 13:52:29"
    assert timestamp_text(1795441949.180537, millis=True) == "2026-11-23 13:52:29.180"
    assert timestamp_text(-1.5, millis=True) == "1969-12-31 23:59:58.500"


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (0, "0"), (7, "7"), (1234567, "1,234,567"), (-1234.0, "-1,234"), (2.5, "2.50"),
        (1234.5678, "1,235"), (0.001234, "0.00123"), (123.45, "123"), (999.6, "1,000"),
        (1e-12, "1.00e-12"), (3e25, "3.00e25"), (1e15, "1,000,000,000,000,000"),
    ],
)  # fmt: skip
def test_numbers_are_whole_or_three_significant_digits(value: float, text: str) -> None:
    assert number_text(value) == text


def test_counts_rates_percent_money() -> None:
    assert count_text(2.5) == "3"  # half away from zero, not to even
    assert count_text(-0.4) == "0"  # no sign on a zero
    assert count_text(1234567.4) == "1,234,567"
    assert rate_text(0.01234, "Gbit/s") == "0.0123 Gbit/s"
    assert percent_text(0.123) == "12.3 %"
    assert percent_text(1) == "100.0 %"
    assert money_text(12.3) == "12.30 USD"
    assert money_text(12345.678, "EUR") == "12,345.68 EUR"
    assert money_text(0.0042) == "0.0042 USD"  # small clusters do not read 0.00
    assert money_text(0) == "0.00 USD"


def test_value_text_knows_every_catalogue_unit() -> None:
    assert {f.unit for f in FIGURES.values()} <= fmt.UNITS
    assert set(fmt.SPEC["units"]) == fmt.UNITS
    expected = {
        "seconds": "12 min 34 s", "s": "12 min 34 s", "bytes": "754 B", "bytes/s": "754 B/s",
        "byte-seconds": "754 B·s", "timestamp": "1970-01-01 00:12:34", "fraction": "75400.0 %",
        "percent": "754.0 %", "count": "754", "tasks": "754", "": "754", "cores": "754 cores",
        "core-hours": "754 core-hours", "GiB-hours": "754 GiB-hours", "hours": "754 h",
        "currency": "754.00 USD", "Gbit/s": "754 Gbit/s", "kHz": "754 kHz", "ratio": "754\u00d7",
    }  # fmt: skip
    assert set(expected) == fmt.UNITS
    for unit, text in expected.items():
        assert value_text(754, unit) == text, unit
    assert value_text(0.5, "currency", currency="CHF") == "0.5000 CHF"
    assert value_text(3, "furlongs") == "3 furlongs"  # an open-set unit: number and name


def _fixed_exactly(v: float, decimals: int, grouping: bool = False) -> str:
    # the rounding of JavaScript's toFixed on the exact value, in decimal arithmetic only
    import decimal

    exact = decimal.Context(prec=1200).create_decimal_from_float(v + 0.0)
    q = exact.quantize(decimal.Decimal(1).scaleb(-decimals), rounding=decimal.ROUND_HALF_UP)
    text = f"{q:,.{decimals}f}" if grouping else f"{q:.{decimals}f}"
    return text[1:] if text.startswith("-") and not any(c in text for c in "123456789") else text


def test_fixed_rounds_as_the_exact_arithmetic() -> None:
    """``_fixed`` formats with Python's rounding but on ties: equal to exact decimal
    arithmetic on random values of every size, on every tie a float can hold at a few
    decimals (k + ½)·10^-d, and beside them."""
    import random

    rnd = random.Random(25)
    values = [rnd.uniform(-1, 1) * 10 ** rnd.randint(-8, 20) for _ in range(20_000)]
    for d in range(7):
        for k in range(-300, 300):
            tie = (k + 0.5) / 10**d
            values += [tie, math.nextafter(tie, math.inf), math.nextafter(tie, -math.inf)]
    values += [0.0, -0.0, 0.5, -0.5, 2.5, 1.25, 0.125, 1e20, -1e20, 5e-324, 2.0**60]
    for v in values:
        for d in range(7):
            for grouping in (False, True):
                assert fmt._fixed(v, d, grouping) == _fixed_exactly(v, d, grouping), (v, d)
