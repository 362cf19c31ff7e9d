"""Issue 29, point 1: daskscope in a notebook.

A real notebook (nbformat) records a real Dask computation and two workflow runs into a
throwaway SQLite store, shows the cluster, a run, their comparison and the collector
(live while it runs, through ipywidgets), and loads the cluster and a run as frames; a
kernel of this environment executes it (nbclient). The outputs are then read: their
figures against what the notebook itself submitted to Dask and what Dask's scheduler
holds, their plain text, and their HTML opened in Chromium with every request that is
not for a local file aborted and recorded (none may be made), and a screenshot taken."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pytest

from browser import needs_chromium, new_page
from daskscope.format import count_text

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

SRC = Path(__file__).resolve().parents[1] / "src"
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"

SETUP = """
import json, logging, os, time
from distributed import Client, LocalCluster
from IPython.display import display
import daskscope
from daskscope import MetricsCollector, track_metrics
from daskscope.workflow import current_chunk

url = os.environ["DASKSCOPE_NOTEBOOK_STORE"]
cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                       dashboard_address=":0", silence_logs=logging.CRITICAL)
client = Client(cluster)
cluster_id = daskscope.register(client, database=url, name="notebook cluster")
submitted = set()  # every key this notebook hands Dask: the ground truth of task counts
print("SOURCE " + json.dumps(daskscope.__file__))
"""

PLAIN = """
def square(i):
    return i * i

futures = client.map(square, range(40))
submitted |= {f.key for f in futures}
total = sum(client.gather(futures))
"""

LIVE = """
@track_metrics
def analyse(start, stop):
    chunk = current_chunk()
    total = sum(i * i for i in range(start, stop))
    if chunk is not None:
        chunk.report_events(stop - start)
    return total

from daskscope.notebook.live import live_widgets

collector = MetricsCollector(client, name="notebook run", database=url,
                             worker_tracking_interval=0.2)
display(collector)  # a widget, redrawn while the run is open
shown_before = [w.value for w in live_widgets(collector)]
live_seen = None
with collector:
    fs = client.map(analyse, [i * 50_000 for i in range(8)],
                    [i * 50_000 + 40_000 for i in range(8)])
    submitted |= {f.key for f in fs}
    client.gather(fs)
    # the run's fine metrics reach the scheduler with the workers' heartbeats: wait for
    # a redraw that shows them, while the run is still open
    deadline = time.monotonic() + 120
    while live_seen is None and time.monotonic() < deadline:
        for w in live_widgets(collector):
            if 'data-state="running"' in w.value and 'data-bars="fine-metrics"' in w.value:
                live_seen = w.value
        time.sleep(0.1)
run_a = collector.wait_stored()
deadline = time.monotonic() + 120
while time.monotonic() < deadline and not all(
    'data-state="ok"' in w.value for w in live_widgets(collector)
):
    time.sleep(0.1)
print("LIVE " + json.dumps({"before": shown_before, "running": live_seen,
                            "after": [w.value for w in live_widgets(collector)]}))
"""

SECOND = """
# a function of its own: tasks of a task group still alive (the futures of the first run
# are still held in `fs`) would run in that group's span, the first run's
@track_metrics
def reanalyse(start, stop):
    chunk = current_chunk()
    total = sum(i * i for i in range(start, stop))
    if chunk is not None:
        chunk.report_events(stop - start)
    return total

with MetricsCollector(client, name="notebook run", database=url) as second:
    fs = client.map(reanalyse, [i * 70_000 for i in range(4)],
                    [i * 70_000 + 60_000 for i in range(4)])
    submitted |= {f.key for f in fs}
    client.gather(fs)
run_b = second.wait_stored()
"""

TRUTH = """
daskscope.flush(client)  # every heartbeat's fine metrics written

def execute_seconds(dask_scheduler):
    out = {}
    for key, value in dask_scheduler.cumulative_worker_metrics.items():
        if isinstance(key, tuple) and len(key) == 4 and key[0] == "execute" and key[3] == "seconds":
            out[key[2]] = out.get(key[2], 0.0) + value
    return out

fine_truth = client.run_on_scheduler(execute_seconds)
client.close()
cluster.close()
print("TRUTH " + json.dumps({"submitted": sorted(map(str, submitted)), "cluster_id": cluster_id,
                             "run_a": run_a, "run_b": run_b, "fine": fine_truth}))
