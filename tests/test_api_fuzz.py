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
