"""The critical path through the tasks (issue 14): the task log records, for each
execution, the dependency whose end made the task ready, and the computation's chain of
such executions is followed back from the one that ended last. Checked on hand-built
executions, then on a real cluster against the graph submitted (the dependencies) and
Dask's task stream (which dependency ended last, and when)."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import dask
import pytest
from click.testing import CliRunner
from dask.core import get_dependencies
from distributed import Client, LocalCluster, Worker, get_task_stream, get_worker

import daskscope
from daskscope.analysis.critical_path import task_path
from daskscope.cli.main import cli
from daskscope.store import cluster_detail, open_store
from daskscope.tasklog.scan import scan_segments
from daskscope.views.critical_path import critical_path_view
from daskscope.web import create_app
from webutil import call

# -- on hand-built executions


def test_the_chain_is_followed_back_from_the_last_to_end() -> None:
    keys = ["a", "b", "c", "side", "d"]
    starts = [0.0, 1.1, 2.3, 0.0, 3.4]
    stops = [1.0, 2.0, 3.0, 3.2, 4.0]
    triggers: list[str | None] = [None, "a", "b", None, "c"]
    steps = task_path(keys, starts, stops, triggers)
    assert [keys[s.index] for s in steps] == ["a", "b", "c", "d"]
    assert steps[0].waited_s is None
    assert [s.waited_s for s in steps[1:]] == pytest.approx([0.1, 0.3, 0.4])


def test_a_dependency_from_before_the_computation_starts_the_chain() -> None:
    steps = task_path(["x", "y"], [0.0, 1.0], [0.5, 2.0], ["persisted", "x"])
    assert [s.index for s in steps] == [0, 1]


def test_a_recomputed_dependency_is_taken_at_its_run_before_the_dependent() -> None:
    """``a`` ran, its worker was lost, it ran again; ``b`` waited for the second run."""
    keys, starts, stops = ["a", "a", "b"], [0.0, 5.0, 7.0], [1.0, 6.0, 8.0]
    steps = task_path(keys, starts, stops, [None, None, "a"])
    assert [s.index for s in steps] == [1, 2] and steps[1].waited_s == pytest.approx(1.0)


def test_no_executions_no_path_and_a_loop_is_not_followed() -> None:
    assert task_path([], [], [], []) == []
    # a record that points back at itself (never from Dask) ends the chain
    assert [s.index for s in task_path(["a"], [0.0], [1.0], ["a"])] == [0]


# -- on a real cluster


def slow(x: Any, seconds: float) -> Any:
    time.sleep(seconds)
    return x


def combine(*parts: Any) -> int:
    return len(parts)


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A chain of six 0.15 s tasks beside twenty short independent ones, all combined
    at the end: the chain ends last, so it is the critical path."""
    url = f"sqlite:///{tmp_path_factory.mktemp('task-path') / 'store.db'}"
    chain: Any = 0
    for i in range(6):
        chain = dask.delayed(slow)(chain, 0.15, dask_key_name=f"chain-{i}")
    sides = [dask.delayed(slow)(i, 0.05, dask_key_name=f"side-{i}") for i in range(20)]
    end = dask.delayed(combine)(chain, *sides, dask_key_name="combine")
    graph = dict(end.__dask_graph__())
    with (
        dask.config.set({"daskscope.flush-interval": "1h"}),
        LocalCluster(
            n_workers=2, threads_per_worker=2, processes=False, dashboard_address=":0"
        ) as cluster,
        Client(cluster) as client,
    ):
        cluster_id = daskscope.register(client, database=url)
        with get_task_stream(client) as stream:
            assert end.compute() == 21
        assert daskscope.flush(client)["write_failures"] == 0
    store = open_store(url)
    (computation,) = cluster_detail(store, cluster_id)["computations"]
    ended = {str(t["key"]): max(ss["stop"] for ss in t["startstops"]) for t in stream.data}
    started = {str(t["key"]): min(ss["start"] for ss in t["startstops"]) for t in stream.data}
    return {
        "url": url,
        "store": store,
        "cluster_id": cluster_id,
        "computation_id": computation["id"],
        "dependencies": {str(k): {str(d) for d in get_dependencies(graph, k)} for k in graph},
        "ended": ended,
        "started": started,
    }


