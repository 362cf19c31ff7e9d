"""A long history is paged, and says what it leaves out (issue 26, point 9): 450 clusters
of one name, 230 spans of one tag and 230 workflow runs of one name, walked page by page
from the newest back through the view, the JSON route and the command line. Every run
comes exactly once, in order; each page counts the runs older and newer than it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from click.testing import CliRunner

from daskscope.cli.main import cli
from daskscope.store import open_store, write_records
from daskscope.store.history import HISTORY_LIMIT, run_count
from daskscope.views.history import history_view
from factories import T0, make_cluster, make_span, make_workflow_run
from webutil import call

pytest.importorskip("fastapi")
from daskscope.web import create_app

#: longer than the tag index keeps (TAG_CHARS): matched on its start, confirmed on names
LONG = "x" * 230
CASES = [("cluster", "nightly", 450), ("span", "load", 230), ("run", "skim", 230),
         ("span", f"{LONG}-a", 210)]  # fmt: skip


@pytest.fixture(scope="module")
def store_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    url = f"sqlite:///{tmp_path_factory.mktemp('history-paging') / 'store.db'}"
    records: list[Any] = []
    for i in range(450):
        records.append(make_cluster("nightly", start=T0 + 3600 * i))
    # spans tagged "load" (and one inside each, which is not a run of its own), in
    # clusters named otherwise
    for i in range(230):
        host = make_cluster("host", start=T0 + 60 * i, scheduler_address="tcp://10.0.0.9:1")
        records += [
            host,
            make_span(host, f"load-{i}", name=["load"], enqueued_at=host.started_at + 1),
            make_span(host, f"in-{i}", name=["load", "load"], parent_span_id=f"load-{i}",
                      enqueued_at=host.started_at + 2),
        ]  # fmt: skip
    for i in range(230):
        records.append(make_workflow_run(None, name="skim", started_at=T0 + 60 * i, id=f"r{i:04}"))
    records.append(make_workflow_run(None, name="other", started_at=T0))
    # a long tag, and another of the same start that is not it
    for i in range(215):
        host = make_cluster("long", start=T0 + 60 * i, scheduler_address="tcp://10.0.0.8:1")
        tag = f"{LONG}-a" if i < 210 else f"{LONG}-b"
        records += [host, make_span(host, f"s{i}", name=[tag], enqueued_at=host.started_at + 1)]
    with open_store(url) as store:
        write_records(store, records)
    yield url


@pytest.mark.parametrize(("kind", "name", "total"), CASES, ids=["cluster", "span", "run", "long"])
def test_every_run_once_page_by_page(store_url: str, kind: str, name: str, total: int) -> None:
    seen: list[str] = []
    times: list[float] = []
    offset = 0
    with open_store(store_url) as store:
        assert run_count(store, kind, name) == total
        while True:
            view = history_view(store, kind, name, offset=offset)
            shown = len(view.points)
            assert view.total_runs == total and view.offset == offset
            assert view.limit == HISTORY_LIMIT and shown == min(HISTORY_LIMIT, total - offset)
            assert view.newer_runs == offset
            assert view.older_runs == total - offset - shown  # what is left out, said
            # this page's runs come before those already seen, oldest first
            times[:0] = [p.at for p in view.points if p.at is not None]
            seen[:0] = [p.id for p in view.points]
            if not view.older_runs:
                break
            offset += view.limit
        assert len(seen) == len(set(seen)) == total
        assert times == sorted(times)
        beyond = history_view(store, kind, name, offset=total)
        assert beyond.points == [] and beyond.message is not None
        assert f"{total:,} runs recorded" in beyond.message


def test_the_route_and_the_command_page_alike(store_url: str) -> None:
    app = create_app(store_url)
    try:
        answer = call(app, "GET", "/api/v1/history?kind=cluster&name=nightly&offset=400")
        assert answer.status_code == 200
        body = answer.json()
        assert (body["total_runs"], body["older_runs"], body["newer_runs"]) == (450, 0, 400)
        assert len(body["points"]) == 50
        cli_run = CliRunner().invoke(
            cli,
            ["--database", store_url, "history", "cluster", "nightly", "--json", "--offset", "400"],
        )
        assert cli_run.exit_code == 0, cli_run.output
        assert json.loads(cli_run.output) == body
        table = CliRunner().invoke(cli, ["--database", store_url, "history", "cluster", "nightly"])
        assert "200 of 450 runs: 250 older and 0 newer not shown (--offset 200" in table.output
        for bad in ("-1", "x"):
            wrong = call(app, "GET", f"/api/v1/history?kind=cluster&name=nightly&offset={bad}")
            assert wrong.status_code == 400 and "offset" in wrong.text
        page = call(app, "GET", "/history?kind=cluster&name=nightly&offset=200")
        assert page.status_code == 200
        assert "200 of 450 runs" in page.text and "50 older runs not shown" in page.text
        assert 'href="/history?kind=cluster&amp;name=nightly&amp;offset=400"' in page.text
    finally:
        app.state.store.close()
