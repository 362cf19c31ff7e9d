"""One shape per concept: the CLI's ``--json`` and the JSON API encode the same views,
OpenAPI describes them, and store errors carry their data to both."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from daskscope.cli.main import JSON_GROUPS, cli
from daskscope.store import AmbiguousCluster, UnknownCluster, open_store, write_records
from daskscope.views import (
    AccountView,
    ClusterListing,
    ClusterView,
    ComputationGraph,
    GroupPage,
    cluster_view,
    to_data,
)
from daskscope.views.computation_page import CriticalPathPage
from test_cli import CLUSTER_ID, _records
from webutil import call

pytest.importorskip("fastapi")
from daskscope.web import create_app

TWIN = CLUSTER_ID[:8] + "-twin"


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Any:
    url = f"sqlite:///{tmp_path_factory.mktemp('views') / 'views.db'}"
    records = _records()
    twin = dataclasses.replace(
        records[0], id=TWIN, name="twin", started_at=records[0].started_at - 1
    )
    with open_store(url) as store:
        write_records(store, [*records, twin])
    app = create_app(url)
    yield {"url": url, "app": app}
    app.state.store.close()


def cli_json(site: dict[str, Any], *args: str) -> Any:
    result = CliRunner().invoke(cli, ["--database", site["url"], *args], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def api_json(site: dict[str, Any], url: str, status: int = 200) -> Any:
    response = call(site["app"], "GET", url)
    assert response.status_code == status, response.text
    return response.json()


def test_show_json_is_the_apis_json(site: dict[str, Any]) -> None:
    shown = cli_json(site, "show", CLUSTER_ID, "--json")
    answered = api_json(site, f"/api/v1/clusters/{CLUSTER_ID}?groups={JSON_GROUPS}")
    assert shown == answered
    assert shown["cluster"]["id"] == CLUSTER_ID and shown["task_groups"][0]["name"] == "mean-abc"
    # the page's default carries no full group rows, and says nothing else differently
    default = api_json(site, f"/api/v1/clusters/{CLUSTER_ID}")
    assert default["task_groups"] == [] and default["task_group_summary"]["selection"] == "longest"
    assert shown["task_group_summary"]["selection"] is None  # all of them
    for body in (default, shown):
        del body["task_groups"], body["task_group_summary"]["selection"]
    assert default == shown


def test_clusters_json_is_the_apis_listing(site: dict[str, Any]) -> None:
    listed = cli_json(site, "clusters", "--json")
    assert listed == api_json(site, "/api/v1/clusters?limit=50")
    assert [c["id"] for c in listed["clusters"]] == [CLUSTER_ID, TWIN]  # newest first
    # the account page lists the same summaries
    account = api_json(site, "/api/v1/account?days=0")
    assert account["listing"]["clusters"] == listed["clusters"]


def test_the_view_computes_duration_and_statistics_once(site: dict[str, Any]) -> None:
    view = cluster_view(site["app"].state.store, CLUSTER_ID)
    assert view.cluster.duration_s == view.statistics.duration_s == 3600.0
    assert view.statistics.utilisation == 0.25
    assert view.statistics.cost is not None and view.statistics.cost.total == pytest.approx(0.2)
    (comp,) = view.computations
    assert comp.duration_s == 10.0 and comp.code_note is None
    assert [s.depth for s in view.spans] == [0, 1]
    # the root's seconds by activity cover its subtree; the child's are its own
    assert view.spans[0].seconds_by_activity == {"thread-cpu": 7.0}
    assert view.spans[1].seconds_by_activity == {}
    data = to_data(view)
    assert data["statistics"]["cost"]["currency"] == "USD"
    assert set(data) == {f.name for f in dataclasses.fields(ClusterView)}


@pytest.mark.parametrize(
    ("path", "view"),
    [
        ("/api/v1/clusters/{cluster_id}", ClusterView),
        ("/api/v1/clusters", ClusterListing),
        ("/api/v1/account", AccountView),
        ("/api/v1/clusters/{cluster_id}/computations/{computation_id}/graph", ComputationGraph),
        (
            "/api/v1/clusters/{cluster_id}/computations/{computation_id}/critical-path",
            CriticalPathPage,
        ),
        ("/api/v1/clusters/{cluster_id}/task-groups", GroupPage),
    ],
)
def test_openapi_describes_the_views(site: dict[str, Any], path: str, view: type) -> None:
    spec = api_json(site, "/openapi.json")
    content = spec["paths"][path]["get"]["responses"]["200"]["content"]["application/json"]
    name = content["schema"]["$ref"].rsplit("/", 1)[1]
    assert name == view.__name__
    schema = spec["components"]["schemas"][name]
    assert set(schema["properties"]) == {f.name for f in dataclasses.fields(view)}
    if view is ClusterView:  # nested views are described too
        stats = spec["components"]["schemas"]["ClusterStatistics"]["properties"]
        assert {"duration_s", "utilisation", "cost"} <= set(stats)


def test_store_errors_carry_their_data(site: dict[str, Any]) -> None:
    from daskscope.store import resolve_cluster_id

    store = site["app"].state.store
    with pytest.raises(UnknownCluster) as unknown:
        resolve_cluster_id(store, "ffffffff")
    assert unknown.value.cluster_id == "ffffffff"
    assert str(unknown.value) == "no cluster with id 'ffffffff'"  # the fact, no CLI hint
    with pytest.raises(AmbiguousCluster) as ambiguous:
        resolve_cluster_id(store, CLUSTER_ID[:6])
    assert ambiguous.value.prefix == CLUSTER_ID[:6]
    assert ambiguous.value.matches == sorted([CLUSTER_ID, TWIN])
    assert "--" not in str(ambiguous.value) and "daskscope" not in str(ambiguous.value)


def test_the_web_adds_its_own_hints(site: dict[str, Any]) -> None:
    error = api_json(site, f"/api/v1/clusters/{CLUSTER_ID[:6]}", status=400)["error"]
    assert error["prefix"] == CLUSTER_ID[:6] and set(error["matches"]) == {CLUSTER_ID, TWIN}
    assert "matches several clusters" in error["message"]
    page = call(site["app"], "GET", f"/clusters/{CLUSTER_ID[:6]}")
    assert page.status_code == 400 and "Give more of the id" in page.text
    missing = call(site["app"], "GET", "/clusters/ffffffff")
    assert missing.status_code == 404 and "no cluster with id" in missing.text
    assert "account page lists the clusters" in missing.text and "`daskscope" not in missing.text


def test_cli_views_render_in_the_tables(site: dict[str, Any], tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["--database", site["url"], "clusters"], terminal_width=200)
    assert result.exit_code == 0, result.output
    assert "twin" in result.stdout and "0.2000 USD" in result.stdout


def test_a_task_group_reads_the_same_in_show_and_in_the_paged_route(site: dict[str, Any]) -> None:
    shown = cli_json(site, "show", CLUSTER_ID, "--json")["task_groups"]
    paged = api_json(site, f"/api/v1/clusters/{CLUSTER_ID}/task-groups")
    assert paged["groups"] == shown and paged["total"] == 1 and paged["next"] is None
