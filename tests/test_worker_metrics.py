"""Every worker metric Dask reports is kept: Dask's memory split (managed, unmanaged,
spilled) against the limit, and every other numeric leaf of the heartbeat metrics —
here a worker-side custom metric shaped like distributed's NVML one standing in for a
GPU — on a real cluster, checked against Dask's own state and the data persisted; the
store upgraded from revision 0003 keeps its samples."""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dask
import dask.array as da
import numpy as np
import pytest
import sqlalchemy as sa
from click.testing import CliRunner
from distributed import Client, LocalCluster, wait

import daskscope
from browser import launch_chromium, needs_chromium, new_page
from daskscope import model
from daskscope.cli.main import cli
from daskscope.collector.workers import flatten_metrics, worker_sample
from daskscope.store import open_store, worker_samples, write_records
from daskscope.store.engine import HEAD_REVISION
from webutil import call

pytest.importorskip("fastapi")
from daskscope.web import create_app

MIB = 2**20
LIMIT = 2 * 2**30
#: Per worker, more than the spill target (1 % of the limit, ~21 MiB): some goes to disk
DATA_BYTES = 2 * 48 * MIB


def _gpu_value(address: str) -> float:
    # Differs per worker, so a value stored under the wrong worker is caught.
    return float(sum(address.encode()) % 97)


def _add_fake_gpu(dask_worker: Any) -> None:
    """Custom worker metrics, the way distributed adds its NVML one
    (``Worker.metrics[name] = callable(worker)``): a dict, a scalar, and two values
    that must not be kept (a bool and NaN)."""
    value = _gpu_value(dask_worker.address)
    dask_worker.metrics["gpu"] = lambda w: {"utilization": value, "memory-used": 123 * MIB}
    dask_worker.metrics["my_metric"] = lambda w: 1.5
    dask_worker.metrics["a_flag"] = lambda w: True
    dask_worker.metrics["not_measured"] = lambda w: math.nan


def _heartbeats_carry_everything(dask_scheduler: Any) -> bool:
    return all(
        "gpu" in ws.metrics and ws.metrics["spilled_bytes"]["disk"] > 0
        for ws in dask_scheduler.workers.values()
    )


def _sample_now(dask_scheduler: Any) -> list[tuple[dict, dict, dict]]:
    """On the scheduler's loop: our sample and Dask's own figures at the same moment."""
    out = []
    for ws in dask_scheduler.workers.values():
        record = worker_sample(ws, cluster_id="c", at=time.time())
        mem = ws.memory
        dask_figures = {
            "process": mem.process,
            "managed": mem.managed,
            "unmanaged": mem.unmanaged,
            "unmanaged_old": mem.unmanaged_old,
            "unmanaged_recent": mem.unmanaged_recent,
            "spilled": mem.spilled,
            "memory_limit": ws.memory_limit,
            "nbytes": ws.nbytes,
        }
        out.append((model.record_to_dict(record), dask_figures, dict(ws.metrics)))
    return out


