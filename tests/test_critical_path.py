"""The critical path and what-if estimates: the pure models (groups as stages, and the
task dependencies of the task log) on hand-built graphs with exact answers; a real run
whose path is known by construction (sleeps of known length in a chain of groups),
checked against Dask's own task stream; an estimate made from a run on one thread
against a real run on four; the API, the CLI and their errors."""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import random
import time
import uuid
from collections import defaultdict
from collections.abc import Iterator
from typing import Any

import dask
import pytest
import sqlalchemy as sa
from click.testing import CliRunner
from distributed import Client, LocalCluster, get_task_stream
from distributed.utils import key_split_group

import daskscope
from daskscope.analysis.critical_path import (
    critical_path,
    estimate_jobs,
    job_graph,
    job_path,
    job_width,
    jobs_what_if,
    simulate_jobs,
    simulate_threads,
    stages_of,
    what_if,
)
from daskscope.cli.main import cli
from daskscope.store import open_store
from daskscope.store import schema as s
from daskscope.views import to_data
from daskscope.views.computation_page import CriticalPathPage
from daskscope.views.critical_path import CriticalPathView, critical_path_view
from daskscope.web import create_app
from webutil import call

# -- the model on hand-built graphs ------------------------------------------------------


def test_chain_is_the_sum_of_each_stage_longest_task() -> None:
    stages = stages_of([("a", [], [1.0, 3.0]), ("b", ["a"], [2.0]), ("c", ["b"], [0.5, 0.25])])
    path = critical_path(stages)
    assert path.path == ("a", "b", "c")
    assert path.length_s == 5.5
    assert path.earliest_start == {"a": 0.0, "b": 3.0, "c": 5.0}
    assert simulate_threads(stages, 1) == 6.75  # everything one after the other
    assert simulate_threads(stages, 2) == 5.5  # no stage has more than two tasks


def test_diamond_takes_the_longer_branch() -> None:
    stages = stages_of(
        [("s", [], [1.0]), ("l", ["s"], [3.0]), ("r", ["s"], [2.0, 2.0]), ("t", ["l", "r"], [1.0])]
    )
    path = critical_path(stages)
    assert path.path == ("s", "l", "t")
    assert path.length_s == 5.0
    assert path.remaining_s["s"] == 5.0 and path.remaining_s["r"] == 3.0
    # 2 threads: l (the longer way ahead) and one r at 1 s; the second r from 3 s to 5 s
    assert what_if(stages) == [(1, 9.0), (2, 6.0), (4, 5.0)]


def test_wide_fan_out_divides_by_threads_until_one_task_each() -> None:
    stages = stages_of(
        [("load", [], [0.5]), ("map", ["load"], [1.0] * 16), ("sum", ["map"], [0.25])]
    )
    assert critical_path(stages).length_s == 1.75
    assert [simulate_threads(stages, n) for n in (1, 2, 4, 8, 16, 32)] == [
        16.75, 8.75, 4.75, 2.75, 1.75, 1.75,
    ]  # fmt: skip
    # the list stops at the first count reaching the path; the measured count is added
    assert what_if(stages, 3) == [
        (1, 16.75), (2, 8.75), (3, 6.75), (4, 4.75), (8, 2.75), (16, 1.75),
    ]  # fmt: skip


def test_stages_without_tasks_and_outside_dependencies() -> None:
    stages = stages_of([("a", ["elsewhere"], [2.0]), ("empty", ["a"], []), ("b", ["empty"], [1.0])])
    assert stages["a"].dependencies == ()
    assert critical_path(stages).path == ("a", "empty", "b")
    assert critical_path(stages).length_s == 3.0
    assert simulate_threads(stages, 1) == 3.0
    assert critical_path(stages_of([])).length_s == 0.0


