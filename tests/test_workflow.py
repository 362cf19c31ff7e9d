"""Workflow metrics without coffea: a plain Dask workload, the local backend, the switch,
derived metrics, save/load, summary and plots, the store and the CLI."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from distributed import Client, LocalCluster

import daskscope
from daskscope import MetricsCollector, plots, track_memory, track_metrics, track_time
from daskscope.cli.main import cli
from daskscope.cli.run_summary import summary_tables
from daskscope.workflow import current_chunk, register_derived_metric
from daskscope.workflow import metrics as wm
from daskscope.workflow.backends import Backend, backend_names, register_backend


@pytest.fixture(scope="module")
def client() -> Iterator[Client]:
    with (
        LocalCluster(
            n_workers=2, threads_per_worker=1, processes=False, dashboard_address=":0"
        ) as cluster,
        Client(cluster) as c,
    ):
        yield c


@track_metrics
def count_chunk(start: int, stop: int) -> int:
    """A plain Dask chunk: the user reports its events."""
    chunk = current_chunk()
    with track_time(None, "loop"):
        total = sum(range(start, stop))
    with track_memory(None, "alloc"):
        data = bytearray(1 << 16)
    if chunk is not None:
        chunk.report_events(stop - start)
        chunk.set("label", f"{start}-{stop}")
    return total + len(data) * 0


RANGES = [(i * 1000, (i + 1) * 1000 + i) for i in range(6)]


def run_plain(client: Client, **kwargs: Any) -> MetricsCollector:
    with MetricsCollector(client, name="plain", store=False, **kwargs) as collector:
        futures = client.map(count_chunk, [r[0] for r in RANGES], [r[1] for r in RANGES])
        results = client.gather(futures)
    assert results == [sum(range(a, b)) for a, b in RANGES]  # output unchanged
    return collector


def test_plain_dask_workload_with_user_reported_events(client: Client) -> None:
    collector = run_plain(client, worker_tracking_interval=0.05)
    chunks = collector.chunk_metrics
    assert len(chunks) == len(RANGES)
    expected_events = sum(b - a for a, b in RANGES)
    m = collector.metrics
    assert m["total_events"] == expected_events == sum(c["events"] for c in chunks)
    assert m["num_chunks"] == len(RANGES)
    assert m["processing_time_s"] == pytest.approx(sum(c["wall_s"] for c in chunks))
    assert sorted(c["fields"]["label"] for c in chunks) == sorted(f"{a}-{b}" for a, b in RANGES)
    for c in chunks:
        assert c["task_prefix"] == "count_chunk"
        assert set(c["sections"]) == {"loop", "alloc"}
        assert c["started_at"] <= c["stopped_at"]
        assert c["started_at"] > 1.6e9  # epoch seconds, not perf_counter
    # definitions of docs/workflow.md
    wall, cores = m["wall_time_s"], m["cores"]
    assert cores == 2
    assert m["event_rate_wall_khz"] == pytest.approx(expected_events / wall / 1e3)
    assert m["speedup"] == pytest.approx(m["processing_time_s"] / wall)
    assert m["parallel_efficiency"] == pytest.approx(m["processing_time_s"] / (wall * cores))
    assert "bytes_read" not in m and "data_rate_gbps" not in m  # not measured: absent
    # fine metrics of the collector's own span, with Dask's tuple keys
    span = collector.span_metrics
    assert span and all(isinstance(k, tuple) for k in span)
    cpu = sum(v for k, v in span.items() if k[0] == "execute" and k[2] == "thread-cpu")
    assert m["cpu_seconds"] == pytest.approx(cpu)
    assert m["processor_seconds"] > 0  # the tracked task prefix is the processor side
    # tracking sampled inside the scheduler
    data = collector.tracking_data
    assert len(data["time"]) >= 2 and set(data["workers"]) == {2}
    assert len(data["per_worker"]) == 2
    assert m["workers_peak"] == 2 and m["workers_avg"] == pytest.approx(2)
    sections = collector.sections
    assert sections["loop"]["count"] == len(RANGES) and sections["loop"]["kind"] == "time"


def test_nested_collectors_outer_includes_inner(client: Client) -> None:
    # b is entered inside a (two clients of one scheduler): b's span is inside a's, so
    # a's fine metrics hold b's work, and a's chunks and events include b's too
    with Client(client.scheduler.address) as other:
        with MetricsCollector(client, name="a", store=False) as a:
            fa = client.map(count_chunk, [0, 10], [5, 15], key=["a-0", "a-1"])
            with MetricsCollector(other, name="b", store=False) as b:
                fb = other.map(count_chunk, [0, 10, 20], [1, 11, 21], key=["b-0", "b-1", "b-2"])
                other.gather(fb)
            client.gather(fa)
    assert sorted(c["task_key"] for c in a.chunk_metrics) == ["a-0", "a-1", "b-0", "b-1", "b-2"]
    assert sorted(c["task_key"] for c in b.chunk_metrics) == ["b-0", "b-1", "b-2"]
    assert a.metrics["total_events"] == 10 + 3 and b.metrics["total_events"] == 3
    assert b.run.info["nested_in"] == a.id
    # fine metrics agree: the outer span's subtree holds the inner span
    assert b.run.info["span_id"] in a.run.info["span_subtree"]
    assert a.metrics["cpu_seconds"] >= b.metrics["cpu_seconds"]


def wait_then_count(event: str, start: int, stop: int) -> int:
    from distributed import Event

    Event(event).wait()
    return count_chunk(start, stop)


def _knows(key: str, dask_scheduler: Any) -> bool:
    return key in dask_scheduler.tasks


async def _heartbeat(dask_worker: Any) -> None:
    await dask_worker.heartbeat()


def test_an_enclosing_run_growing_during_the_inner_run_is_not_shared(client: Client) -> None:
    # a's task runs only once b is open, so a's span grows during b: that growth is a's
    # own work, not b's, and b's fine metrics are measured
    from distributed import Event

    with Client(client.scheduler.address) as other:
        with MetricsCollector(client, name="a", store=False) as a:
            go = Event("a-go", client=client)
            fa = client.submit(wait_then_count, "a-go", 0, 5, key="a-0")
            with MetricsCollector(other, name="b", store=False) as b:
                fb = other.map(count_chunk, [0, 10], [1, 11], key=["b-0", "b-1"])
                other.gather(fb)
                go.set()
                client.gather(fa)
                client.run(_heartbeat)  # a's metrics reach a's span while b is open
    assert b.run.info["span_incomplete"] == [] and b.run.info["span_borrowed_from"] == []
    assert b.metrics["cpu_seconds"] > 0
    assert a.metrics["cpu_seconds"] >= b.metrics["cpu_seconds"]


def test_runs_sharing_a_task_group_leave_the_later_runs_fine_metrics_out(
    client: Client, caplog: pytest.LogCaptureFixture
) -> None:
    # b (another client) adds tasks to a's live task group "s": Dask puts them on a's
    # span, where they cannot be told apart from a's
    from distributed import Event

    with Client(client.scheduler.address) as other:
        with MetricsCollector(client, name="a", store=False) as a:
            go = Event("s-go", client=client)
            fa = client.submit(wait_then_count, "s-go", 0, 5, key="s-0")
            # Dask gives a task group to the span that first made it: a's task must be
            # on the scheduler before b's arrive (submit only sends it on its way)
            deadline = time.monotonic() + 300
            while not client.run_on_scheduler(_knows, "s-0"):
                assert time.monotonic() < deadline, "the scheduler never received s-0"
                time.sleep(0.05)
            with MetricsCollector(other, name="b", store=False) as b:
                fb = other.map(count_chunk, [10, 20], [11, 21], key=["s-1", "s-2"])
                other.gather(fb)
                go.set()
                client.gather(fa)
    assert b.run.info["span_incomplete"] == [a.run.info["span_id"]]
    assert "cpu_seconds" not in b.metrics and a.metrics["cpu_seconds"] > 0
    assert "fine metrics not measured" in caplog.text


def test_runs_sharing_a_task_group_after_another_pair_of_runs(
    client: Client, caplog: pytest.LogCaptureFixture
) -> None:
    """The same, right after the enclosing-run case on the same cluster: b's tasks all
    joined a's group, so b has no span of its own. Its wait for the heartbeats once
    took that for "nothing ran" and returned before a's span grew, and b's tasks went
    unflagged (this order failed every time under ``-n 3``)."""
    test_an_enclosing_run_growing_during_the_inner_run_is_not_shared(client)
    test_runs_sharing_a_task_group_leave_the_later_runs_fine_metrics_out(client, caplog)


class Counter:
    """A processor-like class: its instances carry the collector's route."""

    @track_metrics
    def process(self, start: int, stop: int) -> int:
        chunk = current_chunk()
        if chunk is not None:
            chunk.report_events(stop - start)
        # the seed's way to add a custom field, safe when nothing is measured
        if hasattr(self, "_roastcoffea_current_chunk"):
            self._roastcoffea_current_chunk["custom_count"] = stop - start
        return sum(range(start, stop))


