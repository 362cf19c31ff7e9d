"""The scheduling advice rules (issue 14) on real clusters: one cluster runs a computation
built to trigger each rule, a healthy control cluster (tasks of 50-150 ms on 2 workers x
2 threads) triggers none; figures checked against Dask's own task stream and the keys
submitted."""

from __future__ import annotations

import operator
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import dask
import dask.array as da
import numpy as np
import pytest
from dask import delayed
from distributed import Client, LocalCluster, get_task_stream

import daskscope
from daskscope.analysis.advice import AdviceFacts, advise, registered_rules
from daskscope.analysis.advice import scheduling as rules
from daskscope.store import cluster_detail, open_store
from daskscope.views.advice import cluster_advice

#: the rules of analysis/advice/scheduling.py
SCHEDULING_RULES = {
    "tasks-too-small",
    "too-few-tasks",
    "idle-cores",
    "worker-skew",
    "task-skew",
    "transfer-bound",
    "large-graph",
    "repeated-computation",
}


def inc(x: int) -> int:
    return x + 1


def slow(x: Any, seconds: float) -> Any:
    time.sleep(seconds)
    return x


def slow_block(block: Any) -> Any:
    time.sleep(0.1)
    return block


def test_the_scheduling_rules_are_registered() -> None:
    ids = {r.id for r in registered_rules()}
    assert ids >= SCHEDULING_RULES
    for spec in registered_rules():
        if spec.id in SCHEDULING_RULES:
            assert spec.explanation and spec.title


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One cluster, one computation a rule; the task stream and the threads as Dask
    saw them."""
    url = f"sqlite:///{tmp_path_factory.mktemp('advice') / 'advice.db'}"
    names: list[str] = []
    with (
        dask.config.set({"daskscope.flush-interval": "1h"}),
        LocalCluster(
            n_workers=2, threads_per_worker=2, processes=False, dashboard_address=":0"
        ) as cluster,
        Client(cluster) as client,
    ):
        cluster_id = daskscope.register(client, database=url)
        first_worker = sorted(client.scheduler_info()["workers"])[0]
        threads = sum(client.nthreads().values())
        windows: dict[str, tuple[float, float]] = {}

        def run(name: str, work: Any) -> None:
            names.append(name)
            started = time.time()
            work()
            windows[name] = (started, time.time())

        chain: Any = 0
        for _ in range(12):
            chain = delayed(slow)(chain, 0.2)
        y = da.random.random((400, 400), chunks=100).map_blocks(slow_block, dtype=float)
        with get_task_stream(client) as stream:
            run("small", lambda: dask.compute(*[delayed(inc)(i) for i in range(1500)]))
            run("few", lambda: dask.compute(*[delayed(slow)(i, 1.2) for i in range(2)]))
            run("idle", chain.compute)
            run("worker-skew", lambda: dask.compute(
                *[delayed(slow)(i, 0.15) for i in range(16)], workers=[first_worker]
            ))  # fmt: skip
            run("task-skew", lambda: dask.compute(
                *[delayed(slow)(i, 1.5 if i == 0 else 0.02) for i in range(31)]
            ))  # fmt: skip
            run("first-sum", y.sum().compute)
            run("repeated", y.sum().compute)
        assert daskscope.flush(client)["write_failures"] == 0
    store = open_store(url)
    detail = cluster_detail(store, cluster_id)
    comps = sorted(detail["computations"], key=lambda c: c["started_at"])
    assert len(comps) == len(names)
    return {
        "store": store,
        "cluster_id": cluster_id,
        "computations": dict(zip(names, (c["id"] for c in comps), strict=True)),
        "stream": stream.data,
        "threads": threads,
        "first_worker": first_worker,
        "windows": windows,
    }


def _advice(recorded: dict[str, Any], name: str) -> dict[str, Any]:
    view = cluster_advice(recorded["store"], recorded["cluster_id"], recorded["computations"][name])
    return {a.rule: a for a in view.advice if a.rule in SCHEDULING_RULES}


def _figure(advice: Any, label_start: str) -> Any:
    return next(e for e in advice.evidence if e.label.startswith(label_start))


def _stream_of(recorded: dict[str, Any], prefix: str) -> list[dict[str, Any]]:
    return [t for t in recorded["stream"] if str(t["key"]).startswith(prefix)]


def _computes(recorded: dict[str, Any], name: str) -> list[tuple[str, float, float]]:
    """(worker, start, stop) of each compute Dask's task stream saw during ``name``."""
    lo, hi = recorded["windows"][name]
    return [
        (t["worker"], ss["start"], ss["stop"])
        for t in recorded["stream"]
        for ss in t["startstops"]
        if ss["action"] == "compute" and lo <= ss["start"] <= hi
    ]