@pytest.mark.parametrize("seed", range(5))
def test_one_thread_is_the_sum_and_enough_threads_the_path(seed: int) -> None:
    """On random graphs: one thread never idles while a task waits (the sum), and with a
    thread for every task each stage lasts its longest task (the critical path)."""
    rng = random.Random(seed)
    groups = [
        (
            f"g{i}",
            [f"g{j}" for j in rng.sample(range(i), min(i, rng.randint(0, 3)))],
            [rng.choice([0.25, 0.5, 1.0, 2.0]) for _ in range(rng.randint(0, 6))],
        )
        for i in range(30)
    ]
    stages = stages_of(groups)
    tasks = sum(len(d) for _, _, d in groups)
    assert simulate_threads(stages, 1) == sum(sum(d) for _, _, d in groups)
    assert simulate_threads(stages, tasks + 1) == critical_path(stages).length_s
    assert what_if(stages)[0] == (1, simulate_threads(stages, 1))
    assert what_if(stages)[-1][1] == critical_path(stages).length_s


def test_groups_that_depend_on_each_other_are_taken_one_after_the_other() -> None:
    # inc(double(inc(1))): the group inc feeds double and follows it
    stages = stages_of([("inc", ["double"], [1.0, 1.0]), ("double", ["inc"], [2.0])])
    assert stages["double"].dependencies == ("inc",) and stages["inc"].dependencies == ()
    path = critical_path(stages)
    assert path.path == ("inc", "double") and path.length_s == 3.0
    # a longer cycle, with a group outside it
    stages = stages_of(
        [("a", ["c"], [1.0]), ("b", ["a"], [1.0]), ("c", ["b"], [1.0]), ("d", ["c"], [1.0])]
    )
    # the walk from a reaches c, then b, whose dependency on a closes the cycle: b first
    assert stages["b"].dependencies == () and stages["a"].dependencies == ("c",)
    path = critical_path(stages)
    assert path.path[:2] == ("b", "c") and path.length_s == 3.0


def test_bad_input_says_what_is_wrong() -> None:
    with pytest.raises(ValueError, match="negative task duration"):
        stages_of([("a", [], [-1.0])])
    with pytest.raises(ValueError, match="threads must be 1 or more"):
        simulate_threads(stages_of([("a", [], [1.0])]), 0)


# -- the task-level model on hand-built executions ---------------------------------------


def chain_columns(
    seconds: list[float], gap: float = 0.01
) -> tuple[list[str], list[str], list[float], list[float], list[float], list[str | None]]:
    """``x = f(x)``: one group, each task waiting for the one before (as recorded)."""
    keys = [f"f-{i}" for i in range(len(seconds))]
    starts, stops, t = [], [], 0.0
    for d in seconds:
        starts.append(t)
        stops.append(t + d)
        t += d + gap
    return keys, ["f"] * len(keys), starts, stops, seconds, [None, *keys[:-1]]


def test_a_chain_inside_one_group_is_its_sum() -> None:
    """The issue's loop: 8 links of 3.0 s in one group. The group model reads its longest
    task (0.5 s) and estimates 4 threads below 3 s; through the triggers, nothing beats
    the chain."""
    seconds = [0.25, 0.5, 0.25, 0.5, 0.25, 0.5, 0.375, 0.375]
    graph = job_graph(*chain_columns(seconds))
    path = job_path(graph)
    assert path.length_s == 3.0 and path.jobs == tuple(range(8))
    assert path.earliest_start[3] == 1.0
    assert jobs_what_if(graph, 4, 8) == [(1, 3.0), (4, 3.0), (8, 3.0)]
    assert [simulate_jobs(graph, n) for n in (1, 2, 16)] == [3.0, 3.0, 3.0]
    assert job_width(graph, path) == 1
    # what the group model says of the same tasks
    stages = stages_of([("f", [], seconds)])
    assert critical_path(stages).length_s == 0.5 and simulate_threads(stages, 4) < 3.0


