"""The task timeline's view, API and ``daskscope timeline`` on a real recorded run,
against Dask's own task stream over the same run (``client.get_task_stream()``), on
SQLite and PostgreSQL; and the busy/idle arithmetic on hand-built intervals."""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dask
import dask.array as da
import pytest
from click.testing import CliRunner
from distributed import Client, LocalCluster, get_task_stream, span
from distributed.utils import key_split_group

import daskscope
from daskscope.cli.main import cli
from daskscope.cli.timeline import sparkline
from daskscope.store import UnknownCluster, open_store, write_records
from daskscope.tasklog.timeline import idle_gaps, merged, spread
from daskscope.views import to_data
from daskscope.views.timeline import (
    prefix_colour,
    span_of_tag,
    task_detail_view,
    timeline_view,
)
from factories import make_cluster
from webutil import call

SLOW = [0.12 + 0.02 * i for i in range(6)]  # seconds each slow task sleeps
PAUSE = 0.6  # seconds with nothing submitted, between two computations


def slow(i: int, seconds: float) -> int:
    time.sleep(seconds)
    return i


def record_run(url: str) -> dict[str, Any]:
    """2 workers x 2 threads: an array workload with transfers, a pause, and slow tasks
    in a span; Dask's task stream over the same run is the ground truth."""
    with (
        LocalCluster(
            n_workers=2,
            threads_per_worker=2,
            processes=False,
            dashboard_address=":0",
            silence_logs=logging.CRITICAL,
        ) as cluster,
        Client(cluster) as client,
    ):
        cluster_id = daskscope.register(client, database=url, name="timeline test")
        with get_task_stream(client) as stream:
            x = da.random.random((600, 600), chunks=100)
            (x + x.T).sum().compute()
            time.sleep(PAUSE)
            with dask.config.set({"optimization.fuse.active": False}), span("slow work"):
                dask.compute(*[dask.delayed(slow)(i, s) for i, s in enumerate(SLOW)])
        assert daskscope.flush(client)["write_failures"] == 0
    return {"url": url, "cluster_id": cluster_id, "stream": list(stream.data)}


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def run(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Any]]:
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path_factory.mktemp('timeline') / 'store.db'}"
    else:
        import psycopg

        server = request.getfixturevalue("postgres_server")
        name = f"t_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(server.replace("+psycopg", "") + "/postgres", autocommit=True) as c:
            c.execute(f"CREATE DATABASE {name}")
        url = f"{server}/{name}"
    recorded = record_run(url)
    with open_store(url) as store:
        yield {**recorded, "store": store}


def compute_intervals(stream: list[dict[str, Any]]) -> list[tuple[float, float]]:
    return [
        (ss["start"], ss["stop"])
        for t in stream
        for ss in t["startstops"]
        if ss["action"] == "compute"
    ]


def overlap(intervals: list[tuple[float, float]], a: float, b: float) -> float:
    return sum(max(0.0, min(stop, b) - max(start, a)) for start, stop in intervals)


def resolution(intervals: list[Any]) -> float:
    """What the stored times may differ by, summed: a microsecond each end."""
    return 2e-6 * max(1, len(intervals))


def test_lanes_are_the_threads_the_task_stream_saw(run: dict[str, Any]) -> None:
    view = timeline_view(run["store"], run["cluster_id"])
    truth = {(t["worker"], t["thread"]) for t in run["stream"]}
    assert {(lane.worker, lane.thread) for lane in view.lanes} == truth
    assert view.totals.threads == len(truth) == 4
    assert view.totals.workers == 2
    # labels read "worker · n", threads numbered from 1 within their worker
    for lane in view.lanes:
        address, number = lane.label.split(" · ")
        assert lane.worker.endswith(address) and number in ("1", "2")
    assert view.raw and view.totals.tasks == len(run["stream"])
    # every execution sits on its thread's row
    by_key = {str(t["key"]): (t["worker"], t["thread"]) for t in run["stream"]}
    for task in view.tasks:
        lane = view.lanes[task.lane]
        assert (lane.worker, lane.thread) == by_key[task.key]