def test_tasks_too_small(recorded: dict[str, Any]) -> None:
    found = _advice(recorded, "small")
    advice = found["tasks-too-small"]
    assert advice.subject == "inc"
    # against Dask's task stream: the mean compute time of the 1,500 inc tasks
    computes = [
        ss["stop"] - ss["start"]
        for t in _stream_of(recorded, "inc-")
        for ss in t["startstops"]
        if ss["action"] == "compute"
    ]
    assert _figure(advice, "Tasks").value == 1500 == len(computes)
    mean = _figure(advice, "Mean compute time")
    # Dask's group durations and its task stream time a task apart by some µs
    assert mean.value == pytest.approx(sum(computes) / len(computes), abs=0.0005)
    assert mean.threshold == rules.SMALL_TASK_S and mean.value < mean.threshold
    assert mean.value_text.endswith(("µs", "ms"))


def test_too_few_tasks(recorded: dict[str, Any]) -> None:
    advice = _advice(recorded, "few")["too-few-tasks"]
    widest = _figure(advice, "Tasks in its widest group")
    assert widest.value == 2 and widest.threshold == recorded["threads"] == 4
    assert _figure(advice, "Threads").value_text == "4"
    assert advice.subject == f"computation {recorded['computations']['few'][:8]}"


def test_idle_cores(recorded: dict[str, Any]) -> None:
    advice = _advice(recorded, "idle")["idle-cores"]
    # ground truth: the chain's compute time over 4 threads x first start to last stop
    computes = _computes(recorded, "idle")
    assert len(computes) == 12
    wall = max(c[2] for c in computes) - min(c[1] for c in computes)
    truth = sum(c[2] - c[1] for c in computes) / (recorded["threads"] * wall)
    utilisation = _figure(advice, "Utilisation")
    assert utilisation.value == pytest.approx(truth, rel=0.02)
    assert utilisation.value < rules.UTILISATION_THRESHOLD
    assert utilisation.value_text.endswith("%") and utilisation.threshold_text == "50.0 %"


def test_worker_skew(recorded: dict[str, Any]) -> None:
    advice = _advice(recorded, "worker-skew")["worker-skew"]
    assert advice.subject == recorded["first_worker"]
    # against the task stream: compute time per worker during the restricted tasks
    per_worker: dict[str, float] = defaultdict(float)
    for worker, start, stop in _computes(recorded, "worker-skew"):
        per_worker[worker] += stop - start
    assert set(per_worker) == {recorded["first_worker"]}
    ratio = _figure(advice, "Busiest worker's utilisation over all")
    # all work on one of two workers, both there throughout with as many threads
    assert ratio.value == pytest.approx(2.0, rel=0.001)
    busiest = _figure(advice, "Busiest worker's compute time")
    assert busiest.value == pytest.approx(per_worker[recorded["first_worker"]], rel=0.01)
    assert _figure(advice, "Least busy").value == 0