def test_a_task_waits_for_its_trigger_and_free_threads_take_the_run_s_order() -> None:
    """Four loads (recorded on one thread, in this order) and a sum triggered by the last
    to end: on two threads the loads take two rounds, then the sum."""
    keys = ["load-0", "load-1", "load-2", "load-3", "sum"]
    starts = [0.0, 1.0, 2.0, 3.0, 4.0]
    seconds = [1.0, 1.0, 1.0, 1.0, 0.5]
    stops = [a + d for a, d in zip(starts, seconds, strict=True)]
    triggers = [None, None, None, None, "load-3"]
    graph = job_graph(keys, ["load"] * 4 + ["sum"], starts, stops, seconds, triggers)
    path = job_path(graph)
    assert path.length_s == 1.5 and path.jobs == (3, 4)
    # load-3 started last in the run: the sum comes after the second round
    assert simulate_jobs(graph, 2) == 2.5
    assert jobs_what_if(graph) == [(1, 4.5), (2, 2.5), (4, 1.5)]
    assert job_width(graph, path) == 4 and estimate_jobs(graph, 4) == 1.5


def test_a_trigger_outside_the_executions_or_ended_after_its_dependent_is_no_wait() -> None:
    keys, starts, stops = ["a", "b", "c"], [0.0, 1.0, 0.2], [1.0, 2.0, 3.5]
    # b's trigger ran before the computation; c's "trigger" b ended 1.3 s after c
    # started (beyond the clock slack): neither is a dependency here
    graph = job_graph(keys, ["g"] * 3, starts, stops, [1.0, 1.0, 3.3], [None, "before", "b"])
    assert graph.parents(1) == [] and graph.parents(2) == []
    assert job_path(graph).length_s == 3.3


def test_a_key_run_again_follows_its_run_before() -> None:
    """``a`` ran, its worker was lost, it ran again; ``b`` waited for the second run."""
    keys, starts, stops = ["a", "a", "b"], [0.0, 5.0, 7.0], [1.0, 6.0, 8.0]
    graph = job_graph(keys, ["a", "a", "b"], starts, stops, [1.0, 1.0, 1.0], [None, None, "a"])
    assert graph.parents(1) == [0] and graph.parents(2) == [1]
    assert job_path(graph).length_s == 3.0 and job_path(graph).jobs == (0, 1, 2)


def test_groups_without_dependencies_are_stages_waited_for_as_a_whole() -> None:
    """The mixed model: ``load`` has no recorded dependencies (a stage of four tasks),
    ``f`` is a chain of two that depends on it as a group."""
    stages = stages_of([("load", [], [1.0, 1.0, 1.0, 2.0]), ("f", ["load"], [])])
    keys, groups, starts, stops, seconds, triggers = chain_columns([0.5, 0.5])
    starts = [t + 10 for t in starts]
    stops = [t + 10 for t in stops]
    graph = job_graph(
        keys, groups, starts, stops, seconds, triggers,
        stages={"load": stages["load"]}, stage_starts={"load": 0.0},
        dependencies={"f": ["load"]},
    )  # fmt: skip
    path = job_path(graph)
    assert path.length_s == 3.0  # the longest load, then the chain
    assert [graph.group[j] for j in path.jobs] == ["load", "f", "f"]
    # two threads: 2 and 1, then 1 and 1: the loads end at 3, the chain at 4
    assert simulate_jobs(graph, 2) == 4.0
    assert jobs_what_if(graph) == [(1, 6.0), (2, 4.0), (4, 3.0)]
    assert graph.tasks == 6 and len(graph) == 7  # one join: the end of load


def test_a_cycle_in_the_records_is_broken_not_followed() -> None:
    """Two executions naming each other as trigger (never from Dask): one edge is left
    out, and the model still answers."""
    graph = job_graph(["a", "b"], ["g", "g"], [0.0, 0.0], [0.25, 0.25], [0.25, 0.25], ["b", "a"])
    assert sorted(len(graph.parents(j)) for j in range(2)) == [0, 1]
    assert job_path(graph).length_s == 0.5 and simulate_jobs(graph, 2) == 0.5


