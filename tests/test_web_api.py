"""The dashboard's JSON API (and its HTML pages' status codes) through the in-process
ASGI client, against a store filled by a real recorded cluster plus synthetic history."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import dask.config
import pytest
from click.testing import CliRunner

from daskscope.analysis import fine_metrics_table
from daskscope.cli.main import cli
from daskscope.store import cluster_detail, list_clusters, open_store, write_records
from daskscope.store.analytics import span_rows
from factories import make_workflow_chunk, make_workflow_run
from webutil import EXPLODE_MESSAGE, USERS, call, monday, record_cluster, synthetic_clusters

pytest.importorskip("fastapi")
from daskscope.web import create_app


@pytest.fixture(scope="module")
def filled(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    path = tmp_path_factory.mktemp("web-api") / "daskscope.db"
    url = f"sqlite:///{path}"
    cluster_id = record_cluster(url)
    now = time.time()
    synthetic = synthetic_clusters(now)
    with open_store(url) as store:
        write_records(store, synthetic)
    app = create_app(url)
    yield {"url": url, "app": app, "cluster_id": cluster_id, "now": now, "synthetic": synthetic}
    app.state.store.close()


def get(app: Any, url: str, status: int = 200) -> Any:
    response = call(app, "GET", url)
    assert response.status_code == status, response.text
    return response


def test_statistics_are_the_stored_totals(filled: dict[str, Any]) -> None:
    rows = list_clusters(filled["app"].state.store, limit=None)
    stats = get(filled["app"], "/api/v1/statistics?days=0").json()["statistics"]
    assert stats["clusters"] == len(rows) == len(filled["synthetic"]) + 1
    for key in ("tasks_executed", "tasks_erred", "bytes_processed"):
        assert stats[key] == sum(r[key] for r in rows)
    for key in ("core_seconds", "compute_seconds"):
        assert stats[key] == pytest.approx(sum(r[key] for r in rows))
    assert stats["cluster_seconds"] == pytest.approx(sum(r["duration_s"] for r in rows))
    # Cost by hand from the shipped default rates: 0.04/core-hour + 0.005/GiB-hour.
    expected = sum(
        r["core_seconds"] / 3600 * 0.04 + r["memory_limit_byte_seconds"] / 2**30 / 3600 * 0.005
        for r in rows
    )
    assert stats["cost"] == pytest.approx(expected)
    assert stats["cost_basis"][0]["per_core_hour"] == 0.04


def test_statistics_time_range(filled: dict[str, Any]) -> None:
    # Only the real cluster started in the last day.
    stats = get(filled["app"], "/api/v1/statistics?days=1").json()["statistics"]
    assert stats["clusters"] == 1
    since = monday(filled["now"]) - 7 * 86400
    ranged = get(filled["app"], f"/api/v1/statistics?since={since}&until={since + 7 * 86400}")
    assert ranged.json()["statistics"]["clusters"] == len(USERS)
    get(filled["app"], f"/api/v1/statistics?since={since}&until={since}", status=400)


def test_weekly_usage_bins_match_the_calendar(filled: dict[str, Any]) -> None:
    usage = get(filled["app"], "/api/v1/usage?weeks=8").json()
    expected: dict[tuple[str, float], float] = {}
    for c in filled["synthetic"]:
        key = (c.user, monday(c.started_at))
        expected[key] = expected.get(key, 0.0) + (c.stopped_at - c.started_at) / 3600
    members = {m["user"]: m for m in usage["members"]}
    assert set(USERS) <= set(members)
    for (user, week), hours in expected.items():
        i = usage["weeks"].index(week)
        assert members[user]["cluster_hours"][i] == pytest.approx(hours)
        assert members[user]["cost"][i] == pytest.approx(4 * 0.04 + 8 * 0.005)
    # carol skipped every other week
    assert 0.0 in members["carol"]["cluster_hours"]


def test_listing_filtered_by_member_and_week(filled: dict[str, Any]) -> None:
    week = monday(filled["now"]) - 2 * 7 * 86400
    body = get(filled["app"], f"/api/v1/clusters?user=bob&week_start={week}").json()
    wanted = [c.id for c in filled["synthetic"] if c.user == "bob" and monday(c.started_at) == week]
    assert [c["id"] for c in body["clusters"]] == wanted
    cost = body["clusters"][0]["statistics"]["cost"]
    assert cost["total"] == pytest.approx(4 * 0.04 + 8 * 0.005)
    everything = get(filled["app"], "/api/v1/clusters").json()["clusters"]
    assert everything[0]["id"] == filled["cluster_id"]  # newest first
    assert len(everything) == len(filled["synthetic"]) + 1


def test_account_json_twin(filled: dict[str, Any]) -> None:
    body = get(filled["app"], "/api/v1/account?days=0").json()
    assert set(body) == {"range", "statistics", "usage", "listing"}
    page = get(filled["app"], "/?days=0")
    assert f'data-id="{filled["cluster_id"]}"' in page.text
    # the heat map is HTML from the server: no chart library, nothing from a CDN
    assert "plotly" not in page.text and "cdn" not in page.text.lower()


def test_cluster_detail(filled: dict[str, Any]) -> None:
    cid = filled["cluster_id"]
    body = get(filled["app"], f"/api/v1/clusters/{cid[:8]}").json()
    assert body["cluster"]["id"] == cid
    assert body["statistics"]["tasks_erred"] >= 1
    names = {tuple(s["name"]): s["depth"] for s in body["spans"]}
    assert names[("data load",)] == 0 and names[("data load", "inner")] == 1
    assert {"data load", "inner", "work"} <= set(body["span_tags"])
    assert any(EXPLODE_MESSAGE in e["exception"] for e in body["errors"])
    assert all(c["code"] for c in body["computations"])
    assert body["task_prefixes"] and body["fine_metrics"]
    page = get(filled["app"], f"/clusters/{cid}")
    assert 'class="code"' in page.text and "map_blocks" in page.text


def test_cluster_page_sums_in_the_database_what_python_would(filled: dict[str, Any]) -> None:
    # The view reads fine metrics summed by SQL and only the groups' names; every row,
    # summed in Python, must tell the same story.
    cid = filled["cluster_id"]
    body = get(filled["app"], f"/api/v1/clusters/{cid}").json()
    store = filled["app"].state.store
    full = cluster_detail(store, cid)
    _, span_metrics = span_rows(store, cid)
    expected = fine_metrics_table(span_metrics)
    assert len(expected) > 5
    assert [(r["activity"], r["prefix"], r["unit"]) for r in body["fine_metrics"]] == [
        (r["activity"], r["prefix"], r["unit"]) for r in expected
    ]
    assert [r["value"] for r in body["fine_metrics"]] == pytest.approx(
        [r["value"] for r in expected]
    )
    groups_by_computation: dict[str, list[str]] = {}
    for group in full["task_groups"]:
        groups_by_computation.setdefault(group["computation_id"], []).append(group["name"])
    assert body["computations"]
    for comp in body["computations"]:
        assert comp["task_groups"] == groups_by_computation.get(comp["id"], [])


def test_fine_metrics_by_tag(filled: dict[str, Any]) -> None:
    base = f"/api/v1/clusters/{filled['cluster_id']}/metrics"
    everything = get(filled["app"], base).json()["metrics"]
    loaded = get(filled["app"], base + "?tag=data%20load").json()["metrics"]
    inner = get(filled["app"], base + "?tag=inner").json()["metrics"]
    seconds = lambda rows: sum(r["value"] for r in rows if r["unit"] == "seconds")  # noqa: E731
    assert 0 < seconds(inner) <= seconds(loaded) < seconds(everything)
    assert get(filled["app"], base + "?tag=no-such-tag").json()["metrics"] == []


def _failing_computation(app: Any, cluster_id: str) -> dict[str, Any]:
    detail = get(app, f"/api/v1/clusters/{cluster_id}").json()
    return next(c for c in detail["computations"] if c["tasks_erred"])


def test_task_group_graph(filled: dict[str, Any]) -> None:
    cid = filled["cluster_id"]
    comp = _failing_computation(filled["app"], cid)
    graph = get(filled["app"], f"/api/v1/clusters/{cid}/computations/{comp['id']}/graph").json()
    assert sorted(n["name"] for n in graph["nodes"]) == sorted(comp["task_groups"])
    failed = [n for n in graph["nodes"] if n["failed"]]
    assert len(failed) == 1 and failed[0]["tasks_erred"] >= 1
    x = {n["name"]: n["x"] for n in graph["nodes"]}
    assert graph["edges"] and all(x[e["source"]] < x[e["target"]] for e in graph["edges"])
    get(filled["app"], f"/api/v1/clusters/{cid}/computations/nope/graph", status=404)


def test_profile_flame_graph(filled: dict[str, Any]) -> None:
    cid = filled["cluster_id"]
    body = get(filled["app"], f"/api/v1/clusters/{cid}/profile").json()
    assert body["windows"] >= 1 and body["samples"] > 0
    assert body["parents"][0] == "" and body["ids"][0] == "all"
    value = dict(zip(body["ids"], body["values"], strict=True))
    children: dict[str, int] = {}
    for node, parent in zip(body["ids"], body["parents"], strict=True):
        if parent:
            children[parent] = children.get(parent, 0) + value[node]
    for i, node in enumerate(body["ids"]):
        assert value[node] >= children.get(node, 0)
        assert body["self_s"][i] == pytest.approx((value[node] - children.get(node, 0)) * 0.01)
    assert "busy" in body["labels"]
    comp = _failing_computation(filled["app"], cid)
    scoped = get(filled["app"], f"/api/v1/clusters/{cid}/profile?computation={comp['id']}")
    assert scoped.json()["computation"] == comp["id"]


def test_workers_over_time(filled: dict[str, Any]) -> None:
    body = get(filled["app"], f"/api/v1/clusters/{filled['cluster_id']}/workers").json()
    assert len(body["workers"]) == 2
    for series in body["workers"].values():
        assert len(series["t"]) == len(series["memory"]) >= 1
    assert any(e["kind"] == "worker-added" for e in body["events"])


def test_unknown_ids_are_404_page_and_json(filled: dict[str, Any]) -> None:
    app = filled["app"]
    page = get(app, "/clusters/0000ffff-no-such-cluster", status=404)
    assert "text/html" in page.headers["content-type"] and "no cluster with id" in page.text
    assert "account page lists the clusters" in page.text  # the web's hint, with a link
    assert 'href="/"' in page.text and "daskscope clusters" not in page.text
    body = get(app, "/api/v1/clusters/0000ffff-no-such-cluster", status=404).json()
    assert body["error"]["status"] == 404 and "no cluster" in body["error"]["message"]
    assert body["error"]["cluster_id"] == "0000ffff-no-such-cluster"  # the error's data
    assert get(app, "/api/v1/reports/" + "0" * 32, status=404).json()["error"]["status"] == 404
    get(app, "/reports/" + "0" * 32, status=404)
    get(app, "/runs/1", status=404)
    get(app, "/no/such/page", status=404)
    assert get(app, "/api/v1/statistics?days=-1", status=400).json()["error"]["status"] == 400


def test_every_page_has_a_json_twin_in_openapi(filled: dict[str, Any]) -> None:
    paths = set(get(filled["app"], "/openapi.json").json()["paths"])
    for path in (
        "/api/v1/account",
        "/api/v1/clusters/{cluster_id}",
        "/api/v1/runs",
        "/api/v1/runs/{run_id}",
        "/api/v1/reports",
        "/api/v1/reports/{report_id}",
    ):
        assert path in paths
    assert not any(p.startswith("/clusters") for p in paths)  # pages stay out of the API doc


def test_plotly_is_served_by_the_app(filled: dict[str, Any]) -> None:
    response = get(filled["app"], "/assets/plotly.min.js")
    assert response.headers["content-type"].startswith("text/javascript")
    assert len(response.content) > 1_000_000


def test_runs_empty_state(filled: dict[str, Any]) -> None:
    listed = get(filled["app"], "/api/v1/runs").json()
    assert (listed["runs"], listed["total"]) == ([], 0)
    assert listed["message"] == "no workflow runs recorded yet"
    assert "No workflow runs recorded yet" in get(filled["app"], "/runs").text


# What distributed.performance_report writes, in brief (uploads must look like one)
REPORT = (
    b"<html><head><title>Dask Performance Report</title></head><body><h1>report</h1>"
    b"<script type=\"application/json\">{}</script><script>document.title = 'x';</script>"
    b"</body></html>"
)


def test_report_upload_list_and_sandboxed_raw(filled: dict[str, Any]) -> None:
    app, cid = filled["app"], filled["cluster_id"]
    response = call(
        app,
        "POST",
        "/api/v1/reports",
        files={"file": ("dask-report.html", REPORT, "text/html")},
        data={"cluster": cid[:8]},
    )
    assert response.status_code == 201, response.text
    info = response.json()
    assert info["cluster_id"] == cid and info["size"] == len(REPORT)
    listed = get(app, "/api/v1/reports").json()["reports"]
    assert info["id"] in [r["id"] for r in listed]
    raw = get(app, f"/reports/{info['id']}/raw")
    assert raw.content == REPORT
    csp = raw.headers["content-security-policy"]
    assert csp.startswith("sandbox allow-scripts;") and "allow-same-origin" not in csp
    assert "default-src 'none'" in csp
    page = get(app, f"/reports/{info['id']}").text
    assert 'sandbox="allow-scripts"' in page and "allow-same-origin" not in page
    # the file lives next to the SQLite file
    db = Path(filled["url"].removeprefix("sqlite:///"))
    assert (db.parent / "reports" / f"{info['id']}.html").read_bytes() == REPORT


def test_oversized_report_is_413(filled: dict[str, Any]) -> None:
    with dask.config.set({"daskscope.max-report-bytes": 1000}):
        big = b"<html>" + b"x" * 2000 + b"</html>"
        response = call(filled["app"], "POST", "/api/v1/reports", files={"file": ("big.html", big)})
        assert response.status_code == 413
        assert response.json()["error"]["status"] == 413
        huge = b"x" * 200_000  # past the limit plus the envelope: refused before parsing
        response = call(filled["app"], "POST", "/reports", files={"file": ("huge.html", huge)})
        assert response.status_code == 413 and "text/html" in response.headers["content-type"]


def test_upload_report_command(filled: dict[str, Any], tmp_path: Path) -> None:
    report = tmp_path / "dask-report.html"
    report.write_bytes(REPORT)
    result = CliRunner().invoke(
        cli, ["--database", filled["url"], "upload-report", str(report), "--cluster", "0000"]
    )
    assert result.exit_code == 2 and "no cluster" in result.output
    result = CliRunner().invoke(
        cli,
        ["--database", filled["url"], "upload-report", str(report), "--cluster",
         filled["cluster_id"]],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    report_id = result.output.split()[1]
    assert get(filled["app"], f"/api/v1/reports/{report_id}").json()["name"] == report.name
    # a file that is not a performance report is refused, as by the page, and not stored
    before = get(filled["app"], "/api/v1/reports").json()
    script = tmp_path / "analysis.py"
    script.write_text("import dask\n")
    result = CliRunner().invoke(cli, ["--database", filled["url"], "upload-report", str(script)])
    assert result.exit_code == 2 and "not a Dask performance report" in result.output
    assert get(filled["app"], "/api/v1/reports").json() == before


def test_empty_store(tmp_path: Path) -> None:
    app = create_app(f"sqlite:///{tmp_path / 'empty.db'}")
    body = get(app, "/api/v1/account").json()
    assert body["statistics"]["clusters"] == 0 and body["listing"]["clusters"] == []
    assert body["usage"]["members"] == []
    assert "No clusters recorded yet" in get(app, "/").text
    assert "No performance reports uploaded yet" in get(app, "/reports").text
    app.state.store.close()


def test_workflow_run_pages(filled: dict[str, Any], tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    run = make_workflow_run(
        filled["cluster_id"],
        id="run-0001-web",
        name="web test run",
        backend="local",
        started_at=filled["now"],
        stopped_at=filled["now"] + 10,
        chunk_count=2,
        metrics={"events": 2000, "event_rate_wall_hz": 200.0},
    )
    chunks = [
        make_workflow_chunk(run, i, id=f"chunk-{i}", cluster_id=None, events=1000, wall_s=4.0 + i)
        for i in range(2)
    ]
    with open_store(url) as store:
        write_records(store, [run, *chunks])
    app = create_app(url)
    try:
        listed = get(app, "/api/v1/runs").json()
        assert [r["id"] for r in listed["runs"]] == [run.id] and listed["message"] is None
        detail = get(app, "/api/v1/runs/run-0001").json()
        assert [c["chunk_index"] for c in detail["chunks"]] == [0, 1]
        page = get(app, f"/runs/{run.id}").text
        assert "event_rate_wall_hz" in page and f"/clusters/{filled['cluster_id']}" in page
        assert "web test run" in get(app, "/runs").text
        get(app, "/api/v1/runs/nope-nope", status=404)
    finally:
        app.state.store.close()