def test_each_execution_records_the_dependency_that_ended_last(recorded: dict[str, Any]) -> None:
    """Against the graph (a real dependency) and the task stream (the last to end)."""
    deps, ended = recorded["dependencies"], recorded["ended"]
    seen = 0
    for seg in scan_segments(recorded["store"], recorded["cluster_id"]):
        d = seg.decoded
        for row in range(len(d)):
            key, trigger = d.key(row), d.trigger(row)
            seen += 1
            if not deps[key]:
                assert trigger is None, key
                continue
            assert trigger in deps[key], (key, trigger)
            assert trigger == max(deps[key], key=ended.__getitem__), key
    assert seen == len(deps) == 27


def test_the_task_path_is_the_chain(recorded: dict[str, Any]) -> None:
    view = critical_path_view(recorded["store"], recorded["cluster_id"], recorded["computation_id"])
    assert view is not None and view.task_path_note is None
    keys = [t.key for t in view.task_path]
    assert keys == [f"chain-{i}" for i in range(6)] + ["combine"]
    started, ended = recorded["started"], recorded["ended"]
    for before, after in zip(view.task_path, view.task_path[1:], strict=False):
        # each waited for the one before, as long as the task stream says (a reading
        # below zero is the workers' clock-offset estimate moving: 0, docs/metrics.md)
        waited = max(0.0, started[after.key] - ended[before.key])
        assert after.waited_s == pytest.approx(waited, abs=2e-3)
    assert view.task_path_s == pytest.approx(ended["combine"] - started["chain-0"], abs=2e-3)
    ran = sum(ended[k] - started[k] for k in keys)
    assert view.task_path_busy_s == pytest.approx(ran, abs=5e-3)
    assert view.task_path_s >= 6 * 0.15
    assert view.measured_wall_s is not None
    assert view.task_path_fraction == pytest.approx(view.task_path_s / view.measured_wall_s)


def test_the_page_the_json_and_the_cli_show_it(recorded: dict[str, Any]) -> None:
    cid, comp = recorded["cluster_id"], recorded["computation_id"]
    app = create_app(recorded["url"])
    page = call(app, "GET", f"/clusters/{cid}/computations/{comp}")
    assert page.status_code == 200
    table = re.search(r'<table class="listing" id="task-path">(.*?)</table>', page.text, re.S)
    assert table is not None
    assert re.findall(r"<code>([^<]+)</code>", table.group(1)) == [
        *(f"chain-{i}" for i in range(6)),
        "combine",
    ]
    assert "7 tasks over" in page.text
    data = call(app, "GET", f"/api/v1/clusters/{cid}/computations/{comp}/critical-path")
    assert [t["key"] for t in data.json()["task_path"]][-1] == "combine"
    out = CliRunner().invoke(cli, ["--database", recorded["url"], "critical-path", cid, comp])
    assert out.exit_code == 0, out.output
    assert "critical path through the tasks: 7 tasks over" in out.output
    assert "chain-5" in out.output


def test_a_log_without_triggers_gives_a_path_of_its_last_task(tmp_path: Path) -> None:
    """Segments written before triggers were kept decode with none: the path is the
    execution that ended last, not an error."""
    from daskscope.tasklog.segments import decode_segment, encode_segment, execution

    rows = [
        execution("a", "a", "a", "tcp://w:1", 1, [{"action": "compute", "start": 1.0,
                  "stop": 2.0}], erred=False, nbytes=8, computation="c", span=None),
        execution("b", "b", "b", "tcp://w:1", 1, [{"action": "compute", "start": 2.5,
                  "stop": 3.0}], erred=False, nbytes=8, computation="c", span=None,
                  trigger=("a", "a")),
    ]  # fmt: skip
    record = encode_segment("cluster", 0, rows)[0]
    seg = decode_segment(record.format, record.payload)
    assert [seg.trigger(0), seg.trigger(1)] == [None, "a"]
    steps = task_path(["a", "b"], [1.0, 2.5], [2.0, 3.0], [None, None])
    assert [s.index for s in steps] == [1]