@pytest.mark.parametrize("seed", range(5))
def test_task_model_bounds_on_random_runs(seed: int) -> None:
    """On random recorded runs: one thread is the sum, enough threads the path, and no
    estimate beats the path or the sum spread over every thread."""
    rng = random.Random(seed)
    keys, groups, starts, stops, seconds, triggers = [], [], [], [], [], []
    for i in range(300):
        trigger = rng.choice([None, *keys[-40:]]) if keys else None
        begin = (stops[keys.index(trigger)] if trigger else 0.0) + rng.random()
        d = rng.choice([0.0, 0.25, 0.5, 1.0, 2.0])
        keys.append(f"k{i}")
        groups.append(f"g{i % 7}")
        starts.append(begin)
        stops.append(begin + d)
        seconds.append(d)
        triggers.append(trigger)
    graph = job_graph(keys, groups, starts, stops, seconds, triggers)
    path = job_path(graph)
    assert simulate_jobs(graph, 1) == pytest.approx(sum(seconds))
    width = job_width(graph, path)
    assert simulate_jobs(graph, width) == pytest.approx(path.length_s)
    for n in (2, 3, 8, 32):
        estimate = simulate_jobs(graph, n)
        assert estimate >= path.length_s - 1e-9 and estimate >= sum(seconds) / n - 1e-9
    assert jobs_what_if(graph)[-1][1] == pytest.approx(path.length_s)
    # every link of the path is a recorded trigger
    for before, after in zip(path.jobs, path.jobs[1:], strict=False):
        assert triggers[after] == keys[before]


def test_bad_executions_say_what_is_wrong() -> None:
    with pytest.raises(ValueError, match="negative duration"):
        job_graph(["a"], ["g"], [0.0], [1.0], [-1.0], [None])
    with pytest.raises(ValueError, match="differ in length"):
        job_graph(["a"], ["g"], [0.0], [1.0], [1.0], [])
    with pytest.raises(ValueError, match="threads must be 1 or more"):
        simulate_jobs(job_graph(["a"], ["g"], [0.0], [1.0], [1.0], [None]), 0)


# -- real runs ---------------------------------------------------------------------------

#: The construction: (group, tasks, seconds each, groups it depends on). The critical
#: path is a → b → c → d: 0.2 + 0.5 + 0.3 + 0.1 = 1.1 s; e hangs off a, off the path.
#: a's 24 tasks take six rounds on 4 threads, so the estimate for 4 threads exceeds the
#: path by 1 s: a sleep that wakes late lengthens both, and the two stay apart.
STAGES = [
    ("stage_a", 24, 0.2, []),
    ("stage_b", 1, 0.5, ["stage_a"]),
    ("stage_c", 4, 0.3, ["stage_b"]),
    ("stage_d", 1, 0.1, ["stage_c"]),
    ("stage_e", 2, 0.05, ["stage_a"]),
]
PATH = ["stage_a", "stage_b", "stage_c", "stage_d"]
PATH_S = 1.1


def nap(seconds: float, *inputs: Any) -> float:
    time.sleep(seconds)
    return seconds


def compute_stages() -> None:
    """The construction as delayed calls with keys ``stage_x-i`` (group ``stage_x``);
    every task of a stage uses every task of the stages it depends on, except e, whose
    task i uses a's task i (Dask knows groups' dependencies, which is all we model)."""
    made: dict[str, list[Any]] = {}
    for name, n, seconds, deps in STAGES:
        made[name] = [
            dask.delayed(nap)(
                seconds,
                *(
                    [made["stage_a"][i]]
                    if name == "stage_e"
                    else [t for d in deps for t in made[d]]
                ),
                dask_key_name=f"{name}-{i}",
            )
            for i in range(n)
        ]
    with dask.config.set({"optimization.fuse.active": False}):
        dask.compute(*made["stage_d"], *made["stage_e"])