def _wait_for(client: Client, check: Any, what: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not client.run_on_scheduler(check):
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    url = f"sqlite:///{tmp_path_factory.mktemp('worker-metrics') / 'daskscope.db'}"
    # Spill to disk once managed memory passes 1 % of the limit; never pause or spill
    # by process memory (in-process workers share this test's RSS).
    memory = {"target": 0.01, "spill": False, "pause": False, "terminate": False}
    with (
        dask.config.set({f"distributed.worker.memory.{k}": v for k, v in memory.items()}),
        LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=False,
            memory_limit=LIMIT,
            dashboard_address=":0",
            silence_logs=logging.CRITICAL,
        ) as cluster,
        Client(cluster) as client,
    ):
        cluster_id = daskscope.register(client, database=url, worker_sampling_interval=0.2)
        client.run(_add_fake_gpu)
        x = da.random.random(DATA_BYTES // 8, chunks=4 * MIB // 8).persist()
        wait(x)
        _wait_for(client, _heartbeats_carry_everything, "heartbeats with spilled data and gpu")
        # Let the recorder take a few samples of this settled state (every 0.2 s)
        time.sleep(1.0)
        at_once = client.run_on_scheduler(_sample_now)
        gpu = client.run(lambda dask_worker: _gpu_value(dask_worker.address))
        daskscope.flush(client)
        rest_ended = time.time()
    # The cluster closed: the store holds everything and changes no more
    yield {
        "url": url,
        "cluster_id": cluster_id,
        "at_once": at_once,
        "rest_ended": rest_ended,
        "gpu": gpu,
        "persisted_bytes": int(x.nbytes),
    }


def test_sample_is_dasks_memory_split_at_the_same_moment(recorded: dict[str, Any]) -> None:
    assert len(recorded["at_once"]) == 2
    for record, mem, metrics in recorded["at_once"]:
        assert record["memory"] == mem["process"]
        assert record["managed_bytes"] == mem["managed"]
        assert record["unmanaged_bytes"] == mem["unmanaged"]
        assert record["unmanaged_old_bytes"] == mem["unmanaged_old"]
        assert record["unmanaged_recent_bytes"] == mem["unmanaged_recent"]
        assert record["spilled_bytes"] == mem["spilled"] > 0
        assert record["memory_limit"] == mem["memory_limit"] == LIMIT
        # Dask's identities hold in what is stored
        assert record["memory"] == record["managed_bytes"] + record["unmanaged_bytes"]
        assert record["unmanaged_bytes"] == (
            record["unmanaged_old_bytes"] + record["unmanaged_recent_bytes"]
        )
        # Every numeric leaf, flattened, nothing listed by hand
        assert record["metrics"] == flatten_metrics(metrics)
        assert record["metrics"]["host_net_io.read_bps"] == record["net_read_bps"]
        assert record["metrics"]["host_disk_io.write_bps"] == record["disk_write_bps"]
        assert record["metrics"]["cpu"] == record["cpu_percent"]


def test_managed_and_spilled_add_up_to_the_data_persisted(recorded: dict[str, Any]) -> None:
    """Independent ground truth: the bytes of the array persisted are held in RAM
    (managed) or spilled; Dask's heartbeat tells how much of it is spilled."""
    total_managed = sum(rec["managed_bytes"] for rec, _, _ in recorded["at_once"])
    spilled_in_memory_terms = sum(
        rec["metrics"]["spilled_bytes.memory"] for rec, _, _ in recorded["at_once"]
    )
    assert total_managed + spilled_in_memory_terms == recorded["persisted_bytes"]
    assert spilled_in_memory_terms > 0


def test_stored_samples_keep_every_metric_the_workers_reported(recorded: dict[str, Any]) -> None:
    with open_store(recorded["url"]) as store:
        rows = worker_samples(store, recorded["cluster_id"])
    at_once = {rec["worker"]: (rec, mem) for rec, mem, _ in recorded["at_once"]}
    # Samples taken while the data was at rest: after Dask's figures were read, before
    # the cluster began to close (closing moves or drops the data)
    rest_started = max(rec["sampled_at"] for rec, _ in at_once.values())
    last: dict[str, dict[str, Any]] = {}
    for row in rows:
        if rest_started < row["sampled_at"] < recorded["rest_ended"]:
            last[row["worker"]] = row
    assert set(last) == set(recorded["gpu"])
    for worker, row in last.items():
        metrics = row["metrics"]
        assert metrics["gpu.utilization"] == recorded["gpu"][worker]
        assert metrics["gpu.memory-used"] == 123 * MIB
        assert metrics["my_metric"] == 1.5
        assert "a_flag" not in metrics and "not_measured" not in metrics
        assert not any(k.startswith("digests_total_since_heartbeat") for k in metrics)
        assert row["memory"] == row["managed_bytes"] + row["unmanaged_bytes"]
        # At rest the data held does not move: the last sample saw what Dask saw
        _, mem = at_once[worker]
        assert row["managed_bytes"] == mem["managed"]
        assert row["spilled_bytes"] == mem["spilled"]
        assert row["memory_limit"] == LIMIT


def test_cluster_page_and_api_show_the_split_and_extra_metrics(recorded: dict[str, Any]) -> None:
    app = create_app(recorded["url"])
    try:
        cid = recorded["cluster_id"]
        body = call(app, "GET", f"/api/v1/clusters/{cid}").json()
        with open_store(recorded["url"]) as store:
            rows = worker_samples(store, cid)
        last = {r["worker"]: r for r in rows}  # in time order: each worker's last sample
        workers = {w["worker"]: w for w in body["workers"]}
        assert set(workers) == set(recorded["gpu"]) == set(last)
        for worker, w in workers.items():
            assert w["extra_metrics"]["gpu.utilization"] == recorded["gpu"][worker]
            assert w["extra_metrics"]["my_metric"] == 1.5
            assert "memory" not in w["extra_metrics"]  # has a column of its own
            assert w["memory_limit"] == LIMIT
            for part in ("managed_bytes", "unmanaged_bytes", "spilled_bytes"):
                assert w[part] == last[worker][part]
        series = call(app, "GET", f"/api/v1/clusters/{cid}/workers").json()
        # The drawn totals are the sums of the stored samples of each round
        memory = series["memory"]
        for i, t in enumerate(memory["t"]):
            same_round = [r for r in rows if r["sampled_at"] == t]
            for part in ("managed_bytes", "unmanaged_bytes", "spilled_bytes", "memory_limit"):
                values = [r[part] for r in same_round]
                expected = None if None in values else sum(values)
                assert memory[part][i] == expected
        assert max(memory["memory_limit"]) == 2 * LIMIT
        assert max(memory["spilled_bytes"]) > 0
        for worker in recorded["gpu"]:
            assert max(series["workers"][worker]["spilled"]) > 0
        html = call(app, "GET", f"/clusters/{cid}").text
        assert 'data-metric="gpu.utilization"' in html
        assert 'data-metric="my_metric"' in html
        assert "Unmanaged" in html and "Spilled" in html
    finally:
        app.state.store.close()


def test_show_prints_the_split_and_extra_metrics(recorded: dict[str, Any]) -> None:
    from daskscope.format import number_text

    result = CliRunner().invoke(
        cli,
        ["--database", recorded["url"], "show", recorded["cluster_id"]],
        env={"COLUMNS": "250"},
        catch_exceptions=False,
    )
    assert result.exit_code == 0, result.output
    assert "unmanaged" in result.output and "spilled" in result.output
    lines = {line.split()[1]: line.split()[2:] for line in result.output.splitlines()
             if line.startswith("│ ") and len(line.split()) > 2}  # fmt: skip
    # metric x worker, the workers in address order
    gpu = [f"{recorded['gpu'][w]:.0f}" for w in sorted(recorded["gpu"])]
    assert [cell for cell in lines["gpu.utilization"] if cell != "│"] == gpu
    assert [cell for cell in lines["my_metric"] if cell != "│"] == [number_text(1.5)] * 2


# ---------------------------------------------------------------- migration 0003 -> 0004


def _store_at_0003(url: str) -> None:
    from alembic import command

    from daskscope.store.engine import _alembic_config

    engine = sa.create_engine(url)
    with engine.begin() as conn:
        cfg = _alembic_config()
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "0003")
    engine.dispose()


