"""Property-based requests generated from the OpenAPI document: no route answers 5xx,
whatever it is sent. The store behind the app holds synthetic history of several
members over several weeks."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

import pytest

schemathesis = pytest.importorskip("schemathesis")

from hypothesis import HealthCheck, settings  # noqa: E402

from daskscope.store import open_store, write_records  # noqa: E402
from daskscope.web import create_app  # noqa: E402
from webutil import synthetic_clusters  # noqa: E402


def _app() -> Any:
    # Built at import: schemathesis reads the schema when the module is collected.
    url = f"sqlite:///{Path(tempfile.mkdtemp(prefix='daskscope-fuzz-')) / 'fuzz.db'}"
    with open_store(url) as store:
        write_records(store, synthetic_clusters(time.time()))
    return create_app(url)


schema = schemathesis.openapi.from_asgi("/openapi.json", _app())


@schema.parametrize()
@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
def test_no_route_answers_5xx(case: Any) -> None:
    response = case.call()
    assert response.status_code < 500, (case.method, case.formatted_path, response.text[:500])


# -- issue 10, point 7: the values that answered 5xx --------------------------------------

QUERIES = [
    ("/api/v1/account?since=nan", "since"),
    ("/api/v1/statistics?since=inf", "since"),
    ("/api/v1/statistics?until=-inf", "until"),
    ("/api/v1/account?since=1e308", "since"),
    ("/api/v1/clusters?week_start=nan", "week_start"),
    ("/api/v1/account?days=100000000", "days"),
    ("/api/v1/statistics?days=99999999999999999999", "days"),
]


@pytest.mark.parametrize(("path", "field"), QUERIES)
def test_non_finite_and_huge_query_values_get_400(path: str, field: str) -> None:
    from webutil import call

    response = call(_QUERY_APP, "GET", path)
    assert response.status_code == 400, response.text
    assert field in response.json()["error"]["message"]


_QUERY_APP = _app()


def test_pages_hold_with_values_past_what_sums_and_recursion_take(tmp_path: Path) -> None:
    # Written straight to the store (the wire refuses such values now): two clusters whose
    # core seconds overflow a float sum, and a chain of 3,000 nested spans
    from factories import make_cluster, make_span
    from webutil import call

    url = f"sqlite:///{tmp_path / 'extreme.db'}"
    huge = [
        make_cluster("h", start=1.8e9, id=f"huge-{i}", account="default", core_seconds=1.7e308)
        for i in (1, 2)
    ]
    spans = [
        make_span(
            "huge-1",
            f"s{i}",
            id=f"s{i}",
            parent_span_id=f"s{i - 1}" if i else None,
            name=["deep"],
            enqueued_at=1.8e9 + i,
        )
        for i in range(3000)
    ]
    with open_store(url) as store:
        write_records(store, [*huge, *spans])
    app = create_app(url)
    for path in ("/", "/api/v1/account?days=0", "/api/v1/statistics?days=0",
                 "/api/v1/usage", "/clusters/huge-1", "/api/v1/clusters/huge-1"):  # fmt: skip
        response = call(app, "GET", path)
        assert response.status_code == 200, (path, response.text[:300])
    assert len(call(app, "GET", "/api/v1/clusters/huge-1").json()["spans"]) == 3000
