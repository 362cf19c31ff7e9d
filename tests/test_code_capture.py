"""With the config preload alone the client sends no code (Dask's
``distributed.diagnostics.computations.nframes`` defaults to 0 and lives in the client):
the cluster page and ``daskscope show`` say so and how to turn it on, instead of an
empty snippet; a computation made with the setting on keeps its code."""

from __future__ import annotations

import html
import logging
import re
from collections.abc import Iterator
from typing import Any

import dask
import dask.array as da
import pytest
from click.testing import CliRunner
from distributed import Client, LocalCluster

import daskscope
from browser import launch_chromium, needs_chromium, new_page
from daskscope.analysis.code import CODE_NOT_CAPTURED
from daskscope.cli.main import cli
from daskscope.store import list_clusters, open_store
from webutil import call, serving

pytest.importorskip("fastapi")
from daskscope.web import create_app

NFRAMES = "distributed.diagnostics.computations.nframes"


def _dasks_computations(dask_scheduler: Any) -> list[tuple[int, list[str]]]:
    return [(len(c.code), sorted(tg.name for tg in c.groups)) for c in dask_scheduler.computations]


def _words(text: str) -> str:
    return " ".join(text.split())


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    url = f"sqlite:///{tmp_path_factory.mktemp('code-capture') / 'daskscope.db'}"
    preload = {
        "distributed.scheduler.preload": ["daskscope"],
        "daskscope.database": url,
        # Dask's default, stated: register() elsewhere in this process raises it for good
        NFRAMES: 0,
    }
    with (
        dask.config.set(preload),
        LocalCluster(
            n_workers=1,
            threads_per_worker=1,
            processes=False,
            dashboard_address=":0",
            silence_logs=logging.CRITICAL,
        ) as cluster,
        Client(cluster) as client,
    ):
        x = da.ones(100, chunks=10)
        assert (x + 1).sum().compute() == 200
        with dask.config.set({NFRAMES: 2}):
            assert x.mean().compute() == 1  # the line the code must show
        truth = client.run_on_scheduler(_dasks_computations)
        daskscope.flush(client)
    with open_store(url) as store:
        (cluster_row,) = list_clusters(store, limit=None)
    app = create_app(url)
    try:
        yield {"url": url, "cluster_id": cluster_row["id"], "truth": truth, "app": app}
    finally:
        app.state.store.close()


def _by_prefix(computations: list[dict[str, Any]], prefix: str) -> dict[str, Any]:
    (found,) = [c for c in computations if any(g.startswith(prefix) for g in c["task_groups"])]
    return found


def test_dask_itself_kept_no_code_without_the_client_setting(recorded: dict[str, Any]) -> None:
    truth = {tuple(groups): frames for frames, groups in recorded["truth"]}
    assert [n for groups, n in truth.items() if any(g.startswith("sum") for g in groups)] == [0]
    assert [n for groups, n in truth.items() if any(g.startswith("mean") for g in groups)] != [0]


def test_api_says_code_not_captured_and_how(recorded: dict[str, Any]) -> None:
    body = call(recorded["app"], "GET", f"/api/v1/clusters/{recorded['cluster_id']}").json()
    without = _by_prefix(body["computations"], "sum")
    assert without["code"] == []
    assert without["code_note"] == CODE_NOT_CAPTURED
    assert NFRAMES in CODE_NOT_CAPTURED
    with_code = _by_prefix(body["computations"], "mean")
    assert with_code["code_note"] is None
    assert any("x.mean().compute()" in snippet for snippet in with_code["code"])


def test_page_html_shows_the_note_instead_of_a_snippet(recorded: dict[str, Any]) -> None:
    app = recorded["app"]
    cid = recorded["cluster_id"]
    comps = call(app, "GET", f"/api/v1/clusters/{cid}").json()["computations"]
    page = call(app, "GET", f"/clusters/{cid}").text
    for comp, expected in ((_by_prefix(comps, "sum"), True), (_by_prefix(comps, "mean"), False)):
        row = re.search(
            rf'<tr class="computation-detail" data-id="{comp["id"]}"[^>]*>(.*?)</td></tr>',
            page,
            re.S,
        )
        assert row is not None
        assert (_words(CODE_NOT_CAPTURED) in _words(html.unescape(row.group(1)))) is expected


def test_show_prints_the_note(recorded: dict[str, Any]) -> None:
    result = CliRunner().invoke(
        cli,
        ["--database", recorded["url"], "show", recorded["cluster_id"]],
        env={"COLUMNS": "300"},
        catch_exceptions=False,
    )
    assert result.exit_code == 0, result.output
    text = _words(result.output)
    # once: the computation with code shows its code instead
    assert text.count(_words(CODE_NOT_CAPTURED)) == 1
    assert "x.mean().compute()" in result.output


@needs_chromium
def test_browser_draws_the_note(recorded: dict[str, Any]) -> None:
    cid = recorded["cluster_id"]
    comps = call(recorded["app"], "GET", f"/api/v1/clusters/{cid}").json()["computations"]
    comp_id = _by_prefix(comps, "sum")["id"]
    # Chromium is launched after call(): Playwright's event loop would refuse its asyncio.run
    with serving(recorded["app"]) as base, launch_chromium() as browser:
        context, page, _ = new_page(browser)
        try:
            page.goto(f"{base}/clusters/{cid}?tab=computations")
            note = page.locator(f'tr.computation-detail[data-id="{comp_id}"] .code-note')
            assert not note.is_visible()
            page.click(f'button.expand[data-id="{comp_id}"]')
            assert note.is_visible()
            assert _words(note.inner_text()) == _words(CODE_NOT_CAPTURED)
        finally:
            context.close()


def _one_worker() -> LocalCluster:
    return LocalCluster(
        n_workers=1,
        threads_per_worker=1,
        processes=False,
        dashboard_address=":0",
        silence_logs=logging.CRITICAL,
    )


def test_code_frames_zero_leaves_the_code_off(tmp_path: Any) -> None:
    """``daskscope.code-frames: 0`` keeps Dask's capture off (each compute() then skips
    reading its caller's source), and the computation says its code was not captured;
    the default turns it on with 2 frames."""
    url = f"sqlite:///{tmp_path / 'daskscope.db'}"
    with (
        dask.config.set({NFRAMES: 0, "daskscope.code-frames": 0}),
        _one_worker() as cluster,
        Client(cluster) as client,
    ):
        daskscope.register(client, database=url)
        assert dask.config.get(NFRAMES) == 0
        assert da.ones(100, chunks=10).sum().compute() == 100
        truth = client.run_on_scheduler(_dasks_computations)
        daskscope.flush(client)
    assert [frames for frames, _ in truth] == [0]
    with open_store(url) as store:
        (cluster_row,) = list_clusters(store, limit=None)
    app = create_app(url)
    try:
        body = call(app, "GET", f"/api/v1/clusters/{cluster_row['id']}").json()
    finally:
        app.state.store.close()
    (computation,) = body["computations"]
    assert computation["code"] == []
    assert computation["code_note"] == CODE_NOT_CAPTURED

    with (
        dask.config.set({NFRAMES: 0}),
        _one_worker() as cluster,
        Client(cluster) as client,
    ):
        daskscope.register(client, database=url)
        assert dask.config.get(NFRAMES) == 2  # the default of daskscope.code-frames
