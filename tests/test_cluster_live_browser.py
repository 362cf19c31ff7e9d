"""Live mode of the cluster page, in Debian's Chromium, on a real running cluster that
records into the store the server reads: a new computation in a new span, a failing
task and a new worker appear on the open page without a reload (statistics, task
groups, spans, errors, the workers' table and charts), each read against Dask's own
state of the same run; the page says it is running and when it last checked."""

from __future__ import annotations

import logging
import re
from contextlib import suppress
from typing import Any

import dask
import dask.array as da
from distributed import Client, LocalCluster, span, wait

import daskscope
from daskscope.web import create_app
from test_cluster_page_browser import new_page, shot
from webutil import serving

FAILURE = "daskscope live test: fails on purpose"


def fail(x: Any) -> Any:
    raise ValueError(FAILURE)


def test_live_page_follows_a_running_cluster(browser: Any, tmp_path: Any) -> None:
    url = f"sqlite:///{tmp_path / 'live.db'}"
    with (
        LocalCluster(
            n_workers=1,
            threads_per_worker=1,
            processes=False,
            dashboard_address=":0",
            silence_logs=logging.CRITICAL,
        ) as cluster,
        Client(cluster) as client,
    ):
        cluster_id = daskscope.register(client, database=url, name="live cluster")
        with dask.config.set({"optimization.fuse.active": False}), span("first"):
            da.ones((100, 100), chunks=50).sum().compute()
        daskscope.flush(client)
        app = create_app(url)
        context, page, errors = new_page(browser)
        try:
            with serving(app) as base:
                page.goto(f"{base}/clusters/{cluster_id}?tab=workers")
                assert page.locator("#running-badge").is_visible()
                page.wait_for_selector("#workers-charts[data-ready='1']")
                assert page.locator("figure.dsw-worker").count() == 1
                page.wait_for_function("() => Number(document.body.dataset.livePolls) >= 1")
                checked = page.locator("#live-checked").inner_text()
                assert re.fullmatch(r", checked \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", checked)

                # While the page is open: a new span with a computation, a failing
                # task, and a second worker
                with dask.config.set({"optimization.fuse.active": False}), span("second"):
                    da.arange(1000, chunks=100).map_blocks(lambda b: b * 2).sum().compute()
                    failing = client.submit(fail, 1, key="live-failing-task")
                    wait(failing)
                cluster.scale(2)
                client.wait_for_workers(2)
                with suppress(ValueError):
                    failing.result()
                daskscope.flush(client)
                workers = sorted(client.scheduler_info()["workers"])
                spans = cluster.scheduler.extensions["spans"].spans.values()
                span_names = sorted(sp.name[-1] for sp in spans)

                # Workers: the table and one chart per worker, in the open tab
                count = "() => document.querySelectorAll"
                page.wait_for_function(f"{count}('#workers tbody tr').length === {len(workers)}")
                rows = page.locator("#workers tbody tr")
                assert sorted(rows.nth(i).get_attribute("data-worker") for i in range(2)) == workers
                page.wait_for_function(f"{count}('figure.dsw-worker').length === {len(workers)}")
                # Errors: the count on the tab and the failing task's row
                page.wait_for_function(
                    "() => document.getElementById('error-count').textContent === '1'"
                )
                page.click("#tab-errors")
                assert page.locator("#errors tbody tr").count() == 1
                assert page.locator("#errors code").inner_text() == failing.key
                assert FAILURE in page.locator("#errors summary").inner_text()
                # Spans: the new one is listed and filters the page
                page.click("#tab-spans")
                names = page.locator("#spans button.span-link").all_inner_texts()
                assert sorted(names) == span_names and "second" in names
                # each redrawn row links its tasks on the timeline, as the server draws it
                second = next(sp.id for sp in spans if sp.name[-1] == "second")
                link = page.locator(f"#spans tr[data-span='{second}'] a.timeline-link")
                assert link.get_attribute("href") == (
                    f"/clusters/{cluster_id}/timeline?span={second}"
                )
                # Task groups and statistics: as the API says now
                view = page.request.get(f"{base}/api/v1/clusters/{cluster_id}").json()
                page.click("#tab-overview")
                totals = page.locator(".task-group-totals").inner_text()
                summary = view["task_group_summary"]
                assert totals.startswith(f"{summary['count']:,} task groups")
                assert f"{summary['tasks_executed']:,} of" in totals
                executed = page.locator("[data-stat=tasks_executed]").inner_text()
                assert executed == f"{view['statistics']['tasks_executed']:,}"
                # Computations: every one Dask ran, counted in the same run
                page.click("#tab-computations")
                computations = len(cluster.scheduler.computations)
                page.wait_for_function(
                    f"() => document.querySelectorAll('tr.computation').length === {computations}"
                )
                shot(page, "cluster-live")
                assert not errors, errors
        finally:
            context.close()
            app.state.store.close()
