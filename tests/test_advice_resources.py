"""The resource advice rules (issue 14) on real clusters, each on a workload built to
trigger it and on a healthy control built not to, against Dask's own figures: spilling,
memory near the limit, non-CPU time, a worker killed, failed tasks."""

from __future__ import annotations

import logging
import os
import signal
import time
from pathlib import Path
from typing import Any

import dask
import dask.array as da
import numpy as np
import psutil
import pytest
from distributed import Client, LocalCluster, wait

import daskscope
from daskscope.analysis.advice import Advice, AdviceFacts, advise, registered_rules
from daskscope.analysis.advice import resources as r
from daskscope.store import cluster_detail, open_store, worker_samples
from daskscope.views.advice_resources import resource_extra
from webutil import call

MIB = 2**20
#: the rules of analysis/advice/resources.py
RESOURCE_RULES = {
    "spilling",
    "memory-near-limit",
    "noncpu-time",
    "workers-lost",
    "errors",
    "read-amplification",
    "chunks-too-small",
}
QUIET = logging.CRITICAL
#: a normal worker's memory settings are left alone unless a test says otherwise
NO_MEMORY_ACTIONS = {"target": False, "spill": False, "pause": False, "terminate": False}


# -- helpers ----------------------------------------------------------------------------


def facts(
    url: str, cluster_id: str, scope: str = "cluster", computation_id: str | None = None
) -> AdviceFacts:
    """The facts as the store gives them (every group), with our extra facts."""
    with open_store(url) as store:
        return AdviceFacts(
            scope=scope,  # type: ignore[arg-type]
            detail=cluster_detail(store, cluster_id),
            worker_samples=worker_samples(store, cluster_id),
            computation_id=computation_id,
            extra=resource_extra(store, cluster_id, computation_id, None),
        )


def ours(found: list[Advice]) -> dict[str, list[Advice]]:
    out: dict[str, list[Advice]] = {}
    for advice in found:
        if advice.rule in RESOURCE_RULES:
            out.setdefault(advice.rule, []).append(advice)
    return out


def evidence(advice: Advice, label: str) -> Any:
    (value,) = [e.value for e in advice.evidence if e.label == label]
    return value


def cluster(n_workers: int = 2, **kwargs: Any) -> LocalCluster:
    kwargs.setdefault("processes", False)
    return LocalCluster(
        n_workers=n_workers,
        threads_per_worker=1,
        dashboard_address=":0",
        silence_logs=QUIET,
        **kwargs,
    )


def dask_execute_totals(dask_scheduler: Any) -> dict[tuple[str, str], float]:
    """On the scheduler: Dask's own fine metrics of task execution, by activity and unit."""
    out: dict[tuple[str, str], float] = {}
    for key, value in dask_scheduler.cumulative_worker_metrics.items():
        if isinstance(key, tuple) and len(key) == 4 and key[0] == "execute":
            out[(key[2], key[3])] = out.get((key[2], key[3]), 0.0) + value
    return out


