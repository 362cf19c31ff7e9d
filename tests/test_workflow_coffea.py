"""A real coffea processor on NanoAOD-like ROOT files written here, checked against
ground truth: entries written, uproot's byte counts, chunk tiling, chunk sums."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("coffea")
uproot = pytest.importorskip("uproot")
ak = pytest.importorskip("awkward")
np = pytest.importorskip("numpy")

from distributed import Client, LocalCluster  # noqa: E402

from daskscope import MetricsCollector, track_memory, track_metrics, track_time  # noqa: E402

# NanoAODSchema warns about cross-references our small files do not have
pytestmark = pytest.mark.filterwarnings("ignore:Missing cross-reference:RuntimeWarning")

ENTRIES = {"a.root": 1300, "b.root": 700}
CHUNKSIZE = 400


def write_nanoaod(path: Path, n: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    counts = rng.integers(0, 5, n)
    total = int(counts.sum())

    def jets(sl: slice) -> Any:
        c = counts[sl]
        lo, hi = int(counts[: sl.start].sum()), int(counts[: sl.stop].sum())
        fields = {k: rng_values[k][lo:hi] for k in rng_values}
        return ak.zip({k: ak.unflatten(v, c) for k, v in fields.items()})

    rng_values = {
        "pt": rng.exponential(30, total).astype("f4"),
        "eta": rng.normal(0, 2, total).astype("f4"),
        "phi": rng.uniform(-3, 3, total).astype("f4"),
        "mass": rng.uniform(0, 10, total).astype("f4"),
    }
    with uproot.recreate(path) as f:
        f.mktree(
            "Events",
            {"run": "u4", "luminosityBlock": "u4", "event": "u8", "Jet": jets(slice(0, 1)).type},
            field_name=lambda o, i: i if o == "" else f"{o}_{i}",
            counter_name=lambda c: "n" + c,
        )
        for start in range(0, n, 250):  # several baskets per file
            sl = slice(start, min(n, start + 250))
            size = sl.stop - sl.start
            f["Events"].extend(
                {
                    "run": np.ones(size, "u4"),
                    "luminosityBlock": np.ones(size, "u4"),
                    "event": np.arange(sl.start, sl.stop, dtype="u8"),
                    "Jet": jets(sl),
                }
            )


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
    # One process cluster for the module: a new one costs 5-9 s
    with (
        LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0"
        ) as cluster,
        Client(cluster) as c,
    ):
        yield c


def make_processor() -> Any:
    from coffea import processor

    class JetCounter(processor.ProcessorABC):
        @track_metrics
        def process(self, events: Any) -> dict[str, Any]:
            with track_time(self, "jet_selection"):
                jets = events.Jet[events.Jet.pt > 30]
            with track_memory(self, "histograms"):
                njets = int(ak.sum(ak.num(jets)))
            return {"events": len(events), "jets": njets}

        def postprocess(self, accumulator: Any) -> Any:
            return accumulator

    return JetCounter()


def runner(executor: Any) -> Any:
    from coffea import processor
    from coffea.nanoevents import NanoAODSchema

    return processor.Runner(
        executor=executor, schema=NanoAODSchema, chunksize=CHUNKSIZE, savemetrics=True
    )


def truth_jets(fileset: dict[str, list[str]]) -> int:
    total = 0
    for paths in fileset.values():
        for path in paths:
            pt = uproot.open(path)["Events"]["Jet_pt"].array()
            total += int(ak.sum(pt > 30))
    return total


def check_against_ground_truth(
    collector: MetricsCollector, out: dict, report: dict, fileset: dict
) -> None:
    total = sum(ENTRIES.values())
    chunks = collector.chunk_metrics
    m = collector.metrics
    # events equal the entries written, everywhere
    assert out == {"events": total, "jets": truth_jets(fileset)}  # output unchanged
    assert m["total_events"] == total == sum(c["events"] for c in chunks)
    # entry ranges tile every file exactly
    by_file: dict[str, list[tuple[int, int]]] = {}
    for c in chunks:
        assert c["events"] == c["entry_stop"] - c["entry_start"]
        by_file.setdefault(Path(c["filename"]).name, []).append((c["entry_start"], c["entry_stop"]))
    assert set(by_file) == set(ENTRIES)
    for name, ranges in by_file.items():
        ranges.sort()
        assert ranges[0][0] == 0 and ranges[-1][1] == ENTRIES[name]
        assert all(a[1] == b[0] for a, b in itertools.pairwise(ranges))
    datasets = {c["dataset"] for c in chunks}
    assert datasets == set(fileset)
    # bytes: uproot's own count of requested bytes, per chunk handle, summed by coffea
    assert all(c["bytes_read"] > 0 for c in chunks)
    assert m["bytes_read"] == report["bytesread"] == sum(c["bytes_read"] for c in chunks)
    assert m["num_chunks"] == report["chunks"] == len(chunks)
    assert m["processing_time_s"] == pytest.approx(sum(c["wall_s"] for c in chunks))
    assert m["data_rate_gbps"] == pytest.approx(m["bytes_read"] * 8 / m["wall_time_s"] / 1e9)
    sections = collector.sections
    assert sections["jet_selection"]["count"] == len(chunks)
    assert sections["histograms"]["kind"] == "memory"
    for c in chunks:
        assert c["started_at"] <= c["stopped_at"] and c["memory_peak_bytes"] > 0


def test_dask_executor(client: Client, fileset: dict, tmp_path: Path) -> None:
    from coffea import processor

    proc = make_processor()
    run = runner(processor.DaskExecutor(client=client, status=False))
    with MetricsCollector(
        client,
        processor_instance=proc,
        worker_tracking_interval=0.1,
        database=f"sqlite:///{tmp_path / 'store.db'}",
    ) as collector:
        out, report = run(fileset, proc, treename="Events")
        collector.set_coffea_report(report)
    check_against_ground_truth(collector, out, report, fileset)
    m = collector.metrics
    assert {c["task_prefix"] for c in collector.chunk_metrics} == {"JetCounter"}
    assert m["processor_cpu_seconds"] > 0 and "overhead_seconds" in m
    assert m["cpu_seconds"] == pytest.approx(m["processor_cpu_seconds"] + m["overhead_cpu_seconds"])
    assert m["cores"] == 2 and m["workers_peak"] == 2
    # the spec's aggregated rate: events per thread-CPU second of the span (Dask's own)
    span = collector.span_metrics
    cpu = sum(v for k, v in span.items() if k[0] == "execute" and k[2] == "thread-cpu")
    assert m["event_rate_aggregated_khz"] == pytest.approx(m["total_events"] / cpu / 1e3)
    assert m["event_rate_per_busy_second_khz"] == pytest.approx(
        m["total_events"] / m["processing_time_s"] / 1e3
    )
    # every activity Dask reported is there, summed over contexts and prefixes
    truth: dict[str, float] = {}
    for (_, _, activity, unit), value in span.items():
        if activity != "idle or other spans":
            key = "activity_" + "".join(ch if ch.isalnum() else "_" for ch in f"{activity}_{unit}")
            truth[key] = truth.get(key, 0.0) + value
    assert "activity_memory_read_bytes" in truth  # the reducers read their inputs
    assert {k: m[k] for k in truth} == pytest.approx(truth)
    # the seed's names
    assert all(c["duration"] == c["wall_s"] and c["num_events"] == c["events"]
               for c in collector.chunk_metrics)  # fmt: skip
    counts = collector.tracking_data["worker_counts"]
    assert counts and set(counts.values()) == {2} and all(t > 1.6e9 for t in counts)
    assert proc._roastcoffea_collect_metrics is False  # cleared on exit
    assert m["status"] == "ok"
    # lossless save/load of a real run
    collector.save(tmp_path / "ttbar")
    assert MetricsCollector.load(tmp_path / "ttbar").run == collector.run
    assert collector.wait_stored() == collector.run.run_id


def test_iterative_executor_local_backend(fileset: dict) -> None:
    from coffea import processor

    proc = make_processor()
    run = runner(processor.IterativeExecutor())
    with MetricsCollector(processor_instance=proc, store=False) as collector:
        out, report = run(fileset, proc, treename="Events")
    # no set_coffea_report: every number comes from the chunks themselves
    assert collector.run.backend == "local"
    check_against_ground_truth(collector, out, report, fileset)
    assert "noncpu_seconds" not in collector.metrics
    assert collector.metrics["cores"] == 1  # every chunk ran in this process


def test_futures_executor_with_a_pool_made_before_the_collector(fileset: dict) -> None:
    from concurrent.futures import ProcessPoolExecutor

    from coffea import processor

    from daskscope.workflow.tracking import INJECT_KEY

    proc = make_processor()
    with ProcessPoolExecutor(max_workers=2) as pool:
        pool.submit(int, 0).result()  # the pool's processes exist before the collector
        executor = processor.FuturesExecutor(pool=pool, workers=2, status=False)
        run = runner(executor)
        with MetricsCollector(processor_instance=proc, executor=executor, store=False) as c:
            out, report = run(fileset, proc, treename="Events")
        pids = {p.pid for p in pool._processes.values()}
    # no extraction call, and nothing of daskscope in the output
    assert INJECT_KEY not in out
    check_against_ground_truth(c, out, report, fileset)
    assert {ch["pid"] for ch in c.chunk_metrics} <= pids
    m = c.metrics
    assert m["cores"] == 2  # the executor's workers, not a default of 1
    per_core = m["total_events"] / (m["wall_time_s"] * 2) / 1e3
    assert m["event_rate_core_khz"] == pytest.approx(per_core)


def test_futures_executor_without_cores_leaves_them_unmeasured(fileset: dict) -> None:
    from coffea import processor

    proc = make_processor()
    run = runner(processor.FuturesExecutor(workers=2, status=False))
    with MetricsCollector(processor_instance=proc, store=False) as c:
        out, report = run(fileset, proc, treename="Events")
    check_against_ground_truth(c, out, report, fileset)
    assert "cores" not in c.metrics and "event_rate_core_khz" not in c.metrics
    assert "executor=" in c.run.info["cores_note"]
