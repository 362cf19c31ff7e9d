"""Regression flags: the statistic on hand-built series, then on real runs of one
in-process cluster: the span "load" runs 8 times at one speed and 3 times slowed, the
span "steady" 11 times at one speed, interleaved (so both see the same machine); then
every kind, and spans Dask merged, on hand-built records in both stores. The CI gate on
a doubled prefix while wall time wobbles: ``test_regressions_gate.py``."""

# ruff: noqa: RUF002, RUF003 (the typographic sigma and multiplication sign of the docs)

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
from daskscope.analysis.compare import verdict
from daskscope.analysis.regression import changed, check_series
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
    # the MAD is 0: the margin is the minimum change, 25 % of the median
    assert check.status == "ok" and check.sigma == 0.0 and check.z == (None, None, None)
    assert check.margin == pytest.approx(0.25) and check.threshold == pytest.approx(1.25)
    # a real change of a constant history flags
    assert check_series([1.0] * 10 + [1.3] * 3, "lower").status == "regressed"


def test_a_step_change_flags() -> None:
    history = [1.0, 1.02, 0.98, 1.01, 0.99, 1.0, 1.03, 0.97, 1.0, 1.0]
    check = check_series([*history, 1.5, 1.6, 1.55], "lower")
    assert check.status == "regressed"
    assert check.recent == (1.5, 1.6, 1.55) and check.baseline_runs == 10
    assert check.median == pytest.approx(1.0)
    # σ = 1.4826 × MAD: the deviations from 1.0 have a median of 0.01
    assert check.sigma == pytest.approx(1.4826 * 0.01)
    assert check.z[0] == pytest.approx(0.5 / (1.4826 * 0.01))
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
    assert check.median == pytest.approx(1.0)


def test_a_noisy_history_needs_a_bigger_move() -> None:
    noisy = [1.0, 1.4, 0.7, 1.3, 0.8, 1.2, 0.6, 1.1, 0.9, 1.0]
    check = check_series([*noisy, 1.5, 1.5, 1.5], "lower")
    # median 1.0, MAD 0.2: the margin is 3 × 1.4826 × 0.2
    assert check.status == "ok" and check.margin == pytest.approx(3 * 1.4826 * 0.2)
    assert check_series([*noisy, 3.0, 3.0, 3.0], "lower").status == "regressed"


def test_a_stall_in_the_baseline_does_not_hide_a_change() -> None:
    # one run of the baseline stalled (10×): a mean ± 3 standard deviations would put the
    # threshold above 10 and miss the next change; the median and MAD barely move
    stalled = [1.0, 1.02, 0.98, 1.01, 10.0, 0.99, 1.0, 1.03, 0.97, 1.0]
    check = check_series([*stalled, 2.0, 2.1, 2.0], "lower")
    assert check.status == "regressed" and check.threshold is not None
    assert check.threshold < 1.3


def test_wall_time_wobbling_twenty_per_cent_does_not_flag() -> None:
    wobble = [1.0, 1.2, 0.8, 1.1, 0.9, 1.0, 0.8, 1.2, 0.9, 1.1]
    assert check_series([*wobble, 1.2, 1.2, 1.2], "lower").status == "ok"
    assert check_series([*wobble, 0.8, 0.8, 0.8], "higher").status == "ok"
    assert check_series([*wobble, 2.0, 2.0, 2.0], "lower").status == "regressed"


def test_times_below_the_floor_of_seconds_are_noise() -> None:
    # +40 % of 0.2 s is 80 ms: beyond 25 %, below the 100 ms a busy machine resolves
    series = [0.2] * 10 + [0.28] * 3
    assert check_series(series, "lower").status == "regressed"
    assert check_series(series, "lower", min_abs=0.1).status == "ok"
    assert check_series([0.2] * 10 + [0.4] * 3, "lower", min_abs=0.1).status == "regressed"