def wait_until(client: Client, check: Any, what: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not client.run_on_scheduler(check):
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def heartbeats_after(client: Client, seconds: float) -> None:
    """Wait until every worker has sent a heartbeat ``seconds`` after now (the
    recorder's samples and Dask's fine metrics ride on them)."""
    since = time.time() + seconds

    def fresh(dask_scheduler: Any) -> bool:
        return all(ws.last_seen > since for ws in dask_scheduler.workers.values())

    wait_until(client, fresh, "fresh heartbeats")


# -- the rules are registered and documented --------------------------------------------


def test_every_resource_rule_is_registered_with_its_thresholds_explained() -> None:
    specs = {s.id: s for s in registered_rules() if s.id in RESOURCE_RULES}
    assert set(specs) == RESOURCE_RULES
    assert specs["memory-near-limit"].explanation.count("80%") == 1
    assert "95%" in specs["memory-near-limit"].explanation
    assert "50%" in specs["noncpu-time"].explanation
    assert "`lost`" in specs["workers-lost"].explanation
    assert specs["read-amplification"].scopes == ("run",)
    assert specs["chunks-too-small"].scopes == ("run",)


# -- the healthy control: none of the rules fires ---------------------------------------


def test_a_healthy_cluster_gets_no_resource_advice(database_url: str) -> None:
    """Small arrays on 2 workers with ample memory, no failures, a clean close."""
    with (
        dask.config.set({"daskscope.flush-interval": "1h"}),
        cluster(memory_limit=8 * 2**30) as c,
        Client(c) as client,
    ):
        cluster_id = daskscope.register(client, database=database_url, worker_sampling_interval=0.2)
        x = da.random.random((400, 400), chunks=100)
        assert float((x + x.T).sum().compute()) == pytest.approx(float(2 * x.sum().compute()))
        heartbeats_after(client, 0.3)
        truth = client.run_on_scheduler(dask_execute_totals)
    found = facts(database_url, cluster_id)
    assert found.worker_samples and found.detail["fine_metrics"]  # there was data to judge
    assert not any(e["kind"] == "worker-removed" and e["detail"]["reason"] == "lost"
                   for e in found.detail["events"])  # fmt: skip
    assert truth.get(("disk-write", "bytes"), 0) == 0
    # On a busy host a task's thread waits for a core, and Dask itself counts that time
    # as not on the CPU: the non-CPU rule is then right to fire. It may fire only where
    # Dask's own totals cross its thresholds, and with Dask's figures as its evidence.
    noncpu = truth.get(("thread-noncpu", "seconds"), 0.0)
    cpu = truth.get(("thread-cpu", "seconds"), 0.0)
    contended = noncpu >= r.NONCPU_MIN_SECONDS and noncpu / (noncpu + cpu) >= r.NONCPU_SHARE

    def healthy(found_advice: list[Advice], whole_cluster: bool) -> dict[str, list[Advice]]:
        advised = ours(found_advice)
        for advice in advised.pop("noncpu-time", []):
            if whole_cluster:
                assert contended, (noncpu, cpu)
                assert evidence(advice, "thread-noncpu") == pytest.approx(noncpu, rel=1e-6)
            else:  # a computation's part of Dask's totals
                assert evidence(advice, "thread-noncpu") <= noncpu * (1 + 1e-6)
        return advised

    assert healthy(advise(found), whole_cluster=True) == {}
    for comp in found.detail["computations"]:
        found_comp = advise(facts(database_url, cluster_id, "computation", comp["id"]))
        assert healthy(found_comp, whole_cluster=False) == {}
    from daskscope.web import create_app

    with open_store(database_url) as store:
        shown = call(create_app(store), "GET", f"/api/v1/clusters/{cluster_id}/advice").json()
    assert shown["rules_checked"] >= len(RESOURCE_RULES) - 2  # the run-only two aside
    assert not RESOURCE_RULES & {a["rule"] for a in shown["advice"]}


# -- spilling ---------------------------------------------------------------------------


def test_spilling_fires_when_workers_write_to_disk(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    # spill managed data once it passes 1 % of a 2 GiB limit (~21 MiB); 96 MiB persisted
    memory = {**NO_MEMORY_ACTIONS, "target": 0.01}
    with (
        dask.config.set({f"distributed.worker.memory.{k}": v for k, v in memory.items()}),
        dask.config.set({"daskscope.flush-interval": "1h"}),
        cluster(memory_limit=2 * 2**30) as c,
        Client(c) as client,
    ):
        cluster_id = daskscope.register(client, database=url, worker_sampling_interval=0.2)
        x = da.random.random(96 * MIB // 8, chunks=4 * MIB // 8).persist()
        wait(x)

        def spilled(dask_scheduler: Any) -> bool:
            return all(ws.memory.spilled > 0 for ws in dask_scheduler.workers.values())

        wait_until(client, spilled, "spilled data in the heartbeats")
        heartbeats_after(client, 0.5)
        truth = client.run_on_scheduler(dask_execute_totals)
        on_disk = client.run_on_scheduler(
            lambda dask_scheduler: {
                a: ws.memory.spilled for a, ws in dask_scheduler.workers.items()
            }
        )
        del x
    (advice,) = ours(advise(facts(url, cluster_id)))["spilling"]
    assert truth[("disk-write", "bytes")] > 0
    assert evidence(advice, "bytes written to disk (disk-write)") == pytest.approx(
        truth[("disk-write", "bytes")]
    )
    # the most on disk is at least what Dask reported at rest (data only grew, then rested)
    assert evidence(advice, "most on disk at once, one worker") >= max(on_disk.values())
    assert evidence(advice, "workers that spilled") == 2
    assert advice.subject in on_disk


# -- memory near the limit --------------------------------------------------------------


def hold(nbytes: int, dask_worker: Any) -> int:
    """Keep ``nbytes`` of touched memory on the worker, outside Dask's data (unmanaged)."""
    held = dask_worker.__dict__.setdefault("_advice_test_hold", [])
    held.append(np.ones(nbytes, dtype="u1"))
    return sum(a.nbytes for a in held)


def test_memory_near_the_limit_fires_from_80_percent(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    # one worker in this process, its limit 320 MiB above what the process holds now;
    # Dask must neither pause nor kill it while the test fills it
    limit = psutil.Process().memory_info().rss + 320 * MIB
    with (
        dask.config.set(
            {f"distributed.worker.memory.{k}": v for k, v in NO_MEMORY_ACTIONS.items()}
        ),
        dask.config.set({"daskscope.flush-interval": "1h"}),
        cluster(n_workers=1, memory_limit=limit) as c,
        Client(c) as client,
    ):
        cluster_id = daskscope.register(client, database=url, worker_sampling_interval=0.2)

        def share(dask_scheduler: Any) -> float:
            (ws,) = dask_scheduler.workers.values()
            return ws.memory.process / ws.memory_limit

        # before it is filled, the same worker is the control
        heartbeats_after(client, 0.3)
        assert client.run_on_scheduler(share) < r.MEMORY_WARNING
        assert "memory-near-limit" not in ours(advise(facts_now(client, url, cluster_id)))
        # fill it to 90 % of its limit (again if the process freed something meanwhile)
        while (seen := client.run_on_scheduler(share)) < 0.85:
            client.run(hold, int((0.9 - seen) * limit))
            heartbeats_after(client, 0.2)
        heartbeats_after(client, 0.5)  # the recorder samples every 0.2 s
        seen = client.run_on_scheduler(share)
        dask_limit = client.run_on_scheduler(
            lambda dask_scheduler: next(iter(dask_scheduler.workers.values())).memory_limit
        )
        client.run(lambda dask_worker: dask_worker.__dict__.pop("_advice_test_hold", None))
    (advice,) = ours(advise(facts(url, cluster_id)))["memory-near-limit"]
    assert evidence(advice, "memory limit") == dask_limit == limit
    peak = evidence(advice, "peak process memory ÷ limit")
    assert peak >= r.MEMORY_WARNING and peak >= seen * 0.9
    assert evidence(advice, "peak process memory") == pytest.approx(peak * limit)
    assert advice.severity == ("critical" if peak >= r.MEMORY_CRITICAL else "warning")


def facts_now(client: Client, url: str, cluster_id: str) -> AdviceFacts:
    daskscope.flush(client)
    return facts(url, cluster_id)


# -- non-CPU time and errors, one computation each --------------------------------------


def sleepy(x: int) -> int:
    time.sleep(0.3)
    return x


def picky(x: int) -> int:
    if x % 3 == 0:
        raise ValueError(f"bad row {x}")
    return x


def test_noncpu_time_and_errors_fire_on_their_own_computations(database_url: str) -> None:
    with (
        dask.config.set({"daskscope.flush-interval": "1h"}),
        cluster(memory_limit=4 * 2**30) as c,
        Client(c) as client,
    ):
        cluster_id = daskscope.register(client, database=database_url)
        assert client.gather(client.map(sleepy, range(8))) == list(range(8))
        heartbeats_after(client, 0.3)
        after_sleep = client.run_on_scheduler(dask_execute_totals)
        futures = client.map(picky, range(9))
        wait(futures)
        failed = [f for f in futures if f.status == "error"]
        messages = {str(f.exception()) for f in failed}
        heartbeats_after(client, 0.3)
        erred = client.run_on_scheduler(lambda dask_scheduler: len(dask_scheduler.erred_tasks))
    assert len(failed) == 3 and erred == 3

    whole = facts(database_url, cluster_id)
    found = ours(advise(whole))
    (noncpu,) = found["noncpu-time"]
    assert noncpu.subject == "sleepy"
    # Dask's own split, and at least the 8 x 0.3 s the tasks slept
    truth = after_sleep[("thread-noncpu", "seconds")]
    assert evidence(noncpu, "thread-noncpu") >= truth >= 8 * 0.3
    assert evidence(noncpu, "non-CPU share of thread time") >= r.NONCPU_SHARE
    (errors,) = found["errors"]
    assert errors.subject == "picky" and errors.title == "Tasks failed: ValueError"
    assert evidence(errors, "failed tasks recorded") == len(failed)
    assert evidence(errors, "with this exception type") == len(failed)
    assert evidence(errors, "exception types") == 1
    assert any(m in errors.action for m in messages)
    assert {"spilling", "memory-near-limit", "workers-lost"}.isdisjoint(found)

    # each computation gets only its own advice
    by_prefix = {}
    for comp in whole.detail["computations"]:
        prefixes = {g["prefix"] for g in whole.detail["task_groups"]
                    if g["computation_id"] == comp["id"]}  # fmt: skip
        by_prefix[frozenset(prefixes)] = set(
            ours(advise(facts(database_url, cluster_id, "computation", comp["id"])))
        )
    assert by_prefix == {frozenset({"sleepy"}): {"noncpu-time"}, frozenset({"picky"}): {"errors"}}

    # the same through the API (D1's view gathers the facts, with the timeline's)
    from daskscope.web import create_app

    with open_store(database_url) as store:
        app = create_app(store)
        shown = call(app, "GET", f"/api/v1/clusters/{cluster_id}/advice").json()
        per_computation = {
            c["id"]: call(
                app, "GET", f"/api/v1/clusters/{cluster_id}/advice?computation={c['id'][:12]}"
            ).json()
            for c in whole.detail["computations"]
        }
    listed = {a["rule"]: a for a in shown["advice"] if a["rule"] in RESOURCE_RULES}
    assert set(listed) == {"noncpu-time", "errors"}
    texts = {e["label"]: e["value_text"] for e in listed["errors"]["evidence"]}
    assert texts["failed tasks recorded"] == str(len(failed))
    assert listed["noncpu-time"]["subject"] == "sleepy"
    assert sorted(
        sorted(a["rule"] for a in view["advice"] if a["rule"] in RESOURCE_RULES)
        for view in per_computation.values()
    ) == [["errors"], ["noncpu-time"]]


# -- a worker lost ----------------------------------------------------------------------


def test_a_killed_worker_is_lost_a_closed_one_is_not(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    with (
        dask.config.set({"daskscope.flush-interval": "1h"}),
        cluster(processes=True) as c,
        Client(c) as client,
    ):
        cluster_id = daskscope.register(client, database=url)
        assert sum(client.gather(client.map(abs, range(-10, 10)))) == 100
        victim = sorted(client.scheduler_info()["workers"])[0]
        pid = client.run(os.getpid, workers=[victim])[victim]
        os.kill(pid, signal.SIGKILL)
        while victim in client.scheduler_info()["workers"]:
            time.sleep(0.05)
        # the survivor goes on (the nanny's replacement may still be starting)
        assert sum(client.gather(client.map(abs, range(-10, 10)))) == 100
        dasks_removals = [
            msg
            for _, msg in client.get_events("all")
            if isinstance(msg, dict) and msg.get("action") == "remove-worker"
        ]
    # then the cluster closed, removing the other workers normally
    assert [m["worker"] for m in dasks_removals] == [victim]
    found = facts(url, cluster_id)
    removed = [e for e in found.detail["events"] if e["kind"] == "worker-removed"]
    reasons = {e["worker"]: e["detail"]["reason"] for e in removed}
    assert reasons[victim] == "lost"
    assert len(reasons) >= 2 and set(reasons.values()) - {"lost"} == {"closed"}  # at the close
    (advice,) = ours(advise(found))["workers-lost"]
    assert advice.subject == victim and advice.severity == "critical"
    assert evidence(advice, "workers lost") == 1


# -- thresholds and edges, on hand-built rows -------------------------------------------


def sample(worker: str, at: float, memory: int, limit: int, spilled: int = 0) -> dict[str, Any]:
    return {
        "worker": worker,
        "sampled_at": at,
        "memory": memory,
        "memory_limit": limit,
        "spilled_bytes": spilled,
    }


def hand_facts(**kwargs: Any) -> AdviceFacts:
    detail = {"cluster": {"tasks_erred": 0}, "computations": [], "task_groups": [],
              "fine_metrics": [], "events": [], "errors": []}  # fmt: skip
    detail.update(kwargs.pop("detail", {}))
    return AdviceFacts(scope=kwargs.pop("scope", "cluster"), detail=detail, **kwargs)


def test_memory_severity_follows_dasks_pause_and_terminate_fractions() -> None:
    limit = 1000
    for memory, expected in ((799, None), (800, "warning"), (949, "warning"), (950, "critical")):
        found = ours(advise(hand_facts(worker_samples=[sample("w1", 1.0, memory, limit)])))
        if expected is None:
            assert "memory-near-limit" not in found
        else:
            assert found["memory-near-limit"][0].severity == expected
    # a worker without a limit is never near it
    assert ours(advise(hand_facts(worker_samples=[sample("w1", 1.0, 10**12, 0)]))) == {}


def test_spilling_is_critical_when_spill_time_passes_a_tenth_of_task_time() -> None:
    def metrics(spill_s: float) -> list[dict[str, Any]]:
        return [
            {"activity": "thread-cpu", "prefix": "x", "unit": "seconds", "value": 10.0 - spill_s},
            {"activity": "disk-write", "prefix": "x", "unit": "seconds", "value": spill_s},
            {"activity": "disk-write", "prefix": "x", "unit": "bytes", "value": 5e6},
        ]

    for spill_s, severity in ((0.5, "warning"), (1.0, "critical")):
        (advice,) = ours(advise(hand_facts(detail={"fine_metrics": metrics(spill_s)})))["spilling"]
        assert advice.severity == severity
        assert evidence(advice, "spill time ÷ task time") == pytest.approx(spill_s / 10)


def test_errors_count_the_clusters_total_when_the_table_kept_fewer() -> None:
    rows = [{"prefix": "load", "key": f"load-{i}", "at": float(i), "group_id": "g",
             "exception": "OSError: [Errno 2] No such file"} for i in range(3)]  # fmt: skip
    found = ours(advise(hand_facts(detail={"errors": rows, "cluster": {"tasks_erred": 250}})))
    (advice,) = found["errors"]
    assert advice.title == "Tasks failed: OSError"
    assert evidence(advice, "failed tasks recorded") == 3
    assert evidence(advice, "failed tasks in all (tasks_erred)") == 250
    assert "No such file" in advice.action


def test_a_run_is_judged_within_its_own_time_only() -> None:
    """A run's cluster may have lived longer: what happened outside the run is not its."""
    run = {"run": {"id": "r", "started_at": 100.0, "stopped_at": 200.0, "metrics": {}},
           "chunks": []}  # fmt: skip
    lost = {"kind": "worker-removed", "worker": "w1", "detail": {"reason": "lost"}}
    outside = hand_facts(
        scope="run",
        run=run,
        worker_samples=[sample("w1", 50.0, 990, 1000, spilled=10)],
        detail={"events": [{**lost, "at": 250.0}]},
    )
    assert ours(advise(outside)) == {}
    inside = hand_facts(
        scope="run",
        run=run,
        worker_samples=[sample("w1", 150.0, 990, 1000, spilled=10)],
        detail={"events": [{**lost, "at": 150.0}]},
    )
    assert set(ours(advise(inside))) == {"memory-near-limit", "spilling", "workers-lost"}


def test_a_runs_noncpu_time_comes_from_its_own_figures() -> None:
    def run(metrics: dict[str, float]) -> AdviceFacts:
        return hand_facts(scope="run", run={"run": {"id": "r", "started_at": 0.0,
                                                    "stopped_at": 9.0, "metrics": metrics},
                                            "chunks": []})  # fmt: skip

    assert "noncpu-time" in ours(advise(run({"cpu_seconds": 1.0, "noncpu_seconds": 3.0})))
    assert ours(advise(run({"cpu_seconds": 3.0, "noncpu_seconds": 1.0}))) == {}
    # the local backend's CPU is psutil's and there is no non-CPU split: not judged
    assert ours(advise(run({"cpu_seconds": 0.1}))) == {}


def test_only_local_files_that_exist_get_a_size(tmp_path: Path) -> None:
    from daskscope.views.advice_resources import file_sizes

    here = tmp_path / "events.root"
    here.write_bytes(b"x" * 1234)
    names = {str(here), f"file://{here}", "root://eos.example//store/a.root",
             str(tmp_path / "gone.root"), "https://example.org/b.root"}  # fmt: skip
    assert file_sizes(names) == {str(here): 1234, f"file://{here}": 1234}


def test_chunk_rules_count_only_chunks_that_succeeded() -> None:
    def chunk(i: int, wall: float, status: str = "ok") -> dict[str, Any]:
        return {"chunk_index": i, "wall_s": wall, "events": 100, "filename": "f.root",
                "bytes_read": 400, "detail": {"status": status}}  # fmt: skip

    def run(chunks: list[dict[str, Any]]) -> AdviceFacts:
        head = {"id": "r", "started_at": 0.0, "stopped_at": 9.0, "metrics": {}}
        extra = {"file_sizes": {"f.root": 1000}}
        return hand_facts(scope="run", run={"run": head, "chunks": chunks}, extra=extra)

    short = [chunk(i, 0.1) for i in range(3)]
    # three short chunks reading 1.2 times the file are too few and read it too little;
    # failed attempts do not count
    assert ours(advise(run(short + [chunk(9, 0.1, "failed")] * 5))) == {}
    found = ours(advise(run([*short, chunk(3, 0.2)])))
    assert set(found) == {"chunks-too-small", "read-amplification"}
    assert evidence(found["read-amplification"][0], "bytes read ÷ file size") == 1.6
    assert evidence(found["chunks-too-small"][0], "median chunk wall time") == pytest.approx(0.1)
