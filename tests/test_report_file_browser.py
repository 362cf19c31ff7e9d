"""Issue 29, point 2: ``daskscope report`` writes a page as one HTML file that opens from
disk, offline, with every chart drawn.

The demo workload (``daskscope demo``'s, on a real LocalCluster of two worker
processes) is recorded into SQLite; its report is written by the CLI and opened as a
file:// URL in Chromium with every request routed: anything not the file itself is
aborted and counted, and none may happen. Each tab is shown and its charts read back
(axis titles, legends, labels), the tables, the flame graph and the timeline; the
figures are checked against the workload's own ground truth (keys submitted, the task
that fails on purpose, the spans it opened, the two workers asked for). The same for a
computation, a workflow run and a comparison; the pages' "Download report" links send
the same file, to whoever may see the page only."""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from browser import needs_chromium, new_page
from cliutil import run_cli
from daskscope.cli.demo import DEMO_FAILURE_MESSAGE, record_demo
from daskscope.store import open_store
from daskscope.store.identity import add_user, create_account, create_token
from test_screenshots import record_run
from webutil import serving

pytest.importorskip("fastapi")
pytest.importorskip("playwright.sync_api")

from daskscope.web import create_app

pytestmark = needs_chromium

#: The size budget of the demo cluster's report (issue 29: "target <= 3 MB"); the file
#: is ~1.96 MB of packed plotly.js and the page's data (docs/benchmarks.md)
DEMO_REPORT_BUDGET = 3_000_000
WAIT_MS = 120_000


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    folder = tmp_path_factory.mktemp("report-file")
    url = f"sqlite:///{folder / 'daskscope.db'}"
    cluster_id, truth = record_demo(url, progress=False)
    run_id = record_run(url)
    return {"url": url, "cluster": cluster_id, "truth": truth, "run": run_id, "folder": folder}


def _write(recorded: dict[str, Any], name: str, *args: str) -> Path:
    out = recorded["folder"] / name
    done = run_cli("--database", recorded["url"], "report", *args, "-o", str(out))
    assert done.returncode == 0, done.stderr
    assert f"wrote {out}" in done.stdout
    return out


@pytest.fixture
def offline(browser: Any) -> Iterator[Any]:
    """open(path) -> page, with every request but file:// ones aborted and recorded in
    page.left; uncaught errors fail the test."""
    contexts = []
    pages: list[Any] = []

    def open_file(path: Path) -> Any:
        context, page, errors = new_page(browser, 1440, 900)
        contexts.append(context)
        left: list[str] = []

        def route(r: Any) -> None:
            if r.request.url.startswith("file://"):
                r.continue_()
            else:
                left.append(r.request.url)
                r.abort()

        context.route("**/*", route)
        page.left = left
        page.errors = errors
        pages.append(page)
        page.goto(path.as_uri())
        page.wait_for_function("document.body.dataset.reportReady === 'yes'", timeout=WAIT_MS)
        return page

    yield open_file
    for page in pages:
        assert page.left == [], page.left
        assert page.errors == [], page.errors
    for context in contexts:
        context.close()


# What each drawn plotly chart of the visible page shows: axis titles, tick labels,
# legend entries, trace count
CHARTS = """(root) => [...document.querySelectorAll(root + ' .js-plotly-plot')]
  .filter((el) => el.offsetParent !== null)
  .map((el) => ({
    id: el.id || el.parentElement.id,
    width: el.getBoundingClientRect().width,
    traces: (el.data || []).length,
    titles: [...el.querySelectorAll('[class^="g-"][class$="title"]')]
      .map((t) => t.textContent.trim()).filter(Boolean),
    ticks: [...el.querySelectorAll('.xtick, .ytick, .x2tick, .y2tick')]
      .map((t) => t.textContent.trim()),
    legend: [...el.querySelectorAll('.legendtext')].map((t) => t.textContent.trim()),
  }))"""


