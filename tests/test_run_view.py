"""One view of a workflow run: a live run and the same run read back from a real SQLite
store give equal views, print the same summary, and ``daskscope run(s) --json`` is the
API's JSON byte for byte once parsed."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from distributed import Client, LocalCluster
from rich.console import Console

from daskscope import MetricsCollector, track_memory, track_metrics, track_time
from daskscope.cli.main import cli
from daskscope.cli.run_summary import print_summary
from daskscope.format import MISSING
from daskscope.store import open_store
from daskscope.views.run import RunView, run_list, run_view, stored_run_view
from daskscope.workflow import current_chunk
from daskscope.workflow.chunk import Chunk
from webutil import call

pytest.importorskip("fastapi")
from daskscope.web import create_app


@track_metrics
def count(start: int, stop: int) -> int:
    chunk = current_chunk()
    with track_time(None, "loop"):
        total = sum(range(start, stop))
    with track_memory(None, "alloc"):
        data = bytearray(1 << 12)
    if chunk is not None:
        chunk.report_events(stop - start)
        chunk.set("label", (start, stop))  # a tuple: stored as a list, both ways
    return total + len(data) * 0


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    url = f"sqlite:///{tmp_path_factory.mktemp('run-view') / 'store.db'}"
    with (
        LocalCluster(
            n_workers=2, threads_per_worker=1, processes=False, dashboard_address=":0"
        ) as cluster,
        Client(cluster) as client,
        MetricsCollector(
            client, name="viewed", database=url, worker_tracking_interval=0.05
        ) as collector,
    ):
        client.gather(client.map(count, [0, 100, 250], [100, 250, 300]))
    collector.wait_stored()
    assert collector.run is not None
    yield {"url": url, "collector": collector, "run": collector.run}


def test_live_and_stored_runs_give_equal_views(stored: dict[str, Any]) -> None:
    live = run_view(stored["run"])
    with open_store(stored["url"]) as store:
        again = stored_run_view(store, stored["run"].run_id[:8])
    assert again == live
    # the view holds what was measured, not a default
    assert live.run.backend == "dask" and live.run.span_id is not None
    events = live.figure("total_events")
    assert events is not None and events.value == 300 and events.why is None
    # chunks run on two workers: they arrive in whichever order they finish
    assert sorted(c.events for c in live.chunks) == [50, 100, 150]
    assert {s.name for s in live.sections} == {"loop", "alloc"}
    assert sum(w.chunks for w in live.workers) == 3 and len(live.workers) <= 2
    wall = next(s for s in live.chunk_stats if s.key == "wall_s")
    assert wall.n == 3 and wall.min is not None and wall.max is not None and wall.min <= wall.max


def test_views_are_equal_on_both_dialects(database_url: str) -> None:
    # PostgreSQL's JSONB reorders keys: the view does not depend on their order
    with MetricsCollector(name="dialects", database=database_url) as collector:
        for start in (0, 5, 20):
            count(start, start + 5 + start)
    run_id = collector.wait_stored()
    assert collector.run is not None
    with open_store(database_url) as store:
        again = stored_run_view(store, run_id)
    live = run_view(collector.run)
    assert again == live and live.run.backend == "local"
    assert [c.events for c in again.chunks] == [5, 10, 25]
    cpu_share = again.figure("cpu_percent")
    assert cpu_share is not None and cpu_share.why == "local backend has no fine metrics"


def test_chunks_keep_one_form_through_the_store(stored: dict[str, Any]) -> None:
    from daskscope.store.runs import run_detail

    run = stored["run"]
    with open_store(stored["url"]) as store:
        rows = run_detail(store, run.run_id)["chunks"]
    assert [Chunk.from_row(row) for row in rows] == run.chunks
    assert sorted(c.fields["label"] for c in run.chunks) == [[0, 100], [100, 250], [250, 300]]
    # the seed's dict is derived from the one form
    seed = next(m for m in stored["collector"].chunk_metrics if m["label"] == [0, 100])
    assert seed["duration"] == seed["wall_s"]


def test_a_stored_run_prints_the_summary_of_the_live_one(stored: dict[str, Any]) -> None:
    def text(view: Any) -> str:
        console = Console(width=200, record=True)
        print_summary(view, console=console)
        return console.export_text()

    with open_store(stored["url"]) as store:
        again = stored_run_view(store, stored["run"].run_id)
    live = text(stored["run"])
    assert live == text(again)
    assert "viewed" in live and "300" in live
    # bytes were not read by these chunks: the summary says so, and why
    assert f"{MISSING} (not measured: no bytes read reported)" in live


def test_cli_json_is_the_api_json(stored: dict[str, Any]) -> None:
    url, run_id = stored["url"], stored["run"].run_id
    runner = CliRunner()
    shown = runner.invoke(cli, ["--database", url, "run", run_id[:6], "--json"])
    assert shown.exit_code == 0, shown.output
    listed = runner.invoke(cli, ["--database", url, "runs", "--json"])
    assert listed.exit_code == 0, listed.output
    app = create_app(url)
    try:
        detail = call(app, "GET", f"/api/v1/runs/{run_id[:6]}")
        listing = call(app, "GET", "/api/v1/runs")
        page = call(app, "GET", f"/runs/{run_id}").text
        schema = call(app, "GET", "/openapi.json").json()
    finally:
        app.state.store.close()
    assert detail.status_code == 200 and json.loads(shown.output) == detail.json()
    assert listing.status_code == 200 and json.loads(listed.output) == listing.json()
    assert [r["id"] for r in listing.json()["runs"]] == [run_id]
    # the page renders the same view: its figures and the reason of a missing one
    assert "no bytes read reported" in page and "event rate (wall)" in page
    # OpenAPI describes both answers by their view
    for path, model in (("/api/v1/runs/{run_id}", "RunView"), ("/api/v1/runs", "RunList")):
        answer = schema["paths"][path]["get"]["responses"]["200"]["content"]
        assert answer["application/json"]["schema"]["$ref"].endswith(model)
    assert "figures" in schema["components"]["schemas"]["RunView"]["properties"]


def test_unknown_and_ambiguous_ids_carry_data_and_each_front_adds_its_hint(
    stored: dict[str, Any], tmp_path: Path
) -> None:
    from daskscope.store.runs import AmbiguousRun, UnknownRun

    with open_store(stored["url"]) as store:
        with pytest.raises(UnknownRun) as unknown:
            stored_run_view(store, "zzzzzz")
        assert unknown.value.data() == {"run_id": "zzzzzz"}
        assert "daskscope" not in str(unknown.value)  # no command-line hint in the store
        assert run_list(store).runs[0].id == stored["run"].run_id
    failed = CliRunner().invoke(cli, ["--database", stored["url"], "run", "zzzzzz"])
    assert failed.exit_code == 2 and "`daskscope runs` lists them" in failed.output
    app = create_app(stored["url"])
    try:
        answer = call(app, "GET", "/api/v1/runs/zzzzzz")
        page = call(app, "GET", "/runs/zzzzzz")
    finally:
        app.state.store.close()
    assert answer.status_code == 404 and answer.json()["error"]["run_id"] == "zzzzzz"
    assert page.status_code == 404 and "The runs page lists them." in page.text
    empty = f"sqlite:///{tmp_path / 'empty.db'}"
    with open_store(empty) as store:
        assert run_list(store).message == "no workflow runs recorded yet"
    assert AmbiguousRun("abcd", ["abcd1", "abcd2"]).data() == {
        "prefix": "abcd",
        "matches": ["abcd1", "abcd2"],
    }


def test_a_view_is_typed_and_frozen(stored: dict[str, Any]) -> None:
    view = run_view(stored["run"])
    assert isinstance(view, RunView)
    with pytest.raises(AttributeError):
        view.run = view.run  # type: ignore[misc]


# -- the listing: filters, order and pages, the same through the store, the API and CLI


def _many_runs() -> list[Any]:
    from factories import T0, make_workflow_run

    return [
        make_workflow_run(
            None,
            id=f"run-{i:04d}",
            name=f"{('alpha', 'beta', 'gamma')[i % 3]} {i:03d}",
            user=("ana", "ben", "cleo", "dan", "eve")[i % 5],
            started_at=T0 + i * 86400,
            stopped_at=T0 + i * 86400 + 5,
            wall_time_s=float(i % 7),
            chunk_count=i % 5,
            info={"status": "failed", "error": "boom"} if i % 4 == 0 else {},
        )
        for i in range(150)
    ]


def test_the_listing_filters_sorts_and_pages_on_both_dialects(database_url: str) -> None:
    from daskscope.store import write_records
    from daskscope.views.run import RunQuery

    runs = _many_runs()
    with open_store(database_url) as store:
        write_records(store, runs)
        everything = run_list(store, RunQuery(limit=None))
        assert everything.total == 150 and [r.id for r in everything.runs] == [
            r.id for r in sorted(runs, key=lambda r: -r.started_at)
        ]
        page = run_list(store, RunQuery(offset=100))
        assert page.total == 150 and len(page.runs) == 50 and page.runs[0].id == "run-0049"
        asked = RunQuery(q="GAMMA", user="ben", status="failed", since="2026-01-10",
                         until="2026-03-31", sort="name", order="asc")  # fmt: skip
        found = run_list(store, asked)
        wanted = sorted(
            r.name for r in runs
            if r.name.startswith("gamma") and r.user == "ben" and r.info.get("status") == "failed"
            and 9 * 86400 <= r.started_at - 1_767_225_600.123456 < 90 * 86400
        )  # fmt: skip
        assert wanted and [r.name for r in found.runs] == wanted and found.total == len(wanted)
        assert {r.status for r in found.runs} == {"failed"} and found.users == (
            "ana",
            "ben",
            "cleo",
            "dan",
            "eve",
        )
        by_status = run_list(store, RunQuery(sort="status", limit=None))
        assert [r.status for r in by_status.runs] == ["ok"] * 112 + ["failed"] * 38
        by_id = run_list(store, RunQuery(q="run-012"))
        assert {r.id for r in by_id.runs} == {f"run-{i:04d}" for i in range(120, 130)}
        assert (
            run_list(store, RunQuery(q="zeta")).message == "no workflow run matches these filters"
        )
        with pytest.raises(ValueError, match="not a date"):
            run_list(store, RunQuery(since="last week"))


def test_cli_listing_json_is_the_api_json_for_the_same_arguments(tmp_path: Path) -> None:
    from daskscope.store import write_records

    url = f"sqlite:///{tmp_path / 'many.db'}"
    with open_store(url) as store:
        write_records(store, _many_runs())
    app = create_app(url)
    try:
        for cli_args, api_query in (
            ([], ""),
            (["--offset", "100"], "offset=100"),
            (["-q", "beta", "--status", "ok", "--sort", "wall", "--order", "asc", "--limit", "7"],
             "q=beta&status=ok&sort=wall&order=asc&limit=7"),
            (["--user", "ana", "--since", "2026-02-01", "--until", "2026-02-28"],
             "user=ana&since=2026-02-01&until=2026-02-28"),
        ):  # fmt: skip
            shown = CliRunner().invoke(cli, ["--database", url, "runs", "--json", *cli_args])
            assert shown.exit_code == 0, shown.output
            answer = call(app, "GET", f"/api/v1/runs?{api_query}")
            assert answer.status_code == 200 and json.loads(shown.output) == answer.json()
        assert answer.json()["total"] == 5  # ana's runs in February: every fifth day
        wrong = call(app, "GET", "/api/v1/runs?since=yesterday")
        assert wrong.status_code == 400 and "not a date" in wrong.json()["error"]["message"]
        assert call(app, "GET", "/api/v1/runs?sort=colour").status_code == 400
    finally:
        app.state.store.close()
    refused = CliRunner().invoke(cli, ["--database", url, "runs", "--since", "yesterday"])
    assert refused.exit_code == 2 and "not a date" in refused.output
