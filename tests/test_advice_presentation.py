"""The advice on every presentation (issue 14): the API, ``daskscope advise --json``
(equal to the API), the text of the CLI, and Chromium reading the advice box on the
cluster page, in a computation's expanded row and on the run page."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import dask
import pytest
from click.testing import CliRunner
from dask import delayed
from distributed import Client, LocalCluster

import daskscope
from browser import SCREENSHOTS, needs_chromium, new_page
from daskscope.cli.main import cli
from daskscope.store import cluster_detail, open_store, write_records
from daskscope.web import create_app
from factories import make_workflow_run
from webutil import serving


def slow(x: int, seconds: float) -> int:
    time.sleep(seconds)
    return x


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """A real cluster: a computation of 2 tasks of 1.1 s on 4 threads (too few tasks),
    then a healthy one; and a workflow run over the first computation."""
    url = f"sqlite:///{tmp_path_factory.mktemp('advice-pages') / 'advice.db'}"
    with (
        dask.config.set({"daskscope.flush-interval": "1h"}),
        LocalCluster(
            n_workers=2, threads_per_worker=2, processes=False, dashboard_address=":0"
        ) as cluster,
        Client(cluster) as client,
    ):
        cluster_id = daskscope.register(client, database=url)
        dask.compute(*[delayed(slow)(i, 1.1) for i in range(2)])
        dask.compute(*[delayed(slow)(i, 0.05) for i in range(8)])
        assert daskscope.flush(client)["write_failures"] == 0
    store = open_store(url)
    few, healthy = sorted(cluster_detail(store, cluster_id)["computations"],
                          key=lambda c: c["started_at"])  # fmt: skip
    run = make_workflow_run(cluster_id, id="run-advice-1", computation_ids=[few["id"]])
    write_records(store, [run])
    app = create_app(url)
    with serving(app) as base:
        yield {"url": url, "app": app, "base": base, "cluster_id": cluster_id,
               "few": few["id"], "healthy": healthy["id"], "run_id": run.id}  # fmt: skip
    app.state.store.close()
    store.close()


def api(site: dict[str, Any], path: str) -> Any:
    """The served app's JSON (a real server: the browser tests run inside an event loop)."""
    import httpx

    response = httpx.get(site["base"] + path, timeout=30)
    assert response.status_code == 200, response.text
    return response.json()