"""

FRAMES = """
loaded = daskscope.load(cluster_id, store=url)
frames, arrow = loaded.to_pandas(), loaded.to_arrow()
run_frames = daskscope.load("run:" + run_a, store=url).to_pandas()
print("FRAMES " + json.dumps({
    "rows": {name: len(frame) for name, frame in frames.items()},
    "arrow_rows": {name: table.num_rows for name, table in arrow.items()},
    "task_keys": sorted(frames["tasks"]["key"]),
    "run_rows": {name: len(frame) for name, frame in run_frames.items()},
    "run_events": int(run_frames["chunks"]["events"].sum()),
    "cluster_tasks": loaded.data["statistics"]["tasks_executed"],
}))
"""

CELLS = {
    "setup": SETUP,
    "plain": PLAIN,
    "live": LIVE,
    "second": SECOND,
    "truth": TRUTH,
    "cluster": "daskscope.cluster(cluster_id, store=url)",
    "run": "daskscope.run(run_a, store=url)",
    "compare": 'daskscope.compare("run:" + run_a, daskscope.run(run_b, store=url), store=url)',
    "collector": "collector",
    "frames": FRAMES,
}


@pytest.fixture(scope="module")
def executed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The notebook executed by a kernel of this environment importing this checkout's
    source; its cells' outputs by cell name, and what it printed."""
    folder = tmp_path_factory.mktemp("notebook")
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(code, metadata={"name": n}) for n, code in CELLS.items()]
    nbformat.write(nb, folder / "daskscope.ipynb")
    path = os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")])
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PYTHONPATH", path)
        mp.setenv("DASKSCOPE_NOTEBOOK_STORE", f"sqlite:///{folder / 'store.db'}")
        client = nbclient.NotebookClient(
            nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(folder)}}
        )
        client.execute()
    nbformat.write(nb, folder / "daskscope.ipynb")  # kept beside the store, to be opened
    outputs = {cell.metadata["name"]: cell.outputs for cell in nb.cells}
    printed: dict[str, Any] = {}
    for cell in nb.cells:
        for out in cell.outputs:
            assert out["output_type"] != "error", "".join(out.get("traceback", []))
            if out["output_type"] == "stream" and out["name"] == "stdout":
                for line in out["text"].splitlines():
                    tag, _, rest = line.partition(" ")
                    if tag in ("SOURCE", "LIVE", "TRUTH", "FRAMES"):
                        printed[tag] = json.loads(rest)
    # the kernel ran this checkout's daskscope
    assert Path(printed["SOURCE"]).is_relative_to(SRC), printed["SOURCE"]
    return {"outputs": outputs, "printed": printed, "nb": nb, "folder": folder}


def bundle(executed: dict[str, Any], cell: str) -> dict[str, Any]:
    """The data of the cell's one rich output (its last expression or display)."""
    rich = [o for o in executed["outputs"][cell] if "data" in o]
    assert len(rich) == 1, executed["outputs"][cell]
    data: dict[str, Any] = rich[0]["data"]
    return data


def test_the_cluster_shows_the_statistics_dask_ran(executed: dict[str, Any]) -> None:
    truth = executed["printed"]["TRUTH"]
    data = bundle(executed, "cluster")
    html, text = data["text/html"], data["text/plain"]
    tasks = len(truth["submitted"])
    assert tasks == 40 + 8 + 4
    assert truth["cluster_id"] in html and truth["cluster_id"] in text
    assert re.search(rf"<td>tasks executed</td><td class=\"ds-num\">{count_text(tasks)}</td>", html)
    assert re.search(rf"tasks executed\s+{count_text(tasks)}\n", text)
    # the top prefixes, with the tasks of each that the notebook submitted
    for prefix, count in (("square", 40), ("analyse", 8), ("reanalyse", 4)):
        row = f'<tr><td>{prefix}</td><td class="ds-num">'
        assert row in html
        cells = re.search(re.escape(row) + r"[^<]*</td><td class=\"ds-num\">([^<]*)</td>", html)
        assert cells is not None and cells.group(1) == count_text(count)
        assert f"{prefix}: {count_text(count)} tasks" in text
    assert 'data-state="stopped"' in html
    assert "daskscope serve --database" in html  # no server configured: how to open one