def test_utilisation_is_busy_time_from_the_task_stream(run: dict[str, Any]) -> None:
    view = timeline_view(run["store"], run["cluster_id"])
    busy = compute_intervals(run["stream"])
    assert view.start is not None and view.stop is not None
    window = view.stop - view.start
    near = resolution(busy)
    assert view.totals.busy_s == pytest.approx(overlap(busy, view.start, view.stop), abs=near)
    assert view.totals.utilisation == pytest.approx(
        overlap(busy, view.start, view.stop) / (4 * window), abs=near / window
    )
    # over time: each bin's busy seconds, counted from the stream by its own sums
    assert len(view.utilisation) == 100
    for b in view.utilisation:
        assert b.busy_s == pytest.approx(overlap(busy, b.start, b.stop), abs=near)
        # (epoch seconds hold a bin's width to about a microsecond)
        # (capped at every thread busy)
        assert b.fraction == pytest.approx(min(1.0, b.busy_s / (4 * (b.stop - b.start))), rel=1e-4)
    # per thread
    for lane in view.lanes:
        mine = [
            (ss["start"], ss["stop"])
            for t in run["stream"]
            if (t["worker"], t["thread"]) == (lane.worker, lane.thread)
            for ss in t["startstops"]
            if ss["action"] == "compute"
        ]
        assert lane.busy_s == pytest.approx(overlap(mine, view.start, view.stop), abs=near)


def test_the_pause_is_the_longest_idle_gap(run: dict[str, Any]) -> None:
    view = timeline_view(run["store"], run["cluster_id"])
    # the stream's compute intervals merged by hand: the gaps between them
    spans = sorted(compute_intervals(run["stream"]))
    gaps, reach = [], spans[0][1]
    for a, b in spans[1:]:
        if a > reach:
            gaps.append(a - reach)
        reach = max(reach, b)
    found = (view.idle_gaps[:3], sorted(gaps)[-3:])  # what a failure shows
    assert view.idle_gaps[0].lane is None, found
    assert view.idle_gaps[0].duration_s == pytest.approx(max(gaps), abs=4e-6), found
    assert view.idle_gaps[0].duration_s >= PAUSE, found
    assert [g.duration_s for g in view.idle_gaps] == sorted(
        (g.duration_s for g in view.idle_gaps), reverse=True
    )


def test_slowest_tasks_are_the_stream_s(run: dict[str, Any]) -> None:
    view = timeline_view(run["store"], run["cluster_id"])
    # the longest executions: first start to last stop of their actions
    took = {
        str(t["key"]): max(ss["stop"] for ss in t["startstops"])
        - min(ss["start"] for ss in t["startstops"])
        for t in run["stream"]
    }
    truth = sorted(took, key=lambda k: -took[k])[: len(SLOW)]
    assert [t.key for t in view.slowest[: len(SLOW)]] == truth
    for t in view.slowest:
        assert t.stop - t.start == pytest.approx(took[t.key], abs=4e-6)
    computed = {
        str(t["key"]): sum(
            ss["stop"] - ss["start"] for ss in t["startstops"] if ss["action"] == "compute"
        )
        for t in run["stream"]
    }
    for t in view.slowest:
        assert t.compute_s == pytest.approx(computed[t.key], abs=4e-6)


def test_a_span_filter_shows_its_tasks_only(run: dict[str, Any]) -> None:
    store, cluster_id = run["store"], run["cluster_id"]
    span_id = span_of_tag(store, cluster_id, "slow work")
    view = timeline_view(store, cluster_id, span_id=span_id)
    assert view.filters.span == span_id
    slow_keys = {str(t["key"]) for t in run["stream"] if str(t["key"]).startswith("slow-")}
    assert {t.key for t in view.tasks} == slow_keys
    assert [p.prefix for p in view.prefixes] == ["slow"]
    with pytest.raises(LookupError, match=r"no span .* has the tag 'nope'.*'slow work'"):
        span_of_tag(store, cluster_id, "nope")


