"""A Coffea user's toolbox (issue 29): ``track_bytes``, uproot's tree sizes, custom
metrics per dataset, ``track_workers=False``, every plot checked against the run it
draws, strict-JSON saved runs, and the two event rates that say which seconds they
divide by. Real coffea on ROOT files written here; ground truth from uproot (basket
sizes, entries), Dask (workers, memory limits, fine metrics) and the chunks."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("coffea")
uproot = pytest.importorskip("uproot")
ak = pytest.importorskip("awkward")
pytest.importorskip("matplotlib")

from distributed import Client, LocalCluster  # noqa: E402

from daskscope import MetricsCollector, track_bytes, track_metrics, track_time  # noqa: E402
from daskscope.workflow.persist import load_run  # noqa: E402
from test_workflow_coffea import ENTRIES, entries, runner, write_nanoaod  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore:Missing cross-reference:RuntimeWarning")

MEMORY_LIMIT = 2 * 2**30


@pytest.fixture(scope="module")
def fileset(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[str]]:
    root = tmp_path_factory.mktemp("nanoaod")
    paths = []
    for seed, (name, n) in enumerate(ENTRIES.items()):
        write_nanoaod(root / name, n, seed)
        paths.append(str(root / name))
    return {"ttbar": paths[:1], "wjets": paths[1:]}


@pytest.fixture(scope="module")
def client() -> Iterator[Client]:
    with (
        LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=True,
            dashboard_address=":0",
            memory_limit=MEMORY_LIMIT,
        ) as cluster,
        Client(cluster) as c,
    ):
        yield c


def make_processor() -> Any:
    from coffea import processor

    class ByteCounter(processor.ProcessorABC):
        @track_metrics
        def process(self, events: Any) -> dict[str, Any]:
            with track_bytes(self, events, "jet_pt"):
                jets = int(ak.sum(events.Jet.pt > 30))
            with track_bytes(self, events, "event_number"):
                total = int(ak.sum(events.event))
            with track_time(self, "count"):
                n = len(events)
            return {"events": n, "jets": jets, "event_sum": total}

        def postprocess(self, accumulator: Any) -> Any:
            return accumulator

    return ByteCounter()


def basket_bytes(path: str, branches: list[str], start: int, stop: int) -> int:
    """uproot's compressed bytes of every basket of ``branches`` that holds an entry of
    [start, stop): what reading those branches for that range must request."""
    total = 0
    with uproot.open(path) as f:
        tree = f["Events"]
        for name in branches:
            branch = tree[name]
            for i in range(branch.num_baskets):
                lo, hi = branch.basket_entry_start_stop(i)
                if lo < stop and hi > start:
                    total += branch.basket_compressed_bytes(i)
    return total


def tree_sizes(path: str) -> tuple[int, int]:
    with uproot.open(path) as f:
        tree = f["Events"]
        return int(tree.compressed_bytes), int(tree.uncompressed_bytes)


def check_bytes_and_sizes(collector: MetricsCollector, fileset: dict) -> None:
    chunks = [c for c in collector.run.chunks if c.ok]
    assert chunks
    for c in chunks:
        a, b = c.entry_start, c.entry_stop
        jet = basket_bytes(c.filename, ["nJet", "Jet_pt"], a, b)
        event = basket_bytes(c.filename, ["event"], a, b)
        # bytes read inside each section = the baskets of the branches it read
        assert c.sections["jet_pt"]["bytes_read"] == jet > 0
        assert c.sections["event_number"]["bytes_read"] == event > 0
        assert c.sections["jet_pt"]["kind"] == "bytes"
        # and nothing the chunk did not read is counted
        assert jet + event <= c.bytes_read
        assert (c.tree_compressed_bytes, c.tree_uncompressed_bytes) == tree_sizes(c.filename)
    sections = collector.sections
    in_chunks = sum(c.sections["jet_pt"]["bytes_read"] for c in chunks)
    assert sections["jet_pt"]["bytes_read"] == in_chunks
    assert sections["jet_pt"]["count"] == len(chunks)
    # the run: each file once, uproot's own totals
    sizes = [tree_sizes(p) for paths in fileset.values() for p in paths]
    m = collector.metrics
    assert m["input_compressed_bytes"] == sum(c for c, _ in sizes)
    assert m["input_uncompressed_bytes"] == sum(u for _, u in sizes)
    assert m["compression_ratio"] == pytest.approx(
        sum(u for _, u in sizes) / sum(c for c, _ in sizes)
    )
    for name, paths in fileset.items():
        mine = [tree_sizes(p) for p in paths]
        figures = collector.run.info["datasets"][name]
        assert figures["input_compressed_bytes"] == sum(c for c, _ in mine)
        assert figures["input_uncompressed_bytes"] == sum(u for _, u in mine)
        assert figures["total_events"] == sum(entries(p) for p in paths)


def test_track_bytes_and_uproot_tree_sizes_local(fileset: dict) -> None:
    from coffea import processor

    proc = make_processor()
    with MetricsCollector(processor_instance=proc, store=False) as collector:
        runner(processor.IterativeExecutor())(fileset, proc, treename="Events")
    check_bytes_and_sizes(collector, fileset)


def test_track_bytes_outside_a_chunk_or_without_uproot_does_nothing() -> None:
    class Plain:
        @track_metrics
        def process(self, events: Any) -> int:
            with track_bytes(self, events, "nothing"):
                return len(events)

    # no collector: measured nothing; a plain list has no file handle: no section
    assert Plain().process([1, 2, 3]) == 3
    proc = Plain()
    with MetricsCollector(processor_instance=proc, store=False) as collector:
        proc.process([1, 2])
    assert collector.run.chunks[0].sections == {}
    assert "input_compressed_bytes" not in collector.metrics  # absent, never 0


def test_custom_metrics_per_dataset_and_track_workers_off(fileset: dict, tmp_path: Path) -> None:
    from coffea import processor

    from daskscope.views.run import run_view

    proc = make_processor()
    with MetricsCollector(processor_instance=proc, store=False, track_workers=False) as collector:
        _, report = runner(processor.IterativeExecutor())(fileset, proc, treename="Events")
        # roastcoffea's shape, nested mappings included
        collector.set_coffea_report(
            report,
            custom_metrics={
                "ttbar": {"cutflow_passed": 812, "performance_counters": {"num_requests": 3}},
                "signal": {"cutflow_passed": 5},
            },
        )
    assert collector.worker_tracking_interval is None
    assert collector.run.tracking_data == {}
    per = collector.run.info["datasets"]
    assert per["ttbar"]["cutflow_passed"] == 812
    assert per["ttbar"]["performance_counters.num_requests"] == 3
    assert per["ttbar"]["total_events"] == ENTRIES["a.root"]  # measured ones stay
    assert per["signal"] == {"cutflow_passed": 5}
    assert "cutflow_passed" not in per["wjets"]
    view = run_view(collector.run)
    shown = {d.name: {f.key: f.value for f in d.figures} for d in view.datasets}
    assert shown["ttbar"]["cutflow_passed"] == 812 and shown["wjets"]["cutflow_passed"] is None
    # worker tracking off: the figures say so, the plots too
    assert view.figure("workers_avg").why == "worker tracking off"
    assert collector.plot("workers").daskscope_missing
    # saved and loaded, the custom figures come back
    collector.save(tmp_path / "run")
    again = MetricsCollector.load(tmp_path / "run")
    assert again.run.info["datasets"]["signal"] == {"cutflow_passed": 5}
    # a name daskscope measures itself is refused, saying what to do
    with pytest.raises(ValueError, match=r"rename them, e\.g\. 'my_total_events'"):
        collector.set_custom_metrics({"ttbar": {"total_events": 1}})
    with pytest.raises(TypeError, match="map each dataset name"):
        collector.set_custom_metrics({"ttbar": 3})


def _bar_heights(ax: Any, index: int = 0) -> list[float]:
    return [patch.get_height() for patch in ax.containers[index]]


def _bar_widths(ax: Any, index: int = 0) -> list[float]:
    return [patch.get_width() for patch in ax.containers[index]]


def _ys(line: Any) -> list[Any]:
    return [None if y != y else float(y) for y in line.get_ydata()]  # NaN: a gap


def _gaps(values: list[Any]) -> list[Any]:
    return [None if v is None else float(v) for v in values]


def test_every_plot_draws_the_runs_data(client: Client, fileset: dict, tmp_path: Path) -> None:
    """Each of the plots, rendered and saved with ``save_plots(output_path)``; what
    each draws equals the run's figures, and those equal Dask's, uproot's, coffea's."""
    import matplotlib.pyplot as plt
    from coffea import processor

    proc = make_processor()
    run = runner(processor.DaskExecutor(client=client, status=False))
    with MetricsCollector(
        client, processor_instance=proc, worker_tracking_interval=0.05, store=False
    ) as collector:
        _, report = run(fileset, proc, treename="Events")
        collector.set_coffea_report(report)
    check_bytes_and_sizes(collector, fileset)
    r = collector.run
    m = collector.metrics
    data = r.tracking_data
    chunks = [c for c in r.chunks if c.ok]
    t = [x - r.started_at for x in data["time"]]
    dask_workers = client.scheduler_info()["workers"]

    saved = collector.save_plots(tmp_path / "plots")
    from daskscope.plots import PLOTS

    assert set(saved) == set(PLOTS) and len(PLOTS) == 18
    for kind, path in saved.items():
        assert path.stat().st_size > 5000  # a drawn PNG, not an empty canvas
        shutil.copy(path, f"/tmp/coffea-{kind}.png")  # to look at

    def fig(kind: str) -> Any:
        figure = collector.plot(kind)
        assert not hasattr(figure, "daskscope_missing"), (kind, figure.daskscope_missing)
        return figure.axes[0]

    # time series from the scheduler-side samples
    ax = fig("workers")
    assert list(ax.lines[0].get_xdata()) == pytest.approx(t)
    assert _ys(ax.lines[0]) == _gaps(data["workers"])
    assert set(data["workers"]) == {len(dask_workers)}
    ax = fig("occupancy")
    assert _ys(ax.lines[0]) == pytest.approx(data["occupancy_s"])
    ax = fig("active_tasks")
    assert _ys(ax.lines[0]) == _gaps(data["active_tasks"])
    assert _ys(ax.lines[1]) == _gaps(data["processing_tasks"])
    assert max(data["active_tasks"]) <= sum(w["nthreads"] for w in dask_workers.values())
    ax = fig("executing_per_worker")
    per = data["per_worker"]
    assert {line.get_label() for line in ax.lines} == set(per) == set(dask_workers)
    for line in ax.lines:
        assert _ys(line) == _gaps(per[line.get_label()]["active_tasks"])
    ax = fig("cpu_per_worker")
    for line in ax.lines:
        assert _ys(line) == _gaps(per[line.get_label()]["cpu_percent"])
    ax = fig("memory_share")
    for line in ax.lines:
        w = per[line.get_label()]
        # the limit is Dask's own, the share the sampled RSS over it
        assert (
            {v for v in w["memory_limit_bytes"] if v is not None}
            == {dask_workers[line.get_label()]["memory_limit"]}
            == {MEMORY_LIMIT}
        )
        truth = [None if v is None else 100 * v / MEMORY_LIMIT for v in w["memory_bytes"]]
        assert _ys(line) == pytest.approx(truth)
    ax = fig("memory")
    assert {line.get_label() for line in ax.lines} == set(per)
    ax = fig("cpu")
    assert _ys(ax.lines[0]) == _gaps(data["cpu_percent"])

    # per chunk, from the chunk records (events, bytes: uproot's; coffea sums the same)
    ax = fig("chunk_cpu_vs_noncpu")
    assert _bar_heights(ax, 0) == pytest.approx([c.cpu_s for c in chunks])
    assert _bar_heights(ax, 1) == pytest.approx([c.wall_s - c.cpu_s for c in chunks])
    ax = fig("bytes_per_chunk")
    heights = [h * 2**20 for h in _bar_heights(ax)]
    assert heights == pytest.approx([c.bytes_read for c in chunks])
    assert sum(heights) == pytest.approx(report["bytesread"])
    ax = fig("chunk_durations")
    assert sum(_bar_heights(ax)) == len(r.chunks)
    ax = fig("duration_vs_events")
    assert sorted(p[0] for p in ax.collections[0].get_offsets()) == sorted(c.events for c in chunks)
    ax = fig("throughput")
    widths = _bar_widths(ax)
    assert sum(h * w * 1e3 for h, w in zip(_bar_heights(ax), widths, strict=True)) == (
        pytest.approx(sum(ENTRIES.values()))
    )
    ax = fig("compression")
    labels = [tick.get_text() for tick in ax.get_yticklabels()]
    truth = {Path(p).name: tree_sizes(p) for paths in fileset.values() for p in paths}
    assert labels == sorted(truth)
    assert _bar_widths(ax) == pytest.approx([truth[n][1] / truth[n][0] for n in labels])

    # per task prefix, from the span's fine metrics
    span = r.span_metrics
    ax = fig("cpu_vs_noncpu")
    names = [tick.get_text() for tick in ax.get_yticklabels()]
    cpu = {n: 0.0 for n in names}
    for (context, prefix, activity, unit), v in span.items():
        if context == "execute" and activity == "thread-cpu" and unit == "seconds":
            cpu[prefix] += v
    assert _bar_widths(ax, 0) == pytest.approx([cpu[n] for n in names])
    assert sum(cpu.values()) == pytest.approx(m["cpu_seconds"])
    overhead = collector.plot("overhead_by_prefix")
    if hasattr(overhead, "daskscope_missing"):
        assert not any(m[f"{a}_seconds"] for a in ("serialize", "deserialize", "compress",
                                                   "decompress"))  # fmt: skip
    else:
        ax = overhead.axes[0]
        for i, activity in enumerate(("serialize", "deserialize", "compress", "decompress")):
            assert sum(_bar_widths(ax, i)) == pytest.approx(m[f"{activity}_seconds"])

    # the summaries: the run's own figures
    axes = collector.plot("efficiency").axes
    assert _bar_heights(axes[0]) == pytest.approx([m["speedup"], m["cores"]])
    assert _bar_heights(axes[1]) == pytest.approx(
        [100 * m["parallel_efficiency"], m["cpu_percent"]]
    )
    assert m["parallel_efficiency"] == pytest.approx(m["speedup"] / m["cores"])
    assert m["speedup"] == pytest.approx(sum(c.wall_s for c in chunks) / m["wall_time_s"])
    axes = collector.plot("resources").axes
    assert _bar_heights(axes[0]) == pytest.approx([m["cores"], m["workers_avg"], m["workers_peak"]])
    assert _bar_heights(axes[1]) == pytest.approx(
        [m["memory_avg_bytes"] / 2**30, m["memory_peak_bytes"] / 2**30]
    )
    # Σ worker RSS: its peak is at least the highest sample of the workers summed
    sums = [sum(w["memory_bytes"][i] or 0 for w in per.values()) for i in range(len(t))]
    assert m["memory_peak_bytes"] == max(sums)
    assert m["cores"] == sum(w["nthreads"] for w in dask_workers.values())
    plt.close("all")

    # both event rates, each against its own ground truth
    events = sum(entries(p) for paths in fileset.values() for p in paths)
    thread_cpu = sum(v for k, v in span.items() if k[0] == "execute" and k[2] == "thread-cpu")
    chunk_wall = sum(c.wall_s for c in chunks)
    assert m["event_rate_per_cpu_second_khz"] == pytest.approx(events / thread_cpu / 1e3)
    assert m["event_rate_per_chunk_second_khz"] == pytest.approx(events / chunk_wall / 1e3)
    assert "event_rate_aggregated_khz" not in m and "event_rate_per_busy_second_khz" not in m
    # one plot to a file of its own
    one = tmp_path / "single" / "occupancy.png"
    collector.plot("occupancy", output_path=one)
    assert one.stat().st_size > 5000
    with pytest.raises(KeyError, match="the plots are"):
        collector.plot("nope")


def _strict(text: str) -> Any:
    def refuse(token: str) -> Any:
        raise ValueError(f"not strict JSON: {token}")

    return json.loads(text, parse_constant=refuse)


def test_saved_runs_are_strict_json_and_old_keys_read_under_new_names(
    fileset: dict, tmp_path: Path
) -> None:
    from coffea import processor
    from rich.console import Console

    from daskscope.workflow import current_chunk

    class Odd:
        @track_metrics
        def process(self, events: Any) -> int:
            current_chunk().set("ratio", float("nan"))
            current_chunk().set("limit", float("inf"))
            current_chunk().report_events(len(events))
            return len(events)

    proc = Odd()
    with MetricsCollector(processor_instance=proc, store=False) as collector:
        proc.process([1, 2, 3])
        collector.set_custom_metrics({"d": {"weight": float("nan")}})
    path = collector.save(tmp_path / "odd")
    data = _strict(path.read_text())  # no NaN / Infinity token anywhere
    chunk = data["chunk_metrics"][0]
    assert chunk["fields"] == {"ratio": None, "limit": None}
    assert data["info"]["custom_metrics"] == {"d": {"weight": None}}
    # not measured: absent from the metrics, null where a slot exists
    assert "bytes_read" not in data["metrics"] and chunk["bytes_read"] is None

    # a run saved before the rates were renamed reads under today's names
    proc2 = make_processor()
    with MetricsCollector(processor_instance=proc2, store=False) as real:
        runner(processor.IterativeExecutor())(fileset, proc2, treename="Events")
    saved = _strict(real.save(tmp_path / "new").read_text())
    assert saved["metrics"]["event_rate_per_chunk_second_khz"] > 0
    old = dict(saved)
    old["metrics"] = {
        ("event_rate_per_busy_second_khz" if k == "event_rate_per_chunk_second_khz" else k): v
        for k, v in saved["metrics"].items()
    }
    old["info"] = {**saved["info"], "datasets": {
        n: {("data_rate_per_busy_second_gbps" if k == "data_rate_per_chunk_second_gbps" else k): v
            for k, v in f.items()}
        for n, f in saved["info"]["datasets"].items()}}  # fmt: skip
    (tmp_path / "old.json").write_text(json.dumps(old))
    loaded = load_run(tmp_path / "old.json")
    assert loaded.metrics == real.run.metrics
    assert loaded.info["datasets"] == real.run.info["datasets"]
    # the summary says which rate is which, where a roastcoffea user compares
    console = Console(record=True, width=200)
    MetricsCollector.load(tmp_path / "old").print_summary(console=console)
    text = console.export_text()
    assert "event rate (per CPU-second)" in text and "event rate (per chunk-second)" in text
    assert "roastcoffea" in text and "event_rate_cpu_total_khz" in text


def randoms(n: int) -> Any:
    import numpy as np

    return np.random.default_rng(0).random(n)


def _spill_seconds(worker: Any, stem: str) -> float:
    """The worker's own figure: the seconds it digested for `stem` inside its tasks."""
    return sum(
        v for k, v in worker.digests_total.items()
        if isinstance(k, tuple) and k[0] == "execute" and k[-2:] == (stem, "seconds")
    )  # fmt: skip