def test_compare_reads_noise_as_same() -> None:
    # the floors: 25 % of a, and 100 ms for seconds
    assert not changed(1.0, 1.2) and changed(1.0, 1.3) and changed(1.0, 0.7)
    assert verdict(1.0, 1.2, "lower", unit="seconds") == "same"
    assert verdict(1.0, 2.0, "lower", unit="seconds") == "worse"
    assert verdict(1.0, 0.5, "lower", unit="seconds") == "better"
    assert verdict(0.2, 0.28, "lower", unit="seconds") == "same"  # 80 ms
    assert verdict(0.2, 0.28, "lower", unit="count") == "worse"
    assert verdict(0.0, 1.0, "lower", unit="count") == "worse"  # no errors, then one
    assert verdict(0.0, 0.0, "lower", unit="count") == "same"
    assert verdict(1.0, 2.0, None) is None and verdict(None, 2.0, "lower") is None
    # a noisy history widens it: 3 × 20 % of a
    assert verdict(1.0, 1.5, "lower", relative_sigma=0.2) == "same"
    assert verdict(1.0, 1.7, "lower", relative_sigma=0.2) == "worse"


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
    # wall time, task time and the task time of its one prefix, "nap", each ten times
    assert view.regressed == ["span.duration_s", "span.wall_s", "prefix.duration_s:nap"], (
        walls.texts, walls.check, flagged,
    )  # fmt: skip
    series = {s.id: s for s in view.series}
    nap, task_time = series["prefix.duration_s:nap"], series["span.duration_s"]
    assert nap.prefix == "nap" and nap.label == "task time of nap"
    assert nap.values == pytest.approx(task_time.values)  # the span's only prefix
    for value in nap.check.recent if nap.check else ():
        assert value >= 2 * SLOW * 0.99  # two tasks sleeping SLOW each
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
    assert flagged == {
        ("span", "load", "span.wall_s"),
        ("span", "load", "span.duration_s"),
        ("span", "load", "prefix.duration_s:nap"),
    }
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
    from factories import (
        make_cluster,
        make_computation,
        make_group,
        make_prefix,
        make_span,
        make_workflow_run,
    )

    now = dt.datetime.now(dt.UTC).timestamp()
    records: list[Any] = []
    for day in range(11):
        slowed = day >= 8
        start = now - (11 - day) * 86400
        # compute time doubles on the same workers: utilisation rises, which is no better
        cluster = make_cluster(
            "nightly", start=start, compute_seconds=(40_000.0 if slowed else 20_000.0 + day)
        )
        # the cluster's prefixes: "sum" doubles, "load" stays
        prefixes = [
            make_prefix(cluster, "sum", duration_s=200.0 if slowed else 100.0 + day % 3),
            make_prefix(cluster, "load", duration_s=50.0 + day % 2),
        ]
        # the workflow run's computation: its group "inc-1" doubles with the wall time
        comp = make_computation(cluster, 0)
        group = make_group(cluster, "inc-1", computation_id=comp.id,
                           duration_s=30.0 if slowed else 15.0 + day % 2 * 0.5)  # fmt: skip
        run = make_workflow_run(cluster, name="skim", computation_ids=[comp.id],
                                wall_time_s=20.0 if slowed else 10.0 + day % 2 * 0.1)  # fmt: skip
        # "load" nested in "pipeline": the tag matches the inner span only once
        outer = make_span(cluster, "outer", name=["pipeline"], started_at=start + 1,
                          stopped_at=start + 30, done=True)  # fmt: skip
        inner = make_span(cluster, "inner", name=["pipeline", "load"], parent_span_id="outer",
                          started_at=start + 1, stopped_at=start + (20 if slowed else 11),
                          done=True)  # fmt: skip
        records += [cluster, *prefixes, comp, group, run, outer, inner]
        if day == 0:  # a run recorded with its span: its prefixes from the span's subtree
            read = make_group(cluster, "read-1", span_id="inner", duration_s=7.0)
            spanned = make_workflow_run(cluster, id="by-span-0", name="by-span", span_id="outer")
            records += [read, spanned]
    records += _merged_service(now, make_cluster, make_computation, make_group, make_span)
    write_records(store, records)

    by_span = history_view(store, "run", "by-span")
    assert [(s.id, s.values) for s in by_span.series if s.prefix] == [
        ("prefix.duration_s:read", [7.0])
    ]
    runs = history_view(store, "run", "skim")
    assert len(runs.points) == 11
    assert runs.regressed == ["workflow.wall_time_s", "prefix.duration_s:inc"]
    clusters = history_view(store, "cluster", "nightly")
    assert len(clusters.points) == 11
    assert clusters.regressed == ["cluster.compute_seconds", "prefix.duration_s:sum"]
    assert [s.prefix for s in clusters.series if s.prefix] == ["sum", "load"]
    load = history_view(store, "span", "load")
    assert len(load.points) == 11 and load.regressed == ["span.wall_s"]
    wall = next(s for s in load.series if s.id == "span.wall_s")
    assert wall.values == [10.0] * 8 + [19.0] * 3
    # "pipeline" carries the outer span (its child carries the tag too, and is not counted)
    pipeline = history_view(store, "span", "pipeline")
    assert len(pipeline.points) == 11 and pipeline.regressed == []
    # ten runs of "etl" that Dask merged into one span: ten runs
    etl = history_view(store, "span", "etl")
    assert [p.id.rsplit("/", 1)[1] for p in etl.points] == [f"etl-{i}" for i in range(10)]
    series = {s.id: s for s in etl.series}
    assert series["prefix.duration_s:transform"].values == [4.0] * 7 + [8.0] * 3
    assert series["span.wall_s"].values == pytest.approx([20.0 * w for w in _WOBBLE])
    assert "span.active_cpu_seconds" not in series  # Dask's, of the merged span only
    assert "prefix.duration_s:transform" in etl.regressed
    assert not {"span.wall_s", "prefix.duration_s:extract"} & set(etl.regressed)
    found = {(r.kind, r.name, r.figure) for r in regressions_view(store).regressions}
    assert found == {
        ("run", "skim", "workflow.wall_time_s"),
        ("run", "skim", "prefix.duration_s:inc"),
        ("cluster", "nightly", "cluster.compute_seconds"),
        ("cluster", "nightly", "prefix.duration_s:sum"),
        ("span", "load", "span.wall_s"),
        ("span", "etl", "prefix.duration_s:transform"),
        *(("span", "etl", f) for f in etl.regressed if f != "prefix.duration_s:transform"),
    }
    assert regressions_view(store, name="pipeline").regressions == []
    from daskscope.store.history import recurring_names

    assert "etl" in recurring_names(store, min_runs=8, account="atlas")["span"]
    assert recurring_names(store, min_runs=8, account="nobody")["span"] == []
    assert "etl" not in recurring_names(store, min_runs=11)["span"]
    # compare two runs of the same name: wall time doubled, worse
    first, last = runs.points[0].reference, runs.points[-1].reference
    from daskscope.views.compare import compare_view

    view = compare_view(store, first, last)
    wall_time = next(f for f in view.figures if f.id == "workflow.wall_time_s")
    assert (wall_time.a, wall_time.b, wall_time.verdict) == (10.0, 20.0, "worse")
    assert wall_time.ratio_text == "×2.00"  # noqa: RUF001
    inc = next(p for p in view.task_prefixes if p.prefix == "inc")
    assert (inc.a_seconds, inc.b_seconds, inc.verdict) == (15.0, 30.0, "worse")
    assert view.noise_runs == 11 and "11 runs of run “skim”" in view.same
    # two clusters of one name: compute time doubled is worse; utilisation has no
    # verdict; cost (the same workers for as long) is the same
    a, b = clusters.points[0].reference, clusters.points[-1].reference
    figures = {f.id: f for f in compare_view(store, a, b).figures}
    assert figures["cluster.compute_seconds"].verdict == "worse"
    assert figures["cluster.utilisation"].verdict is None
    assert figures["cluster.utilisation"].b > figures["cluster.utilisation"].a
    assert figures["cluster.core_seconds"].verdict is None
    # two ordinary days: within the noise, "same"
    c, d = clusters.points[1].reference, clusters.points[2].reference
    same = {f.id: f for f in compare_view(store, c, d).figures}
    assert same["cluster.compute_seconds"].verdict == "same"
    assert same["cluster.compute_seconds"].a != same["cluster.compute_seconds"].b