def test_a_group_filter_and_a_narrow_window(run: dict[str, Any]) -> None:
    store, cluster_id = run["store"], run["cluster_id"]
    whole = timeline_view(store, cluster_id)
    group = whole.slowest[0].group
    only = timeline_view(store, cluster_id, group=group)
    assert {t.group for t in only.tasks} == {group}
    # a window around the slowest task holds it
    task = whole.slowest[0]
    narrow = timeline_view(store, cluster_id, task.start - 0.001, task.stop + 0.001)
    assert narrow.start == pytest.approx(task.start - 0.001)
    assert task.key in {t.key for t in narrow.tasks}
    with pytest.raises(ValueError, match="must be after its start"):
        timeline_view(store, cluster_id, 10.0, 5.0)


def test_bins_hold_the_same_busy_time_as_the_tasks(run: dict[str, Any]) -> None:
    store, cluster_id = run["store"], run["cluster_id"]
    raw = timeline_view(store, cluster_id)
    binned = timeline_view(store, cluster_id, width_bins=200, max_tasks=10)
    assert raw.raw and not binned.raw
    assert binned.tasks == [] and any(lane.bins and lane.bins.start for lane in binned.lanes)
    # (the bins' sums are taken on times relative to the window: a microsecond a task)
    near = resolution(raw.tasks)
    assert binned.totals.busy_s == pytest.approx(raw.totals.busy_s, abs=near)
    for a, b in zip(raw.lanes, binned.lanes, strict=True):
        assert b.label == a.label
        assert b.busy_s == pytest.approx(a.busy_s, abs=near)
    assert binned.resolution_s > 0
    for lane in binned.lanes:
        assert lane.bins is not None
        assert sum(lane.bins.busy_s.get("compute", [])) == pytest.approx(lane.busy_s, abs=near)
        for at in lane.bins.top_group:
            if at >= 0:
                group = binned.bin_groups[at]
                assert group.colour == prefix_colour(group.prefix)
    # the bins' groups are groups of the run, by the stream's keys
    groups = {key_split_group(t["key"]) for t in run["stream"]}
    assert {g.name for g in binned.bin_groups} <= groups