def record(url: str, threads: int) -> dict[str, Any]:
    """The construction on one worker with ``threads`` threads, recorded into ``url``;
    Dask's task stream of the same run is the ground truth. Every ready task goes to
    the worker at once (worker-saturation inf), so a free thread takes the next one
    without a round trip to the scheduler, as the model assumes. The worker is a
    process of its own: in the scheduler's process its event loop, which starts each
    task, would wait for the scheduler's and the recorder's work (one CI run took 3.6 s
    for 2.1 s of work on four threads, with a thread computing at every moment)."""
    with (
        dask.config.set({"distributed.scheduler.worker-saturation": float("inf")}),
        LocalCluster(
            n_workers=1,
            threads_per_worker=threads,
            processes=True,
            dashboard_address=":0",
            silence_logs=logging.CRITICAL,
        ) as cluster,
        Client(cluster) as client,
    ):
        cluster_id = daskscope.register(client, database=url, name=f"stages on {threads}")
        with get_task_stream(client) as stream:
            compute_stages()
        assert daskscope.flush(client)["write_failures"] == 0
    with open_store(url) as store, store.engine.connect() as conn:
        c = s.computations.c
        computation_id = conn.execute(
            sa.select(c.id)
            .where(c.cluster_id == cluster_id)
            .order_by(c.tasks_executed.desc())
            .limit(1)
        ).scalar_one()
    return {
        "url": url,
        "cluster_id": cluster_id,
        "computation_id": computation_id,
        "stream": list(stream.data),
    }


def construction_dependencies() -> dict[str, list[str]]:
    """Each key's dependencies, as :func:`compute_stages` builds them."""
    made = {name: [f"{name}-{i}" for i in range(n)] for name, n, _, _ in STAGES}
    return {
        f"{name}-{i}": [made["stage_a"][i]]
        if name == "stage_e"
        else [k for d in deps for k in made[d]]
        for name, n, _, deps in STAGES
        for i in range(n)
    }


def trigger_chain(stream: list[dict[str, Any]]) -> tuple[float, dict[str, float]]:
    """The ground truth of the task-level model, from the construction and Dask's task
    stream alone: each task waits for its dependency that ended last (by the stream),
    for as long as that one's chain computes. The longest such chain, and each task's
    earliest start on it."""
    deps = construction_dependencies()
    ends = {str(t["key"]): max(ss["stop"] for ss in t["startstops"]) for t in stream}
    compute = {
        str(t["key"]): sum(
            ss["stop"] - ss["start"] for ss in t["startstops"] if ss["action"] == "compute"
        )
        for t in stream
    }
    start: dict[str, float] = {}
    finish: dict[str, float] = {}
    for key in sorted(ends, key=ends.__getitem__):  # a dependency ends first
        trigger = max(deps[key], key=ends.__getitem__) if deps[key] else None
        start[key] = finish[trigger] if trigger else 0.0
        finish[key] = start[key] + compute[key]
    return max(finish.values()), start


def compute_seconds(stream: list[dict[str, Any]]) -> dict[str, list[float]]:
    by_group: dict[str, list[float]] = defaultdict(list)
    for task in stream:
        by_group[key_split_group(task["key"])].append(
            sum(ss["stop"] - ss["start"] for ss in task["startstops"] if ss["action"] == "compute")
        )
    return by_group


def wall(stream: list[dict[str, Any]]) -> float:
    starts = [ss["start"] for t in stream for ss in t["startstops"]]
    stops = [ss["stop"] for t in stream for ss in t["startstops"]]
    return max(stops) - min(starts)


def stalled(stream: list[dict[str, Any]]) -> float:
    """Seconds between the first compute start and the last compute stop when no
    thread was computing."""
    spans = sorted(
        (ss["start"], ss["stop"])
        for t in stream
        for ss in t["startstops"]
        if ss["action"] == "compute"
    )
    gaps, reach = 0.0, spans[0][1]
    for start, stop in spans[1:]:
        gaps += max(0.0, start - reach)
        reach = max(reach, stop)
    return gaps


