"""Issue 24: paging is one query-parameter type on every route (``web/routes/common.py``
``Offset`` and ``Limit``). ``offset`` at or past 2^63 answered 500 on ``/api/v1/runs``
and ``/api/v1/clusters/{id}/task-groups`` (the databases take a 64-bit OFFSET); now any
value out of range is a 400 naming the parameter, on SQLite and PostgreSQL alike, and
the largest value taken runs its query."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.routing import APIRoute

from daskscope.store import open_store, write_records
from daskscope.store.queries import MAX_OFFSET, MAX_PAGE
from daskscope.web import create_app
from factories import one_of_each_kind
from webutil import call

PAGING = {"offset", "limit"}
REFUSED = [
    ("offset", str(2**63)),
    ("offset", str(2**64)),
    ("offset", str(MAX_OFFSET + 1)),
    ("offset", "-1"),
    ("offset", "1e3"),
    ("limit", str(2**63)),
    ("limit", str(MAX_PAGE + 1)),
    ("limit", "0"),
]


def query_names(dependant: Any) -> set[str]:
    """The query parameters of a route, its dependencies' included."""
    names = {p.name for p in dependant.query_params}
    for sub in dependant.dependencies:
        names |= query_names(sub)
    return names


def api_routes(routes: list[Any], prefix: str = "") -> Iterator[tuple[str, APIRoute]]:
    """Every route of the app with its full path, through included routers (which
    FastAPI keeps as routers of their own since 0.16x)."""
    for route in routes:
        inner = getattr(route, "original_router", None)
        if inner is not None:
            yield from api_routes(inner.routes, prefix + route.include_context.prefix)
        elif isinstance(route, APIRoute):
            yield prefix + route.path, route


def paged_routes(app: Any) -> dict[str, set[str]]:
    """Every GET route (pages and API) with a paging parameter: path → its names."""
    found = {}
    for path, route in api_routes(app.routes):
        if "GET" in route.methods:
            names = query_names(route.dependant)
            if names & PAGING:
                found[path] = names & PAGING
    return found


@pytest.fixture
def app_with_records(database_url: str) -> Any:
    records = one_of_each_kind()
    with open_store(database_url) as store:
        write_records(store, records)
    app = create_app(database_url)
    yield app, records[0].id
    app.state.store.close()


def test_every_paged_route_is_known() -> None:
    # the routes this file sends out-of-range values to; a new paged route shows here
    app = create_app("sqlite://")
    assert set(paged_routes(app)) >= {
        "/",
        "/runs",
        "/api/v1/clusters",
        "/api/v1/runs",
        "/api/v1/clusters/{cluster_id}/task-groups",
        "/audit",
        "/api/v1/audit",
    }


def test_every_paging_parameter_has_the_same_bounds() -> None:
    schema = create_app("sqlite://").openapi()
    seen = 0
    for path, operations in schema["paths"].items():
        for operation in operations.values():
            for parameter in operation.get("parameters", []):
                if parameter["name"] not in PAGING or parameter["in"] != "query":
                    continue
                seen += 1
                bounds = parameter["schema"]
                expected = (0, MAX_OFFSET) if parameter["name"] == "offset" else (1, MAX_PAGE)
                assert (bounds["minimum"], bounds["maximum"]) == expected, (path, parameter)
    assert seen >= 5


def test_out_of_range_paging_is_400_on_every_route(app_with_records: Any) -> None:
    app, cluster_id = app_with_records
    (computation_id,) = (r.id for r in one_of_each_kind() if r.KIND == "computation")
    # the query parameters a route needs besides its paging
    needed = {"/history": "kind=span&name=load&", "/api/v1/history": "kind=span&name=load&"}
    for path, names in paged_routes(app).items():
        url = re.sub(r"\{cluster_id\}", cluster_id, path)
        url = url.replace("{computation_id}", computation_id)
        assert "{" not in url, f"{path}: give this path parameter a value here"
        url += "?" + needed.get(path, "")
        for name, value in REFUSED:
            if name not in names:
                continue
            response = call(app, "GET", f"{url}{name}={value}")
            assert response.status_code == 400, (path, name, value, response.text[:300])
            if path.startswith("/api/"):
                assert f"query.{name}" in response.json()["error"]["message"]
            else:
                assert name in response.text
        if "{computation_id}" in path:
            continue  # its view decodes the task log, which these records fake
        # the largest values taken run their query on the database
        asked = "&".join(f"{n}={MAX_OFFSET if n == 'offset' else MAX_PAGE}" for n in names)
        response = call(app, "GET", f"{url}{asked}")
        assert response.status_code == 200, (path, response.text[:300])


def test_the_runs_and_task_groups_routes_of_the_issue(app_with_records: Any) -> None:
    app, cluster_id = app_with_records
    for url in ("/api/v1/runs", f"/api/v1/clusters/{cluster_id}/task-groups"):
        response = call(app, "GET", f"{url}?offset={2**63}")
        assert response.status_code == 400, response.text
        message = response.json()["error"]["message"]
        assert message == f"query.offset: Input should be less than or equal to {MAX_OFFSET}"
        assert call(app, "GET", f"{url}?offset=1").status_code == 200