def test_task_lookup(run: dict[str, Any]) -> None:
    store, cluster_id = run["store"], run["cluster_id"]
    some = run["stream"][len(run["stream"]) // 2]
    detail = task_detail_view(store, cluster_id, str(some["key"]))
    assert detail is not None and len(detail.executions) == 1
    (execution,) = detail.executions
    lane = detail.lanes[execution.lane]
    assert (lane.worker, lane.thread) == (some["worker"], some["thread"])
    # the same actions (the store lists them by start)
    assert sorted((a.action, a.source) for a in execution.actions) == sorted(
        (ss["action"], ss.get("source")) for ss in some["startstops"]
    )
    assert execution.start == pytest.approx(min(ss["start"] for ss in some["startstops"]), abs=2e-6)
    assert task_detail_view(store, cluster_id, "no-such-key") is None


def test_cli_json_is_the_api_json(run: dict[str, Any]) -> None:
    from daskscope.web import create_app

    runner = CliRunner()
    result = runner.invoke(cli, ["--database", run["url"], "timeline", run["cluster_id"], "--json"])
    assert result.exit_code == 0, result.output
    app = create_app(run["store"])
    response = call(app, "GET", f"/api/v1/clusters/{run['cluster_id']}/timeline")
    assert response.status_code == 200
    assert json.loads(result.output) == response.json()
    key = run["stream"][0]["key"]
    from urllib.parse import quote

    one = call(app, "GET", f"/api/v1/clusters/{run['cluster_id']}/tasks/{quote(str(key), safe='')}")
    assert one.status_code == 200 and one.json()["key"] == str(key)
    missing = call(app, "GET", f"/api/v1/clusters/{run['cluster_id']}/tasks/nope")
    assert missing.status_code == 404 and "no task 'nope'" in missing.json()["error"]["message"]
    bad = call(app, "GET", f"/api/v1/clusters/{run['cluster_id']}/timeline?start=10&stop=5")
    assert bad.status_code == 400


def test_cli_summary(run: dict[str, Any]) -> None:
    result = CliRunner().invoke(cli, ["--database", run["url"], "timeline", run["cluster_id"][:8]])
    assert result.exit_code == 0, result.output
    view = timeline_view(run["store"], run["cluster_id"])
    out = result.output
    assert f"{len(run['stream'])} task executions · 2 workers, 4 threads in all" in out
    assert "utilisation" in out and "longest gaps with no thread computing" in out
    assert view.slowest[0].key in out
    # by a span's tag
    tagged = CliRunner().invoke(
        cli, ["--database", run["url"], "timeline", run["cluster_id"], "--span", "slow work"]
    )
    assert tagged.exit_code == 0, tagged.output
    assert f"{len(SLOW)} task executions" in tagged.output


def test_cli_errors(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    cluster = make_cluster("no tasks kept")
    with open_store(url) as store:
        write_records(store, [cluster])
        assert not timeline_view(store, cluster.id).recorded
        with pytest.raises(UnknownCluster):
            timeline_view(store, "f" * 36)
    runner = CliRunner()
    result = runner.invoke(cli, ["--database", url, "timeline", cluster.id])
    assert result.exit_code == 2
    assert "daskscope.tasks.enabled off" in result.output
    unknown = runner.invoke(cli, ["--database", url, "timeline", "ffffffff"])
    assert unknown.exit_code == 2 and "no cluster with id 'ffffffff'" in unknown.output
    as_json = runner.invoke(cli, ["--database", url, "timeline", cluster.id, "--json"])
    assert as_json.exit_code == 0 and json.loads(as_json.output)["recorded"] is False
    # the page says why there is nothing to draw
    from daskscope.web import create_app

    app = create_app(url)
    page = call(app, "GET", f"/clusters/{cluster.id}/timeline")
    assert page.status_code == 200
    assert "daskscope.tasks.enabled" in page.text and 'id="timeline"' not in page.text
    assert call(app, "GET", "/clusters/ffffffff/timeline").status_code == 404
    app.state.store.close()


# -- busy and idle on hand-built intervals ---------------------------------------------


def test_merged_and_idle_gaps() -> None:
    assert merged([(3, 4), (0, 1), (0.5, 2), (2, 2.5), (5, 5)]) == [(0, 2.5), (3, 4)]
    assert idle_gaps([(1, 2), (4, 5)], 0, 10) == [(5, 10), (2, 4), (0, 1)]
    assert idle_gaps([(0, 10)], 2, 8) == []
    assert idle_gaps([], 0, 1) == [(0, 1)]


def test_spread_counts_overlaps() -> None:
    # one second busy over two bins of 0.5 s, a zero-length one in the second
    assert spread([(0.25, 1.25, 1.0), (1.5, 1.5, 7.0)], 0, 2, 2) == pytest.approx([0.75, 7.25])
    assert spread([(-1, 3, 4.0)], 0, 2, 4) == pytest.approx([0.5] * 4)
    assert sum(spread([(0.1, 0.7, 0.6)], 0, 1, 7)) == pytest.approx(0.6)


def test_sparkline() -> None:
    assert sparkline([0.0, 1.0]) == " █"
    assert sparkline([0.0] * 50 + [1.0] * 50, width=2) == " █"
    assert sparkline([]) == ""


def test_colours_are_stable_and_not_the_activities() -> None:
    from daskscope.catalogue import ACTIVITY_COLOURS, RESERVE

    assert prefix_colour("sum-aggregate") == prefix_colour("sum-aggregate")
    activities = {*ACTIVITY_COLOURS.values(), *RESERVE}  # a prefix never reads as one
    assert not {prefix_colour(f"p{i}") for i in range(200)} & activities


def test_view_encodes(run: dict[str, Any]) -> None:
    data = to_data(timeline_view(run["store"], run["cluster_id"]))
    assert data["raw"] is True and data["lanes"][0]["label"]