# -- a wait that reads below zero


class PinnedDelayWorker(Worker):
    """A real worker whose estimate of its clock's offset to the scheduler's
    (``scheduler_delay``, which shifts every time it reports) only its tasks set: the
    heartbeats' estimates are ignored. A heartbeat whose round trip stalls makes such a
    jump (docs/metrics.md, "Profiles": +2.6 s, then -0.6 s); here it happens between two
    tasks for sure."""

    pinned = 0.0

    @property  # type: ignore[override]
    def scheduler_delay(self) -> float:
        return self.pinned

    @scheduler_delay.setter
    def scheduler_delay(self, value: float) -> None:
        pass  # a heartbeat's estimate


#: the offset the odd links set as they end (the next link's times are shifted by it):
#: within the 0.5 s a trigger may end after its dependent starts
SHIFT = -0.49


def shifting_link(x: tuple[tuple[float, float], ...], i: int) -> tuple[tuple[float, float], ...]:
    """One link of a chain: its own start and stop as this process's clock reads them
    (the scheduler's: the cluster is in-process), then the offset changed for the next."""
    started = time.time()
    time.sleep(0.05)
    stopped = time.time()
    worker = get_worker()
    assert isinstance(worker, PinnedDelayWorker)
    worker.pinned = SHIFT if i % 2 == 0 else 0.0
    return (*x, (started, stopped))


def test_a_wait_below_zero_is_the_worker_s_clock_shift_and_reads_zero(tmp_path: Path) -> None:
    """On one worker, a link that ends as the worker's offset estimate drops reads as
    ending after the next link started (the raw times, against what the links logged);
    the path shows that wait as 0, and the others as measured."""
    url = f"sqlite:///{tmp_path / 'store.db'}"
    links = 11  # the last one unshifted: it ends last
    x: Any = ()
    for i in range(links):
        x = dask.delayed(shifting_link)(x, i, dask_key_name=f"link-{i}")
    with (
        dask.config.set({"daskscope.flush-interval": "1h"}),
        LocalCluster(
            n_workers=1,
            threads_per_worker=1,
            processes=False,
            dashboard_address=":0",
            worker_class=PinnedDelayWorker,
        ) as cluster,
        Client(cluster) as client,
    ):
        cluster_id = daskscope.register(client, database=url)
        logged = x.compute()
        assert daskscope.flush(client)["write_failures"] == 0
    store = open_store(url)
    (computation,) = cluster_detail(store, cluster_id)["computations"]
    raw: dict[str, tuple[float, float]] = {}
    for seg in scan_segments(store, cluster_id):
        d = seg.decoded
        raw.update({d.key(r): (float(d.first[r]), float(d.last[r])) for r in range(len(d))})
    view = critical_path_view(store, cluster_id, computation["id"])
    assert view is not None
    assert [t.key for t in view.task_path] == [f"link-{i}" for i in range(links)]
    below_zero = 0
    for i in range(1, links):
        truth = logged[i][0] - logged[i - 1][1]  # what the links logged: never below 0
        assert truth >= 0
        measured = raw[f"link-{i}"][0] - raw[f"link-{i - 1}"][1]
        # which offset a link's report carries depends on when the worker's batched
        # stream sends it (a loaded machine can send two links' reports at once): only
        # the formula is checked per link, and that some link reads below zero
        waited = view.task_path[i].waited_s
        assert waited == max(0.0, measured), (i, waited, measured)
        below_zero += measured < 0
    # a link that waited under 0.49 s reads below zero: at least one of the five
    assert below_zero >= 1