def _charts(page: Any, root: str) -> list[dict[str, Any]]:
    return page.evaluate(CHARTS, root)


def _wait_charts(page: Any, root: str, at_least: int) -> list[dict[str, Any]]:
    selector = json.dumps(f"{root} .js-plotly-plot")
    page.wait_for_function(
        f"""() => [...document.querySelectorAll({selector})]
          .filter((el) => el.offsetParent !== null && el.querySelector('.main-svg'))
          .length >= {at_least}""",
        timeout=WAIT_MS,
    )
    charts = _charts(page, root)
    for chart in charts:
        assert chart["width"] > 100 and chart["traces"] > 0, chart
    return charts


def _tab(page: Any, name: str) -> None:
    page.click(f"#tab-{name}")
    page.wait_for_function(f"() => !document.getElementById('panel-{name}').hidden")


def _number(text: str) -> int:
    return int(text.replace(",", "").split()[0])


def _shot(page: Any, name: str) -> None:
    page.screenshot(path=f"/tmp/report-{name}.png", full_page=True)


def test_cluster_report_opens_offline_with_every_chart(
    recorded: dict[str, Any], offline: Any
) -> None:
    path = _write(recorded, "cluster.html", recorded["cluster"][:8])
    size = path.stat().st_size
    assert size <= DEMO_REPORT_BUDGET, f"{size} bytes: past the demo cluster's budget"
    truth = recorded["truth"]
    page = offline(path)
    assert recorded["cluster"] in page.locator("h1").first.inner_text()
    assert page.title() == "daskscope demo · daskscope report"

    # Overview: statistics against the keys submitted, the prefix chart, the groups
    executed = _number(page.locator('[data-stat="tasks_executed"]').inner_text())
    erred = _number(page.locator('[data-stat="tasks_erred"]').inner_text())
    assert erred == 1 and executed + erred == truth["keys"]
    (prefixes,) = _wait_charts(page, "#panel-overview", 1)
    assert "Tasks executed" in " ".join(prefixes["titles"])
    assert {"square", "total-ok", "fail-on-purpose"} <= set(prefixes["ticks"])
    assert page.locator("#top-task-groups tbody tr").count() > 0
    page.wait_for_function("() => document.querySelector('.advice-box').dataset.filled === 'done'")
    assert "fail-on-purpose" in page.locator(".advice-box").inner_text()
    _shot(page, "cluster-overview")

    # Computations: each row opens its task-group graph from the embedded answers
    _tab(page, "computations")
    rows = page.locator("#computations tbody tr.computation")
    assert rows.count() >= 3
    rows.first.locator("button.expand").click()
    graphs = _wait_charts(page, "#panel-computations", 1)
    assert graphs[0]["traces"] > 0
    page.wait_for_function(
        "() => document.querySelector('#panel-computations .advice-box').dataset.filled === 'done'"
    )
    _shot(page, "cluster-computations")

    # Spans and fine metrics: the spans the workload opened; a span's filter works offline
    _tab(page, "spans")
    spans = page.locator("#spans tbody").inner_text()
    for name in ("dataframe groupby", "analysis", "load", "reduce", "delayed"):
        assert name in spans
    # the fine metrics by prefix, and where the time went interval by interval
    charts = _wait_charts(page, "#panel-spans", 2)
    (metrics,) = [c for c in charts if "task prefix" in " ".join(c["titles"])]
    assert "thread-cpu" in metrics["legend"]
    (intervals,) = [c for c in charts if "time (UTC)" in " ".join(c["titles"])]
    assert "thread-cpu" in intervals["legend"]
    page.locator("button.span-link", has_text="analysis").click()
    page.wait_for_function("() => !document.getElementById('span-filter').hidden")
    _wait_charts(page, "#panel-spans", 1)
    assert "not in this report" not in page.locator("#panel-spans").inner_text()
    _shot(page, "cluster-spans")

    # Workers: the two worker processes the demo asked for, each charted
    _tab(page, "workers")
    assert page.locator("#workers tbody tr").count() == 2
    workers = _wait_charts(page, "#panel-workers", 3)
    titles = " ".join(t for c in workers for t in c["titles"])
    assert "memory (bytes)" in titles and "time (UTC)" in titles
    _shot(page, "cluster-workers")

    # Profile: the flame graph drawn from the embedded profile
    _tab(page, "profile")
    page.wait_for_function(
        "() => document.querySelectorAll('#flamegraph g.slice').length > 5", timeout=WAIT_MS
    )
    assert "samples" in page.locator("#profile-summary").inner_text()
    _shot(page, "cluster-profile")

    # Errors: the task that failed on purpose
    _tab(page, "errors")
    errors = page.locator("#errors tbody").inner_text()
    assert truth["failed_key"] in errors and DEMO_FAILURE_MESSAGE in errors

    # The timeline below: every execution, drawn on its canvas, with its axis and legend
    timeline = page.locator("#report-timeline")
    assert _number(timeline.locator('[data-stat="tasks"]').inner_text()) == truth["keys"]
    (chart,) = _wait_charts(page, "#report-timeline", 1)
    assert "Worker thread" in chart["titles"] and any("Time (s after" in t for t in chart["titles"])
    legend = timeline.locator("#timeline-legend").inner_text()
    assert "square" in legend and "fail-on-purpose" in legend
    painted = page.evaluate(
        """() => [...document.querySelectorAll('#timeline canvas')].some((c) => {
             const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
             for (let i = 3; i < d.length; i += 4) if (d[i]) return true; return false; })"""
    )
    assert painted
    assert timeline.locator("#slowest tbody tr").count() > 0
    # zooming stretches the one window the file holds, and says so; asks nobody
    box = page.locator("#timeline .nsewdrag").first.bounding_box()
    y = box["y"] + box["height"] / 2
    page.mouse.move(box["x"] + box["width"] * 0.3, y)
    page.mouse.down()
    page.mouse.move(box["x"] + box["width"] * 0.6, y, steps=8)
    page.mouse.up()
    page.wait_for_function(
        "() => document.getElementById('timeline-status').textContent.startsWith('Zoomed into')"
    )
    page.click("#timeline-reset")
    page.wait_for_function(
        "() => document.getElementById('timeline-status').textContent"
        " === 'The whole window this report holds.'"
    )
    page.locator("#report-timeline").scroll_into_view_if_needed()
    _shot(page, "cluster-timeline")