def test_the_fine_metric_bars_are_dasks_own_figures(executed: dict[str, Any]) -> None:
    truth = executed["printed"]["TRUTH"]["fine"]
    html = bundle(executed, "cluster")["text/html"]
    whole = re.search(r'<tr data-bar="all tasks">(.*?)</tr>', html)
    assert whole is not None
    drawn = {
        a: float(v)
        for a, v in re.findall(r'data-activity="([^"]+)" data-value="([^"]+)"', whole.group(1))
    }
    assert drawn, "no bar drawn"
    assert drawn.keys() == {a for a, v in truth.items() if v > 0}
    for activity, seconds in drawn.items():
        assert seconds == pytest.approx(truth[activity], rel=1e-9, abs=1e-12), activity
    # in the catalogue's colours: thread-cpu as every page draws it
    from daskscope.catalogue import ACTIVITY_COLOURS

    cpu = re.search(r'data-activity="thread-cpu"[^>]*style="[^"]*background-color:([^;"]+)"', html)
    assert cpu is not None and cpu.group(1) == ACTIVITY_COLOURS["thread-cpu"]


def test_a_run_and_the_comparison_show_their_figures(executed: dict[str, Any]) -> None:
    truth = executed["printed"]["TRUTH"]
    run = bundle(executed, "run")
    assert truth["run_a"] in run["text/html"] and 'data-state="ok"' in run["text/html"]
    events = sum(40_000 for _ in range(8))
    assert f"events {count_text(events)}" in run["text/plain"]
    assert 'data-bars="fine-metrics"' in run["text/html"]
    compare = bundle(executed, "compare")
    for side in ("run_a", "run_b"):
        assert truth[side][:8] in compare["text/plain"]
    # events: 320,000 in A and 240,000 in B, as the notebook reported them
    assert f"events: {count_text(events)} → {count_text(4 * 60_000)}" in compare["text/plain"]
    assert 'data-bar="A"' in compare["text/html"] and 'data-bar="B"' in compare["text/html"]


def test_the_collector_shows_itself_live_then_finished(executed: dict[str, Any]) -> None:
    live = executed["printed"]["LIVE"]
    assert len(live["before"]) == 1 and 'data-state="not started"' in live["before"][0]
    # redrawn while the run was open, with its fine metrics so far
    assert live["running"] is not None
    assert "running for" in live["running"]
    # and once more when it ended: the run as stored
    assert len(live["after"]) == 1 and 'data-state="ok"' in live["after"][0]
    shown = executed["outputs"]["live"][0]["data"]
    assert WIDGET_VIEW in shown and 'data-state="not started"' in shown["text/html"]
    # the widget's last state, as nbclient kept it in the notebook
    states = executed["nb"].metadata["widgets"][WIDGET_STATE]["state"]
    model = states[shown[WIDGET_VIEW]["model_id"]]["state"]
    assert 'data-state="ok"' in model["value"]
    # a finished collector: the run, as HTML and text, no widget needed
    finished = bundle(executed, "collector")
    assert WIDGET_VIEW not in finished
    assert executed["printed"]["TRUTH"]["run_a"] in finished["text/html"]
    assert finished["text/plain"].startswith("daskscope run notebook run")


def test_load_gives_frames_of_what_ran(executed: dict[str, Any]) -> None:
    truth = executed["printed"]["TRUTH"]
    frames = executed["printed"]["FRAMES"]
    tasks = len(truth["submitted"])
    assert frames["rows"]["tasks"] == frames["arrow_rows"]["tasks"] == tasks
    assert frames["task_keys"] == truth["submitted"]
    assert frames["cluster_tasks"] == tasks
    assert frames["rows"]["chunks"] == 8 + 4  # every chunk of the cluster's two runs
    assert frames["rows"]["fine_metrics"] > 0 and frames["rows"]["samples"] > 0
    assert frames["rows"] == frames["arrow_rows"]
    assert frames["run_rows"]["chunks"] == frames["run_rows"]["tasks"] == 8
    assert frames["run_events"] == 8 * 40_000