def test_two_concurrent_collectors_with_the_same_class_get_their_own_chunks(
    client: Client,
) -> None:
    import threading

    results: dict[str, MetricsCollector] = {}
    keys: dict[str, list[str]] = {}
    barrier = threading.Barrier(2)

    def run(name: str, n: int) -> None:
        proc = Counter()
        with MetricsCollector(client, processor_instance=proc, name=name, store=False) as c:
            barrier.wait()  # both collectors are open at once
            futures = client.map(proc.process, range(n), [i + 10 for i in range(n)],
                                 key=[f"{name}-{i}" for i in range(n)])  # fmt: skip
            client.gather(futures)
            barrier.wait()
        results[name], keys[name] = c, [f.key for f in futures]

    threads = [threading.Thread(target=run, args=(name, n)) for name, n in (("x", 3), ("y", 5))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for name, n in (("x", 3), ("y", 5)):
        chunks = results[name].chunk_metrics
        assert sorted(c["task_key"] for c in chunks) == sorted(keys[name])
        assert results[name].metrics["total_events"] == 10 * n
        assert all(c["custom_count"] == 10 and c["fields"]["custom_count"] == 10 for c in chunks)


def test_switch_off(client: Client) -> None:
    collector = run_plain(client, enabled=False)
    with pytest.raises(RuntimeError, match="no measurement"):
        collector.metrics  # noqa: B018
    assert client.run(lambda: daskscope.workflow.is_enabled()) == {
        w: True for w in client.scheduler_info()["workers"]
    }  # restored afterwards
    # and the decorator does nothing at all while off
    daskscope.workflow.set_enabled(False)
    try:
        assert count_chunk(0, 3) == 3
    finally:
        daskscope.workflow.set_enabled(True)


def test_user_registered_derived_metric(client: Client) -> None:
    def per_worker_rate(m: dict, workers: dict) -> dict:
        return {"events_per_worker": m["total_events"] / m["workers_peak"]}

    collector = run_plain(client, derived_metrics=[per_worker_rate])
    m = collector.metrics
    assert m["events_per_worker"] == m["total_events"] / 2

    @register_derived_metric
    def wall_ms(m: dict, workers: dict) -> dict:
        return {"wall_time_ms": m["wall_time_s"] * 1e3}

    try:
        collector = run_plain(client, worker_tracking_interval=None)
        assert collector.metrics["wall_time_ms"] == collector.metrics["wall_time_s"] * 1e3
    finally:
        wm._DERIVED.remove(wall_ms)


def test_local_backend_in_process() -> None:
    with MetricsCollector(name="local", store=False, worker_tracking_interval=0.05) as c:
        results = [count_chunk(a, b) for a, b in RANGES]
        time.sleep(0.12)  # let the sampler take a few samples of this process
    assert results == [sum(range(a, b)) for a, b in RANGES]
    assert c.run is not None and c.run.backend == "local"
    assert len(c.chunk_metrics) == len(RANGES)
    assert c.metrics["total_events"] == sum(b - a for a, b in RANGES)
    assert c.metrics["cores"] == 1
    assert "cpu_seconds" in c.metrics  # from the process tree
    assert "noncpu_seconds" not in c.metrics  # no fine metrics: absent, not zero
    assert c.span_metrics == {}
    assert c.tracking_data["workers"][0] >= 1


def test_injection_is_removed_by_extract(monkeypatch: pytest.MonkeyPatch) -> None:
    from daskscope.workflow import tracking

    @track_metrics
    def process(self: Any, events: list[int]) -> dict[str, Any]:
        return {"sum": sum(events)}

    collector = MetricsCollector(store=False)
    # a process-pool child: no receiver in this context, only the collector's id
    monkeypatch.setenv(tracking.COLLECTOR_ENV, collector.id)
    out = process(None, [1, 2, 3])
    assert out["sum"] == 6 and len(out[tracking.INJECT_KEY]) == 1
    assert collector.extract_metrics_from_output(out) is out
    assert out == {"sum": 6}
    assert len(collector._chunks) == 1


def test_save_load_round_trip_is_exact(client: Client, tmp_path: Path) -> None:
    collector = run_plain(client, worker_tracking_interval=0.05)
    path = collector.save(tmp_path / "runs" / "plain")
    assert path.name == "plain.json"
    loaded = MetricsCollector.load(tmp_path / "runs" / "plain")
    assert loaded.run == collector.run
    assert all(isinstance(k, tuple) for k in loaded.span_metrics)
    assert loaded.tracking_data == collector.tracking_data
    assert loaded.chunk_metrics == collector.chunk_metrics
    assert json.loads(path.read_text())["version"] == 1


def test_summary_and_plots_say_what_was_not_measured(tmp_path: Path) -> None:
    with MetricsCollector(name="empty", store=False, worker_tracking_interval=None) as c:
        pass
    text = "\n".join(_render(t) for t in summary_tables(c.run))
    assert "not measured" in text
    assert "local backend has no fine metrics" in text
    for name, fn in plots.PLOTS.items():
        fig = fn(c.run)
        assert getattr(fig, "daskscope_missing", None), name
    import matplotlib.pyplot as plt

    plt.close("all")


def test_plots_draw_measured_data(client: Client) -> None:
    collector = run_plain(client, worker_tracking_interval=0.05)
    m = collector.metrics
    # a plain Dask run reads no uproot file: those two say so (tests/
    # test_workflow_coffea_toolbox.py draws them); the rest draw
    uproot_only = {"bytes_per_chunk": "no bytes read", "compression": "no uproot tree"}
    stems = ("serialize", "deserialize", "compress", "decompress")
    overhead = sum(m[f"{a}_seconds"] for a in stems)
    for name in plots.PLOTS:
        fig = collector.plot(name)
        if name in uproot_only:
            assert uproot_only[name] in fig.daskscope_missing, name
        elif name == "overhead_by_prefix" and not overhead:
            assert "no (de)serialization" in fig.daskscope_missing
        else:
            assert not hasattr(fig, "daskscope_missing"), name
    import matplotlib.pyplot as plt

    plt.close("all")


def figure_value(view: dict[str, Any], key: str) -> Any:
    """The value of figure ``key`` in a run view's JSON."""
    found = [f["value"] for g in view["figures"] for f in g["figures"] if f["key"] == key]
    assert len(found) == 1, key
    return found[0]


def _render(table: Any) -> str:
    from rich.console import Console

    console = Console(width=200, record=True)
    console.print(table)
    return console.export_text()


def test_run_is_stored_linked_to_its_cluster(client: Client, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    cluster_id = daskscope.register(client, database=url)
    with MetricsCollector(client, name="stored", worker_tracking_interval=0.05) as collector:
        client.gather(client.map(count_chunk, [0, 100], [10, 120]))
    run_id = collector.wait_stored()
    runner = CliRunner()
    listed = runner.invoke(cli, ["--database", url, "runs", "--json"])
    assert listed.exit_code == 0, listed.output
    rows = json.loads(listed.output)["runs"]
    assert [r["id"] for r in rows] == [run_id]
    assert rows[0]["cluster_id"] == cluster_id
    shown = runner.invoke(cli, ["--database", url, "run", run_id[:8], "--json"])
    detail = json.loads(shown.output)
    assert figure_value(detail, "total_events") == 30
    assert len(detail["chunks"]) == 2 and detail["run"]["span_id"] == collector.run.info["span_id"]
    # the computations are the recorder's computation records of that cluster
    daskscope.flush(client)
    from daskscope.store import cluster_detail, open_store

    with open_store(url) as store:
        computations = {c["id"] for c in cluster_detail(store, cluster_id)["computations"]}
    assert set(detail["run"]["computation_ids"]) <= computations
    assert detail["run"]["computation_ids"]
    table = runner.invoke(cli, ["--database", url, "runs"])
    assert "stored" in table.output
    assert runner.invoke(cli, ["--database", url, "run", "zzzzzz"]).exit_code == 2


def test_backend_registry_accepts_third_party_backends() -> None:
    class Null(Backend):
        name = "null"

        def start_tracking(self, interval: float | None) -> None: ...
        def stop_tracking(self) -> dict[str, Any]:
            return {}

        def create_span(self, name: str) -> Any:
            import contextlib

            return contextlib.nullcontext("null-span")

        def get_span_metrics(self, span: Any) -> dict:
            return {}

        def supports_fine_metrics(self) -> bool:
            return False

    register_backend("null", Null)
    assert {"dask", "local", "null"} <= set(backend_names())
    with MetricsCollector(backend=Null(), store=False) as c:
        pass
    assert c.run.backend == "null" and math.isfinite(c.metrics["wall_time_s"])


def test_fine_metric_parser_splits_processor_and_overhead() -> None:
    metrics = {
        ("execute", "proc", "thread-cpu", "seconds"): 3.0,
        ("execute", "proc", "thread-noncpu", "seconds"): 1.0,
        ("execute", "other", "thread-cpu", "seconds"): 0.5,
        ("execute", "proc", "disk-read", "bytes"): 100.0,
        ("get-data", "N/A", "serialize", "seconds"): 0.25,
        ("execute", "N/A", "idle or other spans", "seconds"): 9.0,
    }
    out = wm.parse_fine_metrics(metrics, {"proc"})
    assert out["cpu_seconds"] == 3.5 and out["noncpu_seconds"] == 1.0
    assert out["processor_cpu_seconds"] == 3.0 and out["overhead_cpu_seconds"] == 0.5
    assert out["spill_read_bytes"] == 100.0 and out["serialize_seconds"] == 0.25
    assert out["cpu_percent"] == pytest.approx(100 * 3.5 / 4.5)


def test_importing_daskscope_stays_light() -> None:
    code = (
        "import sys, daskscope; from daskscope import track_metrics; "
        "heavy = [m for m in ('sqlalchemy', 'rich', 'matplotlib', 'coffea', 'awkward') "
        "if m in sys.modules]; print(','.join(heavy))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
    assert {"MetricsCollector", "track_metrics", "track_time", "track_memory"} <= set(
        daskscope.__all__
    )


def test_seed_api_custom_backend_with_its_own_arguments() -> None:
    from daskscope.workflow.backends import AbstractMetricsBackend

    class TaskVineLike(AbstractMetricsBackend):
        """As the seed's docs write one: its own constructor, no spans, no fine metrics."""

        def __init__(self, manager: dict) -> None:
            self.manager = manager

        def start_tracking(self, interval: float | None) -> None:
            self.manager["started"] = interval

        def stop_tracking(self) -> dict:
            return {"taskvine_metrics": self.manager}

        def create_span(self, name: str) -> Any:
            return None

        def get_span_metrics(self, span_info: Any) -> dict:
            raise AssertionError("never asked: supports_fine_metrics() is False")

        def supports_fine_metrics(self) -> bool:
            return False

    register_backend("taskvine-like", TaskVineLike, replace=True)
    manager: dict = {}
    proc = Counter()
    with MetricsCollector(
        backend="taskvine-like", backend_options={"manager": manager},
        processor_instance=proc, store=False, worker_tracking_interval=0.5,
    ) as c:  # fmt: skip
        assert proc.process(0, 4) == 6
    assert manager == {"started": 0.5}
    assert c.run.backend == "taskvine-like"
    assert c.tracking_data["taskvine_metrics"] is manager
    assert c.span_metrics == {} and "cpu_seconds" not in c.metrics
    assert [ch["num_events"] for ch in c.chunk_metrics] == [4]
    with pytest.raises(TypeError, match="backend_options"):
        MetricsCollector(backend="taskvine-like")


def test_seed_api_switch_fields_worker_counts_and_derived_metrics(client: Client) -> None:
    def seed_style(workflow_metrics: dict, worker_metrics: dict) -> dict:
        return {
            "custom_efficiency": workflow_metrics["total_events"] / worker_metrics["avg_workers"]
        }

    proc = Counter()
    assert not hasattr(proc, "_roastcoffea_collect_metrics")
    with MetricsCollector(
        client, processor_instance=proc, store=False, worker_tracking_interval=0.05,
        derived_metrics=[seed_style],
    ) as c:  # fmt: skip
        assert proc._roastcoffea_collect_metrics is True  # set on enter
        client.gather(client.map(proc.process, [0, 20], [10, 25]))
    assert proc._roastcoffea_collect_metrics is False  # cleared on exit
    m = c.metrics
    assert m["custom_efficiency"] == pytest.approx(15 / m["workers_avg"])
    chunks = c.chunk_metrics
    assert sorted(ch["num_events"] for ch in chunks) == [5, 10]
    assert all(ch["duration"] == ch["wall_s"] for ch in chunks)
    assert sorted(ch["custom_count"] for ch in chunks) == [5, 10]
    counts = c.tracking_data["worker_counts"]
    assert list(counts) == c.tracking_data["time"] and set(counts.values()) == {2}
    assert isinstance(c.span_metrics, dict) and c.span_metrics

    # switched off: the processor's chunks run as before and workers send nothing,
    # not even to a collector that would take them by span
    with MetricsCollector(client, name="bystander", store=False) as bystander:
        assert client.gather(client.map(proc.process, [0, 3], [2, 5])) == [1, 7]
    assert bystander.chunk_metrics == []
    # without any collector, the seed's custom-field code is harmless
    assert proc.process(0, 3) == 3


def test_post_exit_report_and_extraction_reach_the_store(tmp_path: Path) -> None:
    from daskscope.workflow import tracking

    @track_metrics
    def process(self: Any, events: list[int]) -> dict[str, Any]:
        return {"sum": sum(events)}

    url = f"sqlite:///{tmp_path / 'store.db'}"
    with MetricsCollector(database=url, worker_tracking_interval=None) as c:
        pass
    c.wait_stored()
    # a process-pool child of that run: its record rides in the output
    import os

    os.environ[tracking.COLLECTOR_ENV] = c.id
    try:
        out = process(None, [1, 2, 3])
    finally:
        os.environ.pop(tracking.COLLECTOR_ENV)
    c.extract_metrics_from_output(out)  # after the with block
    c.set_coffea_report({"entries": 3, "bytesread": 10, "chunks": 1, "processtime": 0.1})
    c.wait_stored()
    shown = CliRunner().invoke(cli, ["--database", url, "run", c.run.run_id, "--json"])
    detail = json.loads(shown.output)
    assert len(detail["chunks"]) == 1 and detail["run"]["chunk_count"] == 1
    assert figure_value(detail, "num_chunks_planned") == 1
    assert detail["coffea_report"]["entries"] == 3


def test_dask_chunks_under_a_collector_without_client_fail_loudly(client: Client) -> None:
    proc = Counter()
    with MetricsCollector(processor_instance=proc, store=False) as c:
        future = client.submit(proc.process, 0, 3)
        with pytest.raises(RuntimeError, match=r"without a Dask client.*MetricsCollector\(client"):
            future.result()
    assert c.chunk_metrics == []