def test_computation_run_and_comparison_reports(recorded: dict[str, Any], offline: Any) -> None:
    cluster = recorded["cluster"]
    listed = run_cli("--database", recorded["url"], "show", cluster, "--json")
    computations = json.loads(listed.stdout)["computations"]
    first = computations[0]["id"]

    page = offline(_write(recorded, "computation.html", f"{cluster[:8]}/{first}"))
    charts = _wait_charts(page, "main", 3)  # the graph, the what-if chart, the timeline
    titles = " ".join(t for c in charts for t in c["titles"])
    assert "worker threads" in titles and "Worker thread" in titles
    assert first in page.locator(".computation-id").inner_text()
    _shot(page, "computation")

    page = offline(_write(recorded, "run.html", f"run:{recorded['run'][:8]}"))
    assert page.locator(".run-id").inner_text() == recorded["run"]
    charts = _wait_charts(page, "main", 1)
    assert page.locator("main table").count() > 0
    _shot(page, "run")

    second = computations[1]["id"]
    page = offline(
        _write(recorded, "compare.html", "--compare", f"{cluster}/{first}", f"{cluster}/{second}")
    )
    assert page.locator("#compare-figures tbody tr").count() > 0
    assert first[:8] in page.locator("#side-a").inner_text()
    _shot(page, "comparison")