def test_worker_skew_counts_a_late_worker_only_while_it_was_there(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Adaptive scaling: a second worker joins when most of the work is done. It computed
    far less than the first (their compute times alone would read as skew), but per
    second present both were as busy as each other: no advice. The rule's figure is
    checked against the task stream and the moment the test saw the worker join."""
    url = f"sqlite:///{tmp_path / 'late.db'}"
    joined: list[float] = []
    with (
        dask.config.set({"daskscope.flush-interval": "1h"}),
        LocalCluster(
            n_workers=1, threads_per_worker=1, processes=False, dashboard_address=":0"
        ) as cluster,
        Client(cluster) as client,
    ):
        cluster_id = daskscope.register(client, database=url)

        # 20 s of work on one thread, a second worker asked for at 14 s: even if it
        # takes seconds to start on a loaded machine, it still finds work, and however
        # fast it starts it computes far less (at 9 s of 15, one CI run read 10.8 s
        # against 4.4 s: a ratio of 1.42, under the rule's 1.5)
        def join_later() -> None:
            time.sleep(14.0)
            cluster.scale(2)
            while len(client.scheduler_info()["workers"]) < 2:
                time.sleep(0.01)
            joined.append(time.time())

        joiner = threading.Thread(target=join_later)
        with get_task_stream(client) as stream:
            joiner.start()
            dask.compute(*[delayed(slow)(i, 0.2) for i in range(100)])
        joiner.join()
        assert daskscope.flush(client)["write_failures"] == 0
    busy: dict[str, float] = defaultdict(float)
    starts, stops = [], []
    for t in stream.data:
        for ss in t["startstops"]:
            if ss["action"] == "compute":
                busy[t["worker"]] += ss["stop"] - ss["start"]
                starts.append(ss["start"])
                stops.append(ss["stop"])
    assert len(busy) == 2, "the late worker computed nothing: the scenario did not happen"
    mean = sum(busy.values()) / 2
    assert max(busy.values()) / mean >= rules.WORKER_SKEW_RATIO  # compute times alone: skew
    store = open_store(url)
    assert "worker-skew" not in {a.rule for a in cluster_advice(store, cluster_id).advice}
    # the figure itself, with the threshold out of the way
    monkeypatch.setattr(rules, "WORKER_SKEW_RATIO", 0.0)
    (advice,) = [a for a in cluster_advice(store, cluster_id).advice if a.rule == "worker-skew"]
    first, last = min(starts), max(stops)
    present = {w: last - first for w in busy}
    late = min(busy, key=lambda w: busy[w])
    present[late] = last - joined[0]
    rates = {w: busy[w] / present[w] for w in busy}
    truth = max(rates.values()) / (sum(busy.values()) / sum(present.values()))
    ratio = _figure(advice, "Busiest worker's utilisation over all")
    assert ratio.value == pytest.approx(truth, rel=0.15)
    assert ratio.value < 1.5


def test_task_skew(recorded: dict[str, Any]) -> None:
    advice = _advice(recorded, "task-skew")["task-skew"]
    assert advice.subject == "slow"
    slowest = _figure(advice, "Slowest task (")
    assert slowest.value == pytest.approx(1.5, abs=0.2)
    assert _figure(advice, "Tasks in the group").value == 31


def test_large_graph(recorded: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    """100,000 tasks take too long for a test: the threshold is lowered below the 1,500
    tasks of the "small" computation, whose figures are real; the others stay below."""
    assert "large-graph" not in _advice(recorded, "small")
    monkeypatch.setattr(rules, "LARGE_GRAPH_TASKS", 1000)
    advice = _advice(recorded, "small")["large-graph"]
    tasks = _figure(advice, "Tasks in the graph")
    assert tasks.value == 1500 == len(_stream_of(recorded, "inc-")) and tasks.threshold == 1000
    for other in ("few", "idle", "task-skew", "repeated"):
        assert "large-graph" not in _advice(recorded, other)


def test_repeated_computation(recorded: dict[str, Any]) -> None:
    assert "repeated-computation" not in _advice(recorded, "first-sum")
    advice = _advice(recorded, "repeated")["repeated-computation"]
    assert _figure(advice, "Times computed").value == 2
    # the 16 slow blocks of the second sum ran again: at least 16 x 0.1 s
    assert _figure(advice, "Task time spent again").value >= 1.6
    assert advice.subject == f"computation {recorded['computations']['repeated'][:8]}"


def test_the_cluster_advice_holds_the_computations_findings(recorded: dict[str, Any]) -> None:
    """The cluster's advice holds what its computations' does (worker skew is one
    computation's: over the whole cluster both workers were busy alike)."""
    view = cluster_advice(recorded["store"], recorded["cluster_id"])
    fired = {a.rule for a in view.advice}
    assert fired >= SCHEDULING_RULES - {"transfer-bound", "large-graph", "worker-skew"}
    assert view.rules_checked == sum("cluster" in r.scopes for r in registered_rules())


def test_transfer_bound(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Arrays made on one worker process, each read by a trivial task on the other: the
    reading group waits on transfers (over TCP) far longer than it computes. The
    functions are numpy's and operator's, which the worker processes import.

    On a quiet machine the eight 32 MiB fetches take a few tenths of a second in all,
    which can be below the rule's 0.5 s floor (a CI run found 6 x 16 MiB under it): the
    floor is lowered to 0.05 s here, as the large-graph test lowers its threshold; the
    ratio of transfer to compute time, and every figure, are the run's own."""
    monkeypatch.setattr(rules, "TRANSFER_MIN_S", 0.05)
    url = f"sqlite:///{tmp_path / 'transfer.db'}"
    with (
        dask.config.set({"daskscope.flush-interval": "1h"}),
        LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0"
        ) as cluster,
        Client(cluster) as client,
    ):
        cluster_id = daskscope.register(client, database=url)
        maker, reader = sorted(client.scheduler_info()["workers"])
        with get_task_stream(client) as stream:
            parts = [
                client.submit(np.ones, 4 * 2**20, workers=[maker], pure=False, key=f"ones-{i}")
                for i in range(8)
            ]
            firsts = [
                client.submit(operator.itemgetter(0), p, workers=[reader], key=f"first-{i}")
                for i, p in enumerate(parts)
            ]
            assert client.gather(firsts) == [1.0] * 8
        assert daskscope.flush(client)["write_failures"] == 0
    view = cluster_advice(open_store(url), cluster_id)
    (advice,) = [a for a in view.advice if a.rule == "transfer-bound"]
    assert advice.subject == "first"
    seconds: dict[str, float] = defaultdict(float)
    for task in stream.data:
        if str(task["key"]).startswith("first-"):
            for ss in task["startstops"]:
                seconds[ss["action"]] += ss["stop"] - ss["start"]
    transfer = _figure(advice, "Time fetching inputs")
    assert transfer.value == pytest.approx(seconds["transfer"], rel=0.01)
    assert transfer.value >= rules.TRANSFER_MIN_S
    assert _figure(advice, "Compute time").value == pytest.approx(seconds["compute"], abs=1e-4)


def test_a_healthy_workload_gets_no_scheduling_advice(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'control.db'}"
    with (
        dask.config.set({"daskscope.flush-interval": "1h"}),
        LocalCluster(
            n_workers=2, threads_per_worker=2, processes=False, dashboard_address=":0"
        ) as cluster,
        Client(cluster) as client,
    ):
        cluster_id = daskscope.register(client, database=url)
        dask.compute(*[delayed(slow)(i, 0.05 + 0.1 * (i % 11) / 10) for i in range(80)])
        assert daskscope.flush(client)["write_failures"] == 0
    store = open_store(url)
    view = cluster_advice(store, cluster_id)
    assert not {a.rule for a in view.advice} & SCHEDULING_RULES, view.advice
    (computation,) = cluster_detail(store, cluster_id)["computations"]
    view = cluster_advice(store, cluster_id, computation["id"])
    assert not {a.rule for a in view.advice} & SCHEDULING_RULES, view.advice


def test_rules_on_hand_built_rows_without_a_timeline() -> None:
    """No groups, no timeline: every scheduling rule is silent (nothing to go on)."""
    facts = AdviceFacts(scope="cluster", detail={"cluster": {"threads_peak": 4}})
    assert not [a for a in advise(facts) if a.rule in SCHEDULING_RULES]


def test_docs_advice_md_is_current() -> None:
    from daskscope.analysis.advice.docs import rules_markdown

    path = Path(__file__).resolve().parents[1] / "docs" / "advice.md"
    assert path.read_text(encoding="utf-8") == rules_markdown(), (
        "docs/advice.md is stale: run "
        "`python -m daskscope.analysis.advice --write-docs docs/advice.md`"
    )


def test_a_notebook_loop_gets_a_few_findings_not_one_per_computation() -> None:
    """Hand-built rows: eight computations of two 2-second tasks on 4 threads each fall
    short; the five that ran longest are named."""
    comps = [{"id": f"c{i}", "started_at": 100.0 * i} for i in range(8)]
    groups = [
        {"id": f"g{i}", "name": "slow", "prefix": "slow", "computation_id": f"c{i}",
         "tasks_total": 2, "tasks_executed": 2, "tasks_erred": 0, "duration_s": 4.0,
         "started_at": 100.0 * i, "stopped_at": 100.0 * i + 2.0 + 0.1 * i}
        for i in range(8)
    ]  # fmt: skip
    facts = AdviceFacts(
        scope="cluster",
        detail={"cluster": {"threads_peak": 4}, "computations": comps, "task_groups": groups},
    )
    found = [a for a in advise(facts) if a.rule == "too-few-tasks"]
    # advise() orders by severity, rule and subject
    assert [a.subject for a in found] == [f"computation c{i}" for i in (3, 4, 5, 6, 7)]
