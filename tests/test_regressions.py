"""Regression flags: the statistic on hand-built series, then on real runs of one
in-process cluster: the span "load" runs 8 times at one speed and 3 times slowed, the
span "steady" 11 times at one speed, interleaved (so both see the same machine)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import dask
import pytest
from click.testing import CliRunner
from distributed import Client, LocalCluster, span

import daskscope
from daskscope.analysis.regression import check_series
from daskscope.cli.main import cli
from daskscope.store import open_store
from daskscope.views.encode import to_data
from daskscope.views.history import history_view, regressions_view
from webutil import call

# The slowed runs sleep 10 times longer: on a busy machine (all tests run beside other
# work) a task may stall for most of a second, and one stall in the baseline widens its
# sigma; a slowdown well beyond that is what the test asks the rule to see.
FAST, SLOW, RUNS, SLOWED = 0.1, 1.0, 11, 3
CLOCK_CORRECTION = 0.05


# -- the statistic on hand-built series


def test_a_constant_history_does_not_flag_a_tiny_change() -> None:
    check = check_series([1.0] * 10 + [1.01] * 3, "lower")
    # sigma is 0, floored at 2 % of the mean: the threshold is 1 + 3 * 0.02
    assert check.status == "ok"
    assert check.sigma == pytest.approx(0.02) and check.threshold == pytest.approx(1.06)


def test_a_step_change_flags() -> None:
    history = [1.0, 1.02, 0.98, 1.01, 0.99, 1.0, 1.03, 0.97, 1.0, 1.0]
    check = check_series([*history, 1.5, 1.6, 1.55], "lower")
    assert check.status == "regressed"
    assert check.recent == (1.5, 1.6, 1.55) and check.baseline_runs == 10
    assert check.mean == pytest.approx(1.0)
    # better higher: a drop is the regression, a rise is not
    assert check_series([*history, 0.5, 0.5, 0.5], "higher").status == "regressed"
    assert check_series([*history, 1.5, 1.6, 1.55], "higher").status == "ok"


def test_one_noisy_run_never_flags() -> None:
    history = [1.0, 1.02, 0.98, 1.01, 0.99, 1.0, 1.03, 0.97, 1.0, 1.0]
    for recent in ([1.0, 1.0, 9.0], [9.0, 1.0, 1.0], [1.0, 9.0, 1.0]):
        assert check_series([*history, *recent], "lower").status == "ok"
    # two out of three is not all three either
    assert check_series([*history, 9.0, 9.0, 1.0], "lower").status == "ok"


def test_too_few_runs_and_missing_values() -> None:
    check = check_series([1.0, 1.0, 1.0, 1.0, 5.0, 5.0, 5.0], "lower")
    assert check.status == "too few runs" and check.baseline_runs == 4
    assert check.threshold is None
    # runs without the figure do not count
    assert check_series([1.0] * 4 + [None] * 3 + [5.0] * 3, "lower").status == "too few runs"
    assert check_series([1.0] * 5 + [None, float("nan")] + [5.0] * 3, "lower").status == (
        "regressed"
    )


def test_only_the_ten_runs_before_count() -> None:
    # an old slow era (20 runs at 5) then 10 at 1: the last 3 at 1.5 are beyond the ten
    # before them, whatever came earlier
    check = check_series([5.0] * 20 + [1.0] * 10 + [1.5] * 3, "lower")
    assert check.status == "regressed" and check.baseline_runs == 10
    assert check.mean == pytest.approx(1.0)


def test_a_noisy_history_needs_a_bigger_move() -> None:
    noisy = [1.0, 1.4, 0.7, 1.3, 0.8, 1.2, 0.6, 1.1, 0.9, 1.0]
    assert check_series([*noisy, 1.5, 1.5, 1.5], "lower").status == "ok"
    assert check_series([*noisy, 3.0, 3.0, 3.0], "lower").status == "regressed"


def test_bad_arguments_say_what_is_wanted() -> None:
    with pytest.raises(ValueError, match="better must be"):
        check_series([1.0], "sideways")  # type: ignore[arg-type]


# -- real runs


def nap(seconds: float, i: int) -> int:
    time.sleep(seconds)
    return i


async def heartbeat(dask_worker: Any) -> None:
    await dask_worker.heartbeat()


def groups_left(dask_scheduler: Any) -> int:
    return len(dask_scheduler.task_groups)


def run_in_span(client: Client, tag: str, seconds: float) -> None:
    """Two tasks in a new span ``tag``. Dask puts a task into its group's span, and the
    group ("nap") lives until its tasks are forgotten: wait for that first, or the new
    tasks would join the previous span."""
    deadline = time.monotonic() + 10
    while client.run_on_scheduler(groups_left):
        assert time.monotonic() < deadline, "the previous run's tasks were never forgotten"
        time.sleep(0.01)
    with span(tag):
        dask.compute(*[dask.delayed(nap)(seconds, i) for i in range(2)])


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    url = f"sqlite:///{tmp_path_factory.mktemp('regressions') / 'store.db'}"
    walls: dict[str, list[float]] = {"load": [], "steady": []}
    with (
        LocalCluster(
            n_workers=1, threads_per_worker=2, processes=False, dashboard_address=":0"
        ) as lc,
        Client(lc) as client,
    ):
        cluster_id = daskscope.register(client, database=url, name="regressions-test")
        for run in range(RUNS):
            for tag, seconds in (
                ("steady", FAST),
                ("load", SLOW if run >= RUNS - SLOWED else FAST),
            ):
                started = time.time()
                run_in_span(client, tag, seconds)
                walls[tag].append(time.time() - started)
        client.run(heartbeat)
        assert daskscope.flush(client)["write_failures"] == 0
    yield {"url": url, "cluster_id": cluster_id, "walls": walls}


def test_slowed_runs_are_flagged_with_their_numbers(recorded: dict[str, Any]) -> None:
    with open_store(recorded["url"]) as store:
        view = history_view(store, "span", "load")
    assert len(view.points) == RUNS
    walls = next(s for s in view.series if s.id == "span.wall_s")
    flagged = [(s.id, s.texts, s.check) for s in view.series if s.id in view.regressed]
    assert view.regressed == ["span.wall_s"], (walls.texts, walls.check, flagged)
    wall = next(s for s in view.series if s.id == "span.wall_s")
    assert wall.flagged == [RUNS - 3, RUNS - 2, RUNS - 1]
    check = wall.check
    assert check is not None and check.status == "regressed"
    assert check.baseline_runs == RUNS - SLOWED
    # each recorded wall time lies between the tasks' sleep and the test's own clock
    measured = recorded["walls"]["load"]
    for value, outer in zip(wall.values, measured, strict=True):
        assert value is not None
        assert value <= outer
    # Dask clamps a span's start to when it was enqueued, correcting the workers' clock
    # offsets: a 1 s span may read a few milliseconds short on a loaded machine
    for value in check.recent:
        assert value >= SLOW - CLOCK_CORRECTION
    # (the same for the 0.1 s runs: one read below 0.1 s in a CI run)
    baseline = wall.values[: RUNS - SLOWED]
    assert all(v is not None and FAST - CLOCK_CORRECTION <= v < SLOW for v in baseline), baseline
    assert check.threshold is not None and check.threshold < SLOW
    assert check.recent_text == [wall.texts[i] for i in wall.flagged]
    assert "all above" in check.summary and check.threshold_text in check.summary


def test_same_speed_runs_are_not_flagged(recorded: dict[str, Any]) -> None:
    with open_store(recorded["url"]) as store:
        view = history_view(store, "span", "steady")
        listing = regressions_view(store)
    assert len(view.points) == RUNS and view.regressed == []
    wall = next(s for s in view.series if s.id == "span.wall_s")
    assert wall.check is not None and wall.check.status == "ok" and wall.flagged == []
    flagged = {(r.kind, r.name, r.figure) for r in listing.regressions}
    assert flagged == {("span", "load", "span.wall_s")}
    assert listing.checked >= 2  # "load", "steady" (and the cluster's own tags)


def test_cli_exit_codes_and_json(recorded: dict[str, Any]) -> None:
    from daskscope.web import create_app

    url = recorded["url"]
    result = CliRunner().invoke(cli, ["--database", url, "regressions", "--json"])
    assert result.exit_code == 1, result.output
    app = create_app(url)
    try:
        answer = call(app, "GET", "/api/v1/regressions")
        assert answer.status_code == 200
        assert json.loads(result.output) == answer.json()
        history = call(app, "GET", "/api/v1/history?kind=span&name=load")
        cli_history = CliRunner().invoke(
            cli, ["--database", url, "history", "span", "load", "--json"]
        )
        assert cli_history.exit_code == 0
        assert json.loads(cli_history.output) == history.json()
        with open_store(url) as store:
            assert history.json() == to_data(history_view(store, "span", "load"))
        assert call(app, "GET", "/api/v1/history?kind=nope&name=load").status_code == 400
    finally:
        app.state.store.close()
    table = CliRunner().invoke(cli, ["--database", url, "regressions"])
    assert table.exit_code == 1 and "load" in table.output and "wall time" in table.output
    steady = CliRunner().invoke(cli, ["--database", url, "regressions", "--name", "steady"])
    assert steady.exit_code == 0, steady.output
    assert "no regressions (1 recurring things checked)" in steady.output
    history = CliRunner().invoke(cli, ["--database", url, "history", "span", "load"])
    assert history.exit_code == 0 and "regressed: wall time" in history.output
    broken = CliRunner().invoke(cli, ["--database", "nosuch://x", "regressions"])
    assert broken.exit_code == 2 and "error:" in broken.output


# -- every kind, on both stores (hand-built records, nightly for 11 days)


def test_runs_clusters_and_nested_tags_on_both_stores(store: Any) -> None:
    import datetime as dt

    from daskscope.store import write_records
    from factories import make_cluster, make_span, make_workflow_run

    now = dt.datetime.now(dt.UTC).timestamp()
    records: list[Any] = []
    for day in range(11):
        slowed = day >= 8
        start = now - (11 - day) * 86400
        cluster = make_cluster(
            "nightly", start=start, compute_seconds=(20_000.0 if slowed else 40_000.0)
        )
        records.append(cluster)
        records.append(
            make_workflow_run(
                cluster, name="skim", wall_time_s=20.0 if slowed else 10.0 + day % 2 * 0.1
            )
        )
        # "load" nested in "pipeline": the tag matches the inner span only once
        outer = make_span(cluster, "outer", name=["pipeline"], started_at=start + 1,
                          stopped_at=start + 30, done=True)  # fmt: skip
        inner = make_span(cluster, "inner", name=["pipeline", "load"], parent_span_id="outer",
                          started_at=start + 1, stopped_at=start + (20 if slowed else 11),
                          done=True)  # fmt: skip
        records += [outer, inner]
    write_records(store, records)

    runs = history_view(store, "run", "skim")
    assert len(runs.points) == 11 and runs.regressed == ["workflow.wall_time_s"]
    clusters = history_view(store, "cluster", "nightly")
    assert len(clusters.points) == 11 and clusters.regressed == ["cluster.utilisation"]
    load = history_view(store, "span", "load")
    assert len(load.points) == 11 and load.regressed == ["span.wall_s"]
    wall = next(s for s in load.series if s.id == "span.wall_s")
    assert wall.values == [10.0] * 8 + [19.0] * 3
    # "pipeline" carries the outer span (its child carries the tag too, and is not counted)
    pipeline = history_view(store, "span", "pipeline")
    assert len(pipeline.points) == 11 and pipeline.regressed == []
    found = {(r.kind, r.name, r.figure) for r in regressions_view(store).regressions}
    assert found == {
        ("run", "skim", "workflow.wall_time_s"),
        ("cluster", "nightly", "cluster.utilisation"),
        ("span", "load", "span.wall_s"),
    }
    assert regressions_view(store, name="pipeline").regressions == []
    # compare two runs of the same name: wall time doubled, worse
    first, last = runs.points[0].reference, runs.points[-1].reference
    from daskscope.views.compare import compare_view

    view = compare_view(store, first, last)
    wall_time = next(f for f in view.figures if f.id == "workflow.wall_time_s")
    assert (wall_time.a, wall_time.b, wall_time.verdict) == (10.0, 20.0, "worse")
    assert wall_time.ratio_text == "×2.00"  # noqa: RUF001