def cli_json(site: dict[str, Any], *args: str) -> Any:
    result = CliRunner().invoke(cli, ["--database", site["url"], "advise", *args, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def test_api_and_cli_json_agree(site: dict[str, Any]) -> None:
    cid = site["cluster_id"]
    cluster = api(site, f"/api/v1/clusters/{cid}/advice")
    assert cluster == cli_json(site, cid)
    few = api(site, f"/api/v1/clusters/{cid}/advice?computation={site['few'][:10]}")
    assert few == cli_json(site, cid, "--computation", site["few"][:10])
    assert few["scope"] == "computation" and few["computation_id"] == site["few"]
    (advice,) = [a for a in few["advice"] if a["rule"] == "too-few-tasks"]
    widest = advice["evidence"][0]
    assert widest["value"] == 2 and widest["threshold"] == 4
    assert widest["value_text"] == "2" and widest["threshold_text"] == "4"
    healthy = api(site, f"/api/v1/clusters/{cid}/advice?computation={site['healthy']}")
    assert "too-few-tasks" not in {a["rule"] for a in healthy["advice"]}
    run = api(site, f"/api/v1/runs/{site['run_id']}/advice")
    assert run == cli_json(site, "--run", site["run_id"])
    assert run["scope"] == "run" and "too-few-tasks" in {a["rule"] for a in run["advice"]}


def test_bad_input_says_what_to_do(site: dict[str, Any]) -> None:
    import httpx

    cid = site["cluster_id"]
    response = httpx.get(
        f"{site['base']}/api/v1/clusters/{cid}/advice?computation=nope", timeout=60
    )
    assert response.status_code == 404 and "Computations tab" in response.text
    result = CliRunner().invoke(cli, ["--database", site["url"], "advise"])
    assert result.exit_code == 2 and "give a CLUSTER, or --run RUN" in result.output


def test_cli_text_names_the_finding(site: dict[str, Any]) -> None:
    result = CliRunner().invoke(
        cli, ["--database", site["url"], "advise", site["cluster_id"], "--computation",
              site["few"]],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "Too few tasks for the cluster's threads" in result.output
    assert "WARNING" in result.output and "(threshold 4)" in result.output


def _box_text(page: Any, selector: str) -> dict[str, Any]:
    page.wait_for_function(
        "s => document.querySelector(s)?.dataset.filled === 'done'", arg=selector
    )
    box = page.locator(selector)
    return {
        "summary": box.locator(".advice-summary").inner_text(),
        "rules": box.locator(".advice-item").evaluate_all("els => els.map(e => e.dataset.rule)"),
        "text": box.inner_text(),
    }


@needs_chromium
@pytest.mark.parametrize("width,height", [(1440, 900), (390, 844)])
def test_the_box_on_the_cluster_page_and_a_computation_row(
    site: dict[str, Any], browser: Any, width: int, height: int
) -> None:
    context, page, errors = new_page(browser, width, height)
    cid = site["cluster_id"]
    page.goto(f"{site['base']}/clusters/{cid}")
    box = _box_text(page, "#panel-overview .advice-box")
    expected = api(site, f"/api/v1/clusters/{cid}/advice")
    assert box["rules"] == [a["rule"] for a in expected["advice"]]
    assert "too-few-tasks" in box["rules"]
    assert "Too few tasks for the cluster's threads" in box["text"]
    assert "Tasks in its widest group" in box["text"] and "(threshold 4)" in box["text"]
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.locator("#panel-overview .advice-box").screenshot(
        path=str(SCREENSHOTS / f"advice-cluster-{width}.png")
    )
    # the healthy computation's row: its own advice, without the other's finding
    page.click("#tab-computations")
    page.click(f"tr.computation[data-id='{site['healthy']}']")
    row_box = f"tr.computation-detail[data-id='{site['healthy']}'] .advice-box"
    healthy = _box_text(page, row_box)
    assert "too-few-tasks" not in healthy["rules"]
    expected = api(site, f"/api/v1/clusters/{cid}/advice?computation={site['healthy']}")
    if expected["advice"]:
        assert healthy["rules"] == [a["rule"] for a in expected["advice"]]
    else:
        n = expected["rules_checked"]
        assert healthy["summary"] == f"No advice: none of {n} rules found anything."
    page.click(f"tr.computation[data-id='{site['few']}']")
    few_box = f"tr.computation-detail[data-id='{site['few']}'] .advice-box"
    few = _box_text(page, few_box)
    assert "too-few-tasks" in few["rules"]
    page.locator(few_box).screenshot(path=str(SCREENSHOTS / f"advice-computation-row-{width}.png"))
    # nothing wider than the viewport
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    context.close()
    assert not errors, errors


@needs_chromium
def test_the_box_on_the_run_page(site: dict[str, Any], browser: Any) -> None:
    for width, height in ((1440, 900), (390, 844)):
        context, page, errors = new_page(browser, width, height)
        page.goto(f"{site['base']}/runs/{site['run_id']}")
        box = _box_text(page, "#run-advice .advice-box")
        assert "too-few-tasks" in box["rules"]
        assert box["summary"].endswith("most severe first.")
        page.locator("#run-advice").screenshot(path=str(SCREENSHOTS / f"advice-run-{width}.png"))
        # the box fits the viewport (the run page's figure tables are its own matter)
        right = page.locator("#run-advice").evaluate("e => e.getBoundingClientRect().right")
        assert right <= width
        context.close()
        assert not errors, errors


def test_advice_on_sqlite_and_postgresql(database_url: str) -> None:
    """The same real workload recorded into either store gives the same finding, through
    the API and the CLI alike."""
    with (
        dask.config.set({"daskscope.flush-interval": "1h"}),
        LocalCluster(
            n_workers=2, threads_per_worker=2, processes=False, dashboard_address=":0"
        ) as cluster,
        Client(cluster) as client,
    ):
        cluster_id = daskscope.register(client, database=database_url)
        dask.compute(*[delayed(slow)(i, 1.1) for i in range(3)])
        assert daskscope.flush(client)["write_failures"] == 0
    import httpx

    app = create_app(database_url)
    try:  # a served app: the browser tests' event loop may still run in this thread
        with serving(app) as base:
            response = httpx.get(f"{base}/api/v1/clusters/{cluster_id}/advice", timeout=30)
        assert response.status_code == 200, response.text
        view = response.json()
    finally:
        app.state.store.close()
    (advice,) = [a for a in view["advice"] if a["rule"] == "too-few-tasks"]
    assert [e["value"] for e in advice["evidence"][:2]] == [3, 4]
    result = CliRunner().invoke(cli, ["--database", database_url, "advise", cluster_id, "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output) == view