def new_url(request: pytest.FixtureRequest, kind: str, tmp: Any) -> str:
    if kind == "sqlite":
        return f"sqlite:///{tmp / 'store.db'}"
    import psycopg

    server = request.getfixturevalue("postgres_server")
    name = f"cp_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(server.replace("+psycopg", "") + "/postgres", autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    return f"{server}/{name}"


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def four_threads(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Any]]:
    url = new_url(request, request.param, tmp_path_factory.mktemp("four"))
    yield record(url, 4)


@pytest.fixture(scope="module")
def one_thread(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return record(f"sqlite:///{tmp_path_factory.mktemp('one') / 'store.db'}", 1)


def test_path_of_a_real_run_is_the_constructed_one(four_threads: dict[str, Any]) -> None:
    run = four_threads
    with open_store(run["url"]) as store:
        view = critical_path_view(store, run["cluster_id"], run["computation_id"])
    assert view is not None
    truth = compute_seconds(run["stream"])
    assert {g: len(v) for g, v in truth.items()} == {name: n for name, n, _, _ in STAGES}
    assert view.durations_from == "task log"
    assert view.model == "task dependencies" and view.model_note is None
    assert view.path == PATH
    # against Dask's task stream and the graph built: the chain through each task's
    # last dependency to end, stored to a microsecond
    length, starts = trigger_chain(run["stream"])
    assert view.critical_path_s == pytest.approx(length, abs=1e-5)
    assert view.path_tasks == 1 + 1 + 1 + 1  # an a, b, a c, d
    # a lower bound of the whole graph's path (every task waiting for all its inputs:
    # the stages' longest tasks), within the microsecond each stored duration is rounded to
    assert view.critical_path_s <= sum(max(truth[g]) for g in PATH) + view.path_tasks * 1e-6
    # against the construction: a sleep never ends early (how late it ends depends on
    # the machine's load, which the task stream above accounts for exactly)
    assert view.critical_path_s >= PATH_S
    groups = {g.name: g for g in view.groups}
    assert all(g.model == "task dependencies" for g in view.groups)
    assert [g.name for g in view.groups if g.on_path] == PATH
    assert groups["stage_b"].earliest_start_s == pytest.approx(starts["stage_b-0"], abs=1e-5)
    assert groups["stage_e"].tasks == 2 and not groups["stage_e"].on_path
    # the measured figures: the task stream's span, on the four threads that ran it
    assert view.measured_threads == 4
    assert view.measured_wall_s == pytest.approx(wall(run["stream"]), abs=1e-5)
    # the real run waited for the same chain, so it cannot have been shorter than it
    assert view.critical_path_s <= view.measured_wall_s
    assert view.path_fraction == pytest.approx(view.critical_path_s / view.measured_wall_s)
    # one thread: every recorded task one after the other
    one = sum(sum(v) for v in truth.values())
    assert view.estimates[0].threads == 1
    assert view.estimates[0].wall_s == pytest.approx(one, abs=1e-4)
    assert 4 in [e.threads for e in view.estimates]
    assert view.estimates[-1].wall_s == pytest.approx(view.critical_path_s)
    # the code: the innermost frame's marked line is the call that launched it
    assert view.code_frames
    assert (view.code_frames[0].call_text or "").startswith("dask.compute(")


def test_estimate_from_one_thread_against_a_real_run_on_four(
    one_thread: dict[str, Any], four_threads: dict[str, Any]
) -> None:
    """Recorded on 1 thread, estimated for 4, then run on 4.

    The model leaves out the scheduler's round trips between stages (milliseconds on a
    quiet machine, whole seconds when eight test suites share two cores): in the model
    some thread always computes, so the moments of the real run when *no* thread was
    computing are that overhead, and they are taken out of the measured wall time
    (from Dask's task stream; the raw wall time is in the failure message). A sleep
    also overruns by however late the machine wakes its thread, differently in each
    run, so the tolerance is generous: 0.75x to 1.5x of the estimate. It still tells
    the three answers apart: the estimate for 4 threads (about 2.1 s) is within it, the
    1-thread time (about 6.7 s) and the infinite-workers time (1.1 s) are not, and the
    real run is nearer to it than to either of them."""
    with open_store(one_thread["url"]) as store:
        view = critical_path_view(
            store, one_thread["cluster_id"], one_thread["computation_id"], threads=4
        )
    assert view is not None and view.requested is not None
    assert view.measured_threads == 1
    estimate = view.requested.wall_s
    # the construction on 4 threads: a in six rounds, then b, c in one round, d
    assert estimate >= 1.2 + 0.5 + 0.3 + 0.1
    # one thread: the recorded tasks one after the other, as Dask's task stream saw them
    one = sum(sum(v) for v in compute_seconds(one_thread["stream"]).values())
    assert view.estimates[0].wall_s == pytest.approx(one, abs=1e-4)
    raw = wall(four_threads["stream"])
    measured = raw - stalled(four_threads["stream"])
    assert 0.75 * estimate <= measured <= 1.5 * estimate, (estimate, measured, raw)
    # the window tells the estimate apart from the other two answers
    assert view.critical_path_s < 0.75 * estimate, (view.critical_path_s, estimate)
    assert view.estimates[0].wall_s > 1.5 * estimate, (view.estimates[0].wall_s, estimate)
    ratios = {
        name: abs(math.log(measured / seconds))
        for name, seconds in (
            ("4 threads", estimate),
            ("1 thread", view.estimates[0].wall_s),
            ("infinite", view.critical_path_s),
        )
    }
    assert min(ratios, key=ratios.__getitem__) == "4 threads", ratios


def test_api_and_cli_answer_the_same(four_threads: dict[str, Any]) -> None:
    run = four_threads
    path = (
        f"/api/v1/clusters/{run['cluster_id']}/computations/{run['computation_id']}/critical-path"
    )
    app = create_app(run["url"])
    try:
        answer = call(app, "GET", f"{path}?threads=3")
        assert answer.status_code == 200, answer.text
        missing = call(app, "GET", path.replace(run["computation_id"], "no-such-computation"))
        assert missing.status_code == 404
        assert "no computation 'no-such-computation'" in missing.json()["error"]["message"]
        assert call(app, "GET", f"{path}?threads=0").status_code in (400, 422)
        page = call(app, "GET", path.replace("/api/v1", "").removesuffix("/critical-path"))
        assert page.status_code == 200
        assert "Critical path" in page.text and "stage_b" in page.text
    finally:
        app.state.store.close()
    args = ["--database", run["url"], "critical-path", run["cluster_id"], run["computation_id"]]
    printed = CliRunner().invoke(cli, [*args, "--threads", "3", "--json"])
    assert printed.exit_code == 0, printed.output
    # the route sends a page of the groups (all of them here) and says which
    paging = {f.name for f in dataclasses.fields(CriticalPathPage)} - {
        f.name for f in dataclasses.fields(CriticalPathView)
    }
    sent = answer.json()
    assert {k: v for k, v in sent.items() if k not in paging} == json.loads(printed.output)
    assert sent["groups_matched"] == sent["groups_total"] == len(sent["groups"])
    assert answer.json()["requested"]["threads"] == 3
    text = CliRunner().invoke(cli, [*args[:3], run["cluster_id"][:8], run["computation_id"]])
    assert text.exit_code == 0, text.output
    assert "stage_a" in text.output and "critical path" in text.output
    assert "(as measured)" in text.output
    wrong = CliRunner().invoke(cli, [*args[:3], run["cluster_id"], "nope"])
    assert wrong.exit_code == 2 and "has no computation 'nope'" in wrong.output
    with open_store(run["url"]) as store:
        view = critical_path_view(store, run["cluster_id"], run["computation_id"], threads=3)
        assert to_data(view)["requested"] == answer.json()["requested"]