#: The merged "etl" runs' main-task wobble, ±20 %
_WOBBLE = (1.0, 1.2, 0.8, 1.1, 0.9, 1.0, 0.8, 1.2, 1.2, 1.2)


def _merged_service(now: float, make_cluster: Any, make_computation: Any, make_group: Any,
                    make_span: Any) -> list[Any]:  # fmt: skip
    """A service cluster that ran "etl" hourly, ten times, all in the first run's span
    (as Dask does while the first run's task groups live): each run a computation
    annotated with its own span id and two group records, "extract" (20 s × the wobble)
    and "transform" (4 s, 8 s in the last three)."""
    from daskscope.model import stable_id

    start = now - 12 * 3600
    cluster = make_cluster("service", start=start)
    records: list[Any] = [cluster]
    total = 0.0
    for run, wobble in enumerate(_WOBBLE):
        at = start + run * 3600
        note = {"span": {"name": ["etl"], "ids": [f"etl-{run}"]}}
        comp = make_computation(cluster, run, started_at=at, stopped_at=at + 21, annotations=note)
        hot = 8.0 if run >= 7 else 4.0
        for prefix, seconds in (("extract", 20.0 * wobble), ("transform", hot)):
            records.append(make_group(
                cluster, prefix, id=stable_id("etl-group", prefix, run), computation_id=comp.id,
                span_id="etl-0", duration_s=seconds, nbytes_total=8, started_at=at + 1,
                stopped_at=at + 1 + max(20.0 * wobble, hot),
            ))  # fmt: skip
            total += seconds
        records.append(comp)
    records.append(make_span(cluster, "etl-0", name=["etl"], enqueued_at=start,
                             started_at=start + 1, stopped_at=start + 9 * 3600 + 30, done=True,
                             duration_s=total, active_cpu_seconds=3 * total))  # fmt: skip
    return records