OLD_SAMPLE = {
    "id": "old-sample",
    "cluster_id": "old-cluster",
    "worker": "tcp://10.0.0.1:1234",
    "sampled_at": 1_700_000_000.25,
    "nthreads": 4,
    "memory_limit": 8 * 2**30,
    "memory": 600 * MIB,
    "managed_bytes": 100 * MIB,
    "spilled_bytes": 0,
    "cpu_percent": 12.5,
    "executing": 1,
    "processing": 3,
    "transfer_incoming_bytes": 0,
    "transfer_outgoing_bytes": 0,
    "net_read_bps": 10.0,
    "net_write_bps": 20.0,
    "disk_read_bps": 30.0,
    "disk_write_bps": 40.0,
}


def test_migration_keeps_samples_of_a_0003_store(database_url: str, tmp_path: Path) -> None:
    if database_url.startswith("sqlite"):
        Path(database_url.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
    _store_at_0003(database_url)
    engine = sa.create_engine(database_url)
    with engine.begin() as conn:
        old = sa.Table("worker_samples", sa.MetaData(), autoload_with=conn)
        assert "metrics" not in old.c
        conn.execute(old.insert(), [OLD_SAMPLE])
    engine.dispose()

    with open_store(database_url) as store:
        assert store.current_revision() == store.head_revision() == HEAD_REVISION
        (row,) = worker_samples(store, "old-cluster")
        assert {k: row[k] for k in OLD_SAMPLE} == OLD_SAMPLE
        # Not recorded then: absent, not zero
        for name in ("unmanaged_bytes", "unmanaged_old_bytes", "unmanaged_recent_bytes"):
            assert row[name] is None
        assert row["metrics"] is None
        new = model.WorkerSampleRecord(
            **{**OLD_SAMPLE, "id": "new-sample", "sampled_at": OLD_SAMPLE["sampled_at"] + 2},
            unmanaged_bytes=500 * MIB,
            unmanaged_old_bytes=450 * MIB,
            unmanaged_recent_bytes=50 * MIB,
            metrics={"gpu.utilization": 37.0, "my_metric": 1.5},
        )
        write_records(store, [new])
        rows = worker_samples(store, "old-cluster")
    assert [r["id"] for r in rows] == ["old-sample", "new-sample"]
    assert rows[1]["metrics"] == {"gpu.utilization": 37.0, "my_metric": 1.5}
    assert rows[1]["unmanaged_recent_bytes"] == 50 * MIB


def test_flatten_metrics_keeps_numeric_leaves_only() -> None:
    metrics = {
        "cpu": 50,
        "gpu": {"utilization": 37, "memory-used": 10.5, "name": "A100"},
        "flag": False,
        "nan": float("nan"),
        "big": np.int64(2**40),
        "digests_total_since_heartbeat": {("execute", "x", "thread-cpu", "seconds"): 1.0},
        "bandwidth": {"total": 1e8, "workers": {"tcp://a:1": 1e8}, "types": {"int": 1e8}},
    }
    assert flatten_metrics(metrics) == {
        "cpu": 50.0,
        "gpu.utilization": 37.0,
        "gpu.memory-used": 10.5,
        "big": float(2**40),
        "bandwidth.total": 1e8,
    }


@needs_chromium
def test_browser_draws_memory_against_the_limit(recorded: dict[str, Any], tmp_path: Path) -> None:
    from webutil import serving

    app = create_app(recorded["url"])
    cid = recorded["cluster_id"]
    try:
        body = call(app, "GET", f"/api/v1/clusters/{cid}/workers").json()
        series = body["memory"]
        # Chromium is launched after call(): Playwright's event loop would refuse its asyncio.run
        with serving(app) as base, launch_chromium() as browser:
            context, page, _ = new_page(browser, 1300, 900)
            try:
                page.goto(f"{base}/clusters/{cid}?tab=workers")
                page.wait_for_selector("#workers-charts[data-ready='1']")
                drawn = page.evaluate(
                    """() => Object.fromEntries(document.querySelector(
                        "#workers-charts [data-chart='memory-total']").data
                        .map((t) => [t.name, t.y]))"""
                )
                page.screenshot(path=str(tmp_path / "workers.png"))
            finally:
                context.close()
    finally:
        app.state.store.close()
    # departures are markers of their own (workers leaving close together share one), none
    # when no worker left while recorded; a normal close is never drawn as a loss
    left = "worker left (closed, retired, restarted)"
    normal = [d for d in body["departures"] if not d["lost"]]
    markers = drawn.pop(left, [])
    assert (1 <= len(markers) <= len(normal)) if normal else not markers
    assert "worker lost" not in drawn
    assert drawn == {
        "managed": series["managed_bytes"],
        "unmanaged": series["unmanaged_bytes"],
        "spilled": series["spilled_bytes"],
        "memory limit": series["memory_limit"],
    }


def test_samples_from_before_0004_show_not_recorded() -> None:
    from rich.console import Console

    from daskscope.cli.render import worker_metrics_table

    console = Console(width=200, record=True)
    old = {"worker": "tcp://old:1", "metrics": None}
    new = {"worker": "tcp://new:1", "metrics": {"gpu.utilization": 37.0, "memory": 5.0}}
    console.print(worker_metrics_table([old, new]))
    text = console.export_text()
    assert "not recorded" in text
    assert "gpu.utilization" in text and "37" in text
    assert "│ memory" not in text  # has a column of its own in the workers table