def test_report_errors_say_what_to_do(recorded: dict[str, Any]) -> None:
    out = str(recorded["folder"] / "never.html")
    for args, advice in (
        (["no-such-cluster"], "`daskscope clusters` lists them"),
        ([f"{recorded['cluster']}/no-such"], "lists its computations"),
        (["run:no-such-run"], "`daskscope runs` lists them"),
    ):
        done = run_cli("--database", recorded["url"], "report", *args, "-o", out)
        assert done.returncode == 2, done.stderr
        assert done.stderr.startswith("error: ") and advice in done.stderr
    assert not Path(out).exists()


def test_download_links_send_the_file_to_those_who_may_see_it(
    recorded: dict[str, Any], browser: Any, offline: Any
) -> None:
    url = recorded["url"]
    with open_store(url) as store:
        create_account(store, "elsewhere")
        add_user(store, "eve", account="elsewhere")
        outsider = create_token(store, "eve")
        owner_account = "default"
        with contextlib.suppress(ValueError):  # the demo's cluster made it
            create_account(store, owner_account)
        add_user(store, "owner", account=owner_account)
        owner = create_token(store, "owner")
    app = create_app(url, auth=True)
    try:
        with serving(app) as base:
            cluster = recorded["cluster"]
            as_owner = {"Authorization": f"Bearer {owner}"}
            page = httpx.get(f"{base}/clusters/{cluster}", headers=as_owner, timeout=120)
            assert page.status_code == 200, page.text
            href = re.search(r'id="download-report">· <a href="([^"]+)"', page.text).group(1)
            sent = httpx.get(f"{base}{href}", headers=as_owner, timeout=600)
            assert sent.status_code == 200, sent.text[:500]
            assert sent.headers["content-disposition"].startswith("attachment; filename=")
            assert b'id="report-plotly"' in sent.content and cluster.encode() in sent.content
            responses = re.search(
                rb'id="report-responses">(.*?)</script>', sent.content, re.DOTALL
            ).group(1)
            assert f"/api/v1/clusters/{cluster}/workers" in json.loads(responses)
            # no credentials: refused; another account's member: the cluster is not theirs
            assert httpx.get(f"{base}{href}", timeout=120).status_code in (401, 303)
            other = httpx.get(
                f"{base}{href}", headers={"Authorization": f"Bearer {outsider}"}, timeout=120
            )
            assert other.status_code == 404
            assert b'id="report-plotly"' not in other.content
            # the link on the page, clicked in Chromium: the file it saves opens offline
            # logged in as a member, with the session the login page gives
            context, page, _ = new_page(browser, accept_downloads=True)
            page.goto(f"{base}/clusters/{cluster}")
            page.fill("input[name=token]", owner)
            page.click("button[type=submit]")
            page.wait_for_selector("#download-report a", state="attached")
            with page.expect_download(timeout=WAIT_MS) as info:
                page.locator("#download-report a").click()
            saved = recorded["folder"] / "downloaded.html"
            info.value.save_as(saved)
            assert info.value.suggested_filename == f"daskscope-{cluster}-report.html"
            context.close()
        opened = offline(saved)
        _tab(opened, "workers")
        _wait_charts(opened, "#panel-workers", 3)
    finally:
        app.state.store.close()


def test_a_browser_without_decompression_is_told_and_keeps_the_tables(
    recorded: dict[str, Any], browser: Any
) -> None:
    path = _write(recorded, "no-stream.html", recorded["cluster"])
    context, page, errors = new_page(browser, init_script="delete window.DecompressionStream;")
    try:
        page.goto(path.as_uri())
        page.wait_for_function("document.body.dataset.reportReady === 'unsupported'")
        status = page.locator("#report-status")
        assert status.is_visible() and "Firefox 113" in status.inner_text()
        assert page.locator("#top-task-groups tbody tr").count() > 0
        assert page.locator(".js-plotly-plot").count() == 0
        assert errors == []
    finally:
        context.close()