@needs_chromium
def test_the_html_draws_offline_in_chromium(executed: dict[str, Any]) -> None:
    """Every HTML output in one page opened from disk: nothing asked of any host, no
    script run, bars drawn; screenshot to /tmp/notebook-outputs.png."""
    parts = [bundle(executed, c)["text/html"] for c in ("cluster", "run", "compare", "collector")]
    # the collector before its run, and as its widget showed it while the run was open
    parts[:0] = [
        executed["outputs"]["live"][0]["data"]["text/html"],
        executed["printed"]["LIVE"]["running"],
    ]
    for html in parts:
        assert "<script" not in html.lower()
        assert not re.search(r"(src|href)=\"(https?:)?//(?!127\.0\.0\.1)", html)
    page_file = Path(executed["folder"]) / "outputs.html"
    page_file.write_text(
        "<!doctype html><meta charset=utf-8><body>" + "<hr>".join(parts) + "</body>"
    )
    sync_api = pytest.importorskip("playwright.sync_api")
    from browser import CHROMIUM, FLAGS

    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=FLAGS)
        context, page, errors = new_page(browser, 1200, 900, java_script_enabled=False)
        asked: list[str] = []

        def only_files(route: Any) -> None:
            if route.request.url.startswith("file://"):
                route.continue_()
            else:
                asked.append(route.request.url)
                route.abort("internetdisconnected")

        context.route("**/*", only_files)
        page.goto(page_file.as_uri())
        widths = page.eval_on_selector_all(
            '[data-daskscope="cluster"] tr[data-bar="all tasks"] span[data-activity]',
            "spans => spans.map(s => s.getBoundingClientRect().width)",
        )
        shown = page.eval_on_selector_all(
            '[data-daskscope="cluster"] table[data-table="statistics"] tr',
            "rows => rows.map(r => r.innerText)",
        )
        page.screenshot(path="/tmp/notebook-outputs.png", full_page=True)
        # opened untrusted, JupyterLab drops <style> elements: the bars keep their shape
        bare = page_file.with_name("outputs-unstyled.html")
        bare.write_text(re.sub(r"<style>.*?</style>", "", page_file.read_text(), flags=re.S))
        page.goto(bare.as_uri())
        boxes = page.eval_on_selector_all(
            '[data-daskscope="cluster"] tr[data-bar="all tasks"] span[data-activity]',
            "spans => spans.map(s => [s.getBoundingClientRect().width, "
            "s.getBoundingClientRect().height])",
        )
        page.screenshot(path="/tmp/notebook-outputs-unstyled.png", full_page=True)
        context.close()
        browser.close()
    assert asked == [] and errors == []
    assert widths and all(w > 0 for w in widths[:1]) and sum(widths) > 100
    assert [round(w) for w, _ in boxes] == [round(w) for w in widths]
    assert all(h > 0 for _, h in boxes)
    tasks = count_text(len(executed["printed"]["TRUTH"]["submitted"]))
    assert any(re.fullmatch(rf"tasks executed\s+{tasks}", row) for row in shown), shown


def test_outside_a_kernel_a_collector_is_a_static_snapshot() -> None:
    from daskscope import MetricsCollector

    collector = MetricsCollector(store=False, name="plain")
    shown = collector._repr_mimebundle_()
    assert WIDGET_VIEW not in shown
    assert 'data-state="not started"' in shown["text/html"]
    assert shown["text/plain"] == "daskscope run plain: not started (use `with collector:`)"
    with MetricsCollector(enabled=False, store=False, name="off") as off:
        pass
    shown = off._repr_mimebundle_()
    assert 'data-state="off"' in shown["text/html"] and WIDGET_VIEW not in shown


def test_by_name_with_a_configured_server_and_what_is_not_there(executed: dict[str, Any]) -> None:
    """In this process, on the notebook's store: a cluster found by its name, the link
    to its page on the configured server, and a name nothing goes by."""
    import dask

    import daskscope
    from daskscope.notebook import NotRecorded

    truth = executed["printed"]["TRUTH"]
    url = f"sqlite:///{Path(executed['folder']) / 'store.db'}"
    with dask.config.set({"daskscope.public-url": "https://daskscope.example.org/"}):
        shown = daskscope.cluster("notebook cluster", store=url)
    assert shown.id == truth["cluster_id"]
    page = f"https://daskscope.example.org/clusters/{truth['cluster_id']}"
    assert f'href="{page}"' in shown._repr_html_()
    assert f"dashboard: {page}" in repr(shown)
    with pytest.raises(NotRecorded, match="no cluster or workflow run is named 'nothing'"):
        daskscope.load("nothing", store=url)