def test_overhead_plot_draws_the_spans_serialization() -> None:
    """A worker told to spill everything (de)serializes and (de)compresses what it keeps
    inside its tasks' span: the overhead plot draws those seconds per prefix, summing to
    the run's figures, which are the worker's own (Dask's fine metrics); the bytes
    spilled are the array's."""
    import gc
    import time

    import dask
    import numpy as np
    from distributed import wait

    from daskscope.plots import overhead_by_prefix

    spill_all = {"distributed.worker.memory.target": 1e-6, "distributed.worker.memory.spill": False}
    with (
        dask.config.set(spill_all),
        LocalCluster(
            n_workers=1, threads_per_worker=1, processes=False, memory_limit="1GiB",
            dashboard_address=":0",
        ) as cluster,
        Client(cluster) as spilling,
        MetricsCollector(spilling, store=False, worker_tracking_interval=None) as collector,
    ):  # fmt: skip
        (worker,) = cluster.workers.values()
        big = spilling.submit(randoms, 1_000_000, pure=False)
        wait(big)
        # Dask reads a spilled value back from disk only when no one on the worker still
        # holds it (its spill buffer keeps a weak reference); a `sum` queued while the
        # array was still referenced read it from memory and deserialized nothing (CI
        # saw it, and 7 runs of 25 beside four busy loops). So wait until it is gone.
        deadline = time.monotonic() + 300
        while len(worker.data.slow.cache) and time.monotonic() < deadline:
            gc.collect()
            time.sleep(0.05)
        assert big.key not in worker.data.fast and not len(worker.data.slow.cache)
        total = spilling.submit(np.sum, big, pure=False).result()
        assert total == pytest.approx(np.sum(randoms(1_000_000)))
    m = collector.metrics
    # random doubles do not compress: what went to disk is at least the array
    assert m["spill_write_bytes"] >= randoms(1_000_000).nbytes
    stems = ("serialize", "deserialize", "compress", "decompress")
    for stem in stems:  # the run's figures are the worker's, to the last digit
        assert m[f"{stem}_seconds"] == pytest.approx(_spill_seconds(worker, stem))
    assert m["serialize_seconds"] > 0 and m["deserialize_seconds"] > 0
    figure = overhead_by_prefix(collector.run)
    assert not hasattr(figure, "daskscope_missing")
    ax = figure.axes[0]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["randoms", "sum"]
    for i, stem in enumerate(stems):
        assert sum(_bar_widths(ax, i)) == pytest.approx(m[f"{stem}_seconds"])
    figure.savefig("/tmp/coffea-overhead_by_prefix-spill.png")
