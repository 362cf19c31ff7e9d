"""The page helpers format exactly as daskscope.format: the dashboard's own common.js (with
format.SPEC put before it by the server) evaluated in Debian's Chromium on a table of
values, each compared with the Python function's text."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from browser import needs_chromium, new_page
from daskscope import format as fmt
from daskscope.web.routes.assets import common_js_asset
from webutil import call, serving

pytestmark = needs_chromium
pytest.importorskip("fastapi")

from daskscope.web import create_app  # noqa: E402

KiB, MiB, GiB = 2**10, 2**20, 2**30
COMMON = [None, math.nan, math.inf, 0, -0.0, 1e-12, 1e-7, -5, -0.004, 0.5, 2.5, 7]
BYTES = [0.4, 1023, 1023.96, 1024, 1280, 1536, 1048575, MiB, 1.05 * MiB, 1.5 * GiB,
         1023.95 * GiB, 3 * 2**50, 2**60, -1536, 12345]  # fmt: skip
SECONDS = [0.000999, 0.0009995, 0.001, 0.0123, 0.9994, 0.9995, 0.999, 1, 12.34, 59.94,
           59.95, 59.96, 60, 61.5, 754, 3599.9, 3600, 7500, 86399.99, 86400, 97200, 1e7,
           -754, 119.99999999999999]  # fmt: skip
NUMBERS = [999.5, 999.6, 1234.5, 1234.5678, 0.001234, 0.0012345, 1e-9, 1e-10, 123.45,
           1e15, 1e15 + 2, 123456789.123, 9.995e20, 1e21 - 1e6, 3e25, -1234.0, 0.125, 1.005,
           2.675, 0.045]  # fmt: skip
MONEY = [0.00005, 0.0042, 0.99995, 0.999949, 1, 12.345, 12345.675, -0.5, 1e9 / 3]
FRACTIONS = [0.12345, 0.00125, 0.0005, 1, 0.999999, -0.2, 12.3456]
TIMES = [0, 1795441949.180537, 1795441949.9995, 1795441949.9999996, 1e9 + 0.5, -1.5,
         1700000000.0005]  # fmt: skip


def _cases() -> list[tuple[str, list[Any], str]]:
    """(ds function, arguments, what format.py writes)."""
    cases: list[tuple[str, list[Any], str]] = []

    def add(name: str, fn: Callable[..., str], values: list[Any], *extra: Any) -> None:
        cases.extend((name, [v, *extra], fn(v, *extra)) for v in COMMON + values)

    add("bytes", fmt.bytes_text, BYTES)
    add("duration", fmt.duration_text, SECONDS)
    add("num", fmt.number_text, NUMBERS + BYTES + SECONDS)
    add("count", fmt.count_text, NUMBERS)
    add("percent", fmt.percent_text, FRACTIONS)
    add("money", fmt.money_text, MONEY)
    add("money", fmt.money_text, MONEY, "EUR")
    add("rate", fmt.rate_text, NUMBERS, "Gbit/s")
    add("utc", fmt.timestamp_text, TIMES)
    cases += [("utc", [t, True], fmt.timestamp_text(t, millis=True)) for t in COMMON + TIMES]
    for unit in sorted(fmt.UNITS | {"furlongs"}):
        add("value", fmt.value_text, NUMBERS + MONEY + FRACTIONS, unit)
    add("value", lambda v, u, c: fmt.value_text(v, u, currency=c), MONEY, "currency", "CHF")
    return cases


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory, browser: Any) -> Iterator[Any]:
    app = create_app(f"sqlite:///{tmp_path_factory.mktemp('format') / 'daskscope.db'}")
    with serving(app) as base:
        context, opened, errors = new_page(browser)
        opened.goto(base + "/login")
        opened.add_script_tag(url="/static/common.js")
        yield opened
        context.close()
        assert not errors, errors
    app.state.store.close()


def test_the_script_is_served_with_the_formatter_definitions(tmp_path: Path) -> None:
    app = create_app(f"sqlite:///{tmp_path / 'daskscope.db'}")
    response = call(app, "GET", "/static/common.js")
    app.state.store.close()
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/javascript")
    assert response.content == common_js_asset().body  # the file with SPEC before it
    assert response.text.startswith("const DS_FORMAT = {")
    assert '"missing": "\u2013"' in response.text.splitlines()[0]


def test_page_helpers_write_exactly_what_python_writes(page: Any) -> None:
    cases = _cases()
    assert len(cases) > 500
    got = page.evaluate(
        "cases => cases.map(([fn, args]) => ds[fn](...args))", [[n, a] for n, a, _ in cases]
    )
    wrong = [
        f"ds.{name}({', '.join(map(repr, args))}) = {js!r}, Python {py!r}"
        for (name, args, py), js in zip(cases, got, strict=True)
        if js != py
    ]
    assert not wrong, "\n".join(wrong[:40])


def test_the_names_other_scripts_use_are_there(page: Any) -> None:
    names = page.evaluate("() => Object.keys(ds)")
    assert {"bytes", "duration", "utc", "num", "money", "percent", "value", "MISSING"} <= set(names)
    assert page.evaluate("() => ds.MISSING") == fmt.MISSING
