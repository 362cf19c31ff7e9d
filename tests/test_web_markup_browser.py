"""Issue 10, point 9: what a cluster sends is text on every page. A real cluster whose
task key (and so its prefix and group), profiled function and file, worker name and user
are plotly markup is drawn in Chromium: no link or bold text appears in any chart, and
the markup shows literally. And a report opened at its raw URL can neither navigate the
tab nor reach the API. Screenshots go to test-artifacts/."""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dask
import pytest
from distributed import Client, LocalCluster

import daskscope
from browser import needs_chromium
from daskscope.store import open_store, write_records
from daskscope.store.reports import save_report
from factories import make_worker_sample
from webutil import serving, synthetic_clusters

ARTIFACTS = Path(__file__).resolve().parents[1] / "test-artifacts"
pytestmark = needs_chromium

from daskscope.web import create_app  # noqa: E402

LINK = '<a href="https://example.org">x</a>'
BOLD = "<b>bold</b>"
MARKUP = LINK + BOLD
KEY = "task" + MARKUP


def _spin(i: int) -> int:
    end = time.perf_counter() + 1.5  # long enough for several profile samples
    while time.perf_counter() < end:
        pass
    return i


# The profile names frames by code name and file: give the task's function markup ones.
spin = type(_spin)(
    _spin.__code__.replace(co_name=MARKUP, co_filename=f"/tmp/{BOLD}.py"), _spin.__globals__
)


def record(url: str) -> str:
    with (
        LocalCluster(
            n_workers=1,
            threads_per_worker=2,
            processes=False,
            dashboard_address=":0",
            silence_logs=logging.CRITICAL,
        ) as cluster,
        Client(cluster) as client,
    ):
        cluster_id = daskscope.register(
            client, database=url, profile_interval=0.5, worker_sampling_interval=0.2
        )
        # a key without '-' that starts with a letter: its prefix and group are the
        # whole key, markup and all
        dask.compute(dask.delayed(spin)(1, dask_key_name=KEY))
        daskscope.flush(client)
    now = time.time()
    worker = f"tcp://{MARKUP}:1234"  # what a collector may send as a worker's name
    samples = [
        make_worker_sample(
            cluster_id, worker, now - 10 + i, nthreads=1, cpu_percent=50.0, executing=1
        )
        for i in range(5)
    ]
    users = [dataclasses.replace(c, user=MARKUP) for c in synthetic_clusters(now, weeks=2)]
    with open_store(url) as store:
        write_records(store, [*samples, *users])
    return cluster_id


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    url = f"sqlite:///{tmp_path_factory.mktemp('markup') / 'daskscope.db'}"
    cluster_id = record(url)
    with open_store(url) as store:
        report = save_report(store, HOSTILE_REPORT.encode(), name="hostile.html")
    app = create_app(url)
    with serving(app) as base:
        yield {"base": base, "cluster": cluster_id, "report": report["id"]}
    app.state.store.close()


@pytest.fixture
def page(open_page: Any) -> Any:
    return open_page(1300, 900)


def shot(page: Any, name: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


# Links and bold text plotly made inside a chart's SVG, and the chart's text as shown.
CHART = """(id) => {
  const div = document.getElementById(id);
  return {
    links: div.querySelectorAll("svg a").length,
    bold: [...div.querySelectorAll("svg tspan")].filter(
      (t) => (t.getAttribute("style") || "").includes("bold")).length,
    text: [...div.querySelectorAll("svg text")].map((t) => t.textContent).join("\\n"),
  };
}"""


ZOOM = f"""async (args) => {{
  const body = await (await fetch(args.url)).json();
  const i = body.labels.indexOf({MARKUP!r});
  if (i < 0) return null;
  await Plotly.restyle(document.getElementById("flamegraph"), {{ level: [body.ids[i]] }});
  return body.ids[i];
}}"""


def test_cluster_strings_are_text_in_every_chart(site: dict[str, Any], page: Any) -> None:
    # Each chart in its tab of the cluster page
    page.goto(f"{site['base']}/clusters/{site['cluster']}?tab=workers")
    page.wait_for_selector("#workers-charts[data-ready='1']")
    page.click("#tab-profile")
    page.wait_for_selector("#flamegraph[data-ready='1']")
    page.click("#tab-computations")
    page.click("button.expand")
    page.wait_for_selector(".graph[data-ready='1'], [id^='graph-'][data-ready='1']")
    page.click("#tab-overview")
    page.wait_for_selector("#prefix-chart[data-ready='1']")
    graph_id = page.evaluate("document.querySelector(\"[id^='graph-'][data-ready='1']\").id")
    # zoom the flame graph to the frame named with markup, so that its label has room
    zoomed = page.evaluate(ZOOM, {"url": f"/api/v1/clusters/{site['cluster']}/profile"})
    assert zoomed, "the profile holds no frame of the function named with markup"
    charts = {
        name: page.evaluate(CHART, name)
        for name in ("workers-charts", "prefix-chart", "flamegraph", graph_id)
    }
    shot(page, "markup-cluster")
    for name, chart in charts.items():
        assert chart["links"] == 0 and chart["bold"] == 0, (name, chart)
    assert LINK in charts["prefix-chart"]["text"]  # the prefix, as an axis label
    assert MARKUP in charts["workers-charts"]["text"]  # the worker, in the legend
    assert KEY in charts[graph_id]["text"]  # the group's label
    assert MARKUP in charts["flamegraph"]["text"]  # the frame, in its box and the path bar


def test_member_names_are_text_in_the_usage_chart(site: dict[str, Any], page: Any) -> None:
    page.goto(f"{site['base']}/?days=0")
    page.wait_for_selector("#usage-chart[data-ready='1']")
    # the heat map is an HTML table drawn by the server: names are its row headers' text
    heat = page.locator("#usage-chart")
    shot(page, "markup-account")
    assert heat.locator("a").count() == 0 and heat.locator("b, strong").count() == 0
    assert MARKUP in heat.locator("th.heat-ytick").all_text_contents()


# A report that tries to take the tab elsewhere and to read the dashboard's API.
HOSTILE_REPORT = """<!doctype html><html><body><p>hostile report</p><script>
fetch("/api/v1/clusters").then((r) => r.text()).then(
  (t) => { document.title = "read:" + t.length; }, () => { document.title = "fetch blocked"; });
try { window.top.location = "https://example.org/"; } catch (e) {}
try { window.location = "https://example.org/"; } catch (e) {}
</script></body></html>"""


def test_a_raw_report_opened_directly_cannot_navigate_or_reach_the_api(
    site: dict[str, Any], page: Any
) -> None:
    requests: list[str] = []
    page.on("request", lambda r: requests.append(r.url))
    page.goto(f"{site['base']}/reports/{site['report']}/raw")
    page.wait_for_selector("#report-frame")
    page.wait_for_timeout(1500)  # give its script the time to try
    assert page.url == f"{site['base']}/reports/{site['report']}"  # the sandboxed viewer
    assert not any(u.startswith("https://example.org") for u in requests if "frame" not in u)
    assert f"{site['base']}/api/v1/clusters" not in requests
    shot(page, "markup-hostile-report")
