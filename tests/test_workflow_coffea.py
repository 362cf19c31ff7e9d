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


def make_processor(fail: Any = None, log: Path | None = None) -> Any:
    """``fail(events)`` returns an exception to raise for that chunk, or None; ``log``
    gets a line "file start" per chunk that returned: ground truth of what a run
    actually processed, kept by the user's code, not by daskscope."""
    from coffea import processor

    class JetCounter(processor.ProcessorABC):
        def __init__(self) -> None:
            self.fail = fail
            self.log = log

        @track_metrics
        def process(self, events: Any) -> dict[str, Any]:
            error = self.fail(events) if self.fail is not None else None
            if error is not None:
                raise error
            with track_time(self, "jet_selection"):
                jets = events.Jet[events.Jet.pt > 30]
            with track_memory(self, "histograms"):
                njets = int(ak.sum(ak.num(jets)))
            if self.log is not None:
                meta = events.metadata
                with open(self.log, "a") as f:
                    f.write(f"{Path(meta['filename']).name} {meta['entrystart']}\n")
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


def entries(path: str) -> int:
    """uproot's count of the entries in a file's tree."""
    with uproot.open(path) as f:
        return int(f["Events"].num_entries)


def check_against_ground_truth(
    collector: MetricsCollector, out: dict, report: dict, fileset: dict
) -> None:
    total = sum(ENTRIES.values())
    chunks = [c for c in collector.chunk_metrics if c["status"] == "ok"]
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
    # per dataset: events equal the entries uproot counts in that dataset's files
    per = collector.run.info["datasets"]
    assert set(per) == set(fileset)
    for name, paths in fileset.items():
        assert per[name]["total_events"] == sum(entries(path) for path in paths)
        mine = [c for c in chunks if c["dataset"] == name]
        assert per[name]["num_chunks"] == len(mine)
        assert per[name]["bytes_read"] == sum(c["bytes_read"] for c in mine)
    assert sum(d["bytes_read"] for d in per.values()) == m["bytes_read"]
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
    assert m["event_rate_per_cpu_second_khz"] == pytest.approx(m["total_events"] / cpu / 1e3)
    assert m["event_rate_per_chunk_second_khz"] == pytest.approx(
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


def coffea_report_of(fileset: dict) -> dict[str, Any]:
    """coffea's own report (uproot's counts, summed by coffea) of a run over ``fileset``
    without any collector: the truth of one dataset when given that dataset alone."""
    from coffea import processor

    proc = make_processor()
    _, report = runner(processor.IterativeExecutor())(fileset, proc, treename="Events")
    return report


def test_per_dataset_figures_equal_uproots_counts(
    client: Client, fileset: dict, tmp_path: Path
) -> None:
    import json

    from click.testing import CliRunner
    from coffea import processor

    from daskscope.cli.main import cli
    from daskscope.store import open_store
    from daskscope.views.run import run_view, stored_run_view

    url = f"sqlite:///{tmp_path / 'store.db'}"
    proc = make_processor()
    run = runner(processor.DaskExecutor(client=client, status=False))
    with MetricsCollector(client, processor_instance=proc, database=url) as collector:
        out, report = run(fileset, proc, treename="Events")
    check_against_ground_truth(collector, out, report, fileset)
    run_id = collector.wait_stored()
    per = collector.run.info["datasets"]
    chunks = collector.chunk_metrics
    for name, paths in fileset.items():
        truth = coffea_report_of({name: paths})  # this dataset alone, no daskscope
        figures = per[name]
        assert figures["total_events"] == truth["entries"] == sum(entries(p) for p in paths)
        assert figures["bytes_read"] == truth["bytesread"]
        assert figures["num_chunks"] == truth["chunks"] and figures["num_failed_attempts"] == 0
        mine = [c for c in chunks if c["dataset"] == name]
        busy = sum(c["wall_s"] for c in mine)
        assert figures["processing_time_s"] == pytest.approx(busy)
        assert figures["chunk_cpu_seconds"] == pytest.approx(sum(c["cpu_s"] for c in mine))
        assert figures["event_rate_per_chunk_second_khz"] == pytest.approx(
            truth["entries"] / busy / 1e3
        )
        assert figures["data_rate_per_chunk_second_gbps"] == pytest.approx(
            truth["bytesread"] * 8 / busy / 1e9
        )

    # the run's view (live and stored), `daskscope run` and the page show them
    live = run_view(collector.run)
    with open_store(url) as store:
        assert stored_run_view(store, run_id) == live
    assert [d.name for d in live.datasets] == sorted(fileset) and live.datasets_why is None
    shown = {d.name: {f.key: f.value for f in d.figures} for d in live.datasets}
    assert shown == {name: {k: v for k, v in per[name].items()} for name in per}
    runner_ = CliRunner()
    answer = runner_.invoke(cli, ["--database", url, "run", run_id, "--json"])
    assert answer.exit_code == 0, answer.output
    as_json = {d["name"]: {f["key"]: f["value"] for f in d["figures"]}
               for d in json.loads(answer.output)["datasets"]}  # fmt: skip
    assert as_json == shown
    text = runner_.invoke(cli, ["--database", url, "run", run_id]).output
    assert "Datasets" in text and "ttbar" in text and "wjets" in text
    events = {d.name: next(f for f in d.figures if f.key == "total_events") for d in live.datasets}
    assert events["ttbar"].text in text and events["wjets"].text in text

    pytest.importorskip("fastapi")
    from daskscope.web import create_app
    from webutil import call

    app = create_app(url)
    try:
        page = call(app, "GET", f"/runs/{run_id}").text
        api = call(app, "GET", f"/api/v1/runs/{run_id}").json()
    finally:
        app.state.store.close()
    assert api["datasets"] == json.loads(answer.output)["datasets"]
    for name in fileset:
        assert f'data-dataset="{name}"' in page
        assert f">{events[name].text}<" in page


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


def in_file(name: str, start: int | None = None, error: Any = ValueError) -> Any:
    def fail(events: Any) -> Any:
        meta = events.metadata
        if Path(meta["filename"]).name == name and start in (None, meta["entrystart"]):
            return error(f"bad chunk of {name} at {meta['entrystart']}")
        return None

    return fail


def test_a_failed_run_then_a_new_run_as_in_a_notebook(
    client: Client, fileset: dict, tmp_path: Path
) -> None:
    import json

    from click.testing import CliRunner
    from coffea import processor

    from daskscope.cli.main import cli

    url = f"sqlite:///{tmp_path / 'store.db'}"
    bad = make_processor(in_file("b.root"))
    run = runner(processor.DaskExecutor(client=client, status=False, retries=0))
    with (
        pytest.raises(Exception, match=r"bad chunk of b\.root") as failed,
        MetricsCollector(client, processor_instance=bad, database=url) as first,
    ):
        run(fileset, bad, treename="Events")
    m = first.metrics
    assert m["status"] == "failed" and "bad chunk of b.root" in m["error"]
    broken = [c for c in first.chunk_metrics if c["status"] == "failed"]
    assert broken and all(Path(c["filename"]).name == "b.root" for c in broken)
    assert all(c["error_type"] == "ValueError" and "bad chunk" in c["error"] for c in broken)
    assert m["num_failed_attempts"] == len(broken)
    done = [c for c in first.chunk_metrics if c["status"] == "ok"]
    assert m["num_chunks"] == len(done) and m["total_events"] == sum(c["events"] for c in done)
    # the failed run is in the store and says so on its page and in the CLI
    first.wait_stored()
    shown = CliRunner().invoke(cli, ["--database", url, "run", first.run.run_id, "--json"])
    stored = json.loads(shown.output)["run"]
    assert stored["status"] == "failed" and "bad chunk of b.root" in stored["error"]
    text = CliRunner().invoke(cli, ["--database", url, "run", first.run.run_id]).output
    assert "failed" in text

    # `failed` still holds the exception (and its frames), as a notebook would
    assert failed.value is not None
    proc = make_processor()
    good = runner(processor.DaskExecutor(client=client, status=False))
    with MetricsCollector(client, processor_instance=proc, store=False) as second:
        out, report = good(fileset, proc, treename="Events")
    check_against_ground_truth(second, out, report, fileset)
    assert second.metrics["status"] == "ok" and "num_failed_attempts" not in {
        k for k, v in second.metrics.items() if v
    }
    # distributed puts the new tasks on the failed run's span (their task group is still
    # alive): the growth of that span during this run is this run's
    assert second.run.info["span_borrowed_from"] == [first.run.info["span_id"]]
    assert second.metrics["processor_cpu_seconds"] > 0
    assert second.metrics["cpu_seconds"] > second.metrics["processor_cpu_seconds"]


def test_a_retried_chunk_records_both_attempts(
    client: Client, fileset: dict, tmp_path: Path
) -> None:
    from coffea import processor

    marker = tmp_path / "failed-once"

    def flaky(events: Any) -> Any:
        meta = events.metadata
        first = Path(meta["filename"]).name == "a.root" and meta["entrystart"] == 0
        if first and not marker.exists():
            marker.touch()
            return OSError("flaky read")
        return None

    proc = make_processor(flaky)
    run = runner(processor.DaskExecutor(client=client, status=False, retries=1))
    with MetricsCollector(client, processor_instance=proc, store=False) as collector:
        out, report = run(fileset, proc, treename="Events")
    check_against_ground_truth(collector, out, report, fileset)
    m = collector.metrics
    assert marker.exists()  # ground truth: exactly one attempt failed
    assert m["num_failed_attempts"] == 1 and m["num_chunks_retried"] == 1
    assert m["num_chunks_failed"] == 0
    assert m["num_chunk_attempts"] == report["chunks"] + 1
    first = [c for c in collector.chunk_metrics if c["entry_start"] == 0
             and Path(c["filename"]).name == "a.root"]  # fmt: skip
    assert [(c["attempt"], c["status"]) for c in first] == [(1, "failed"), (2, "ok")]
    assert first[0]["error"] == "flaky read" and first[0]["error_type"] == "OSError"


def done(log: Path) -> list[tuple[str, int]]:
    lines = log.read_text().splitlines() if log.exists() else []
    return [(name, int(start)) for name, start in (line.split() for line in lines)]


def test_a_skipped_chunk_and_a_run_that_ends_with_an_exception(
    fileset: dict, tmp_path: Path
) -> None:
    from coffea import processor
    from coffea.nanoevents import NanoAODSchema

    executor = processor.IterativeExecutor()
    # skipbadfiles: coffea retries the unreadable chunk, then skips it
    log = tmp_path / "skip.log"
    proc = make_processor(in_file("b.root", 350, error=OSError), log)
    run = processor.Runner(executor=executor, schema=NanoAODSchema, chunksize=CHUNKSIZE,
                           savemetrics=True, skipbadfiles=True)  # fmt: skip
    with (
        pytest.warns(UserWarning, match="Skipping bad file"),
        MetricsCollector(processor_instance=proc, executor=executor, store=False) as c,
    ):
        out, report = run(fileset, proc, treename="Events")
    c.set_coffea_report(report)  # after the with block: the figures follow
    m = c.metrics
    skipped = ENTRIES["b.root"] - 350  # coffea cuts 700 into 350 + 350
    assert out["events"] == sum(ENTRIES.values()) - skipped  # the user's own count
    assert m["total_events"] == out["events"] == report["entries"]
    assert m["num_chunks"] == len(done(log)) == report["chunks"] - 1  # not coffea's plan
    assert m["num_chunks_planned"] == report["chunks"]
    assert m["num_chunks_not_processed"] == 1 and m["num_chunks_failed"] == 1
    assert m["num_failed_attempts"] == executor.retries + 1  # every attempt recorded
    assert m["status"] == "ok"

    # an exception that ends the run: what was processed before it is what counts
    log = tmp_path / "fail.log"
    proc = make_processor(in_file("b.root", 350), log)
    run = runner(executor)
    with (
        pytest.raises(Exception, match="bad chunk"),
        MetricsCollector(processor_instance=proc, executor=executor, store=False) as c,
    ):
        run(fileset, proc, treename="Events")
    m = c.metrics
    assert m["status"] == "failed" and "bad chunk of b.root at 350" in m["error"]
    ok = [ch for ch in c.chunk_metrics if ch["status"] == "ok"]
    truth = done(log)
    assert sorted((Path(c["filename"]).name, c["entry_start"]) for c in ok) == sorted(truth)
    assert m["num_chunks"] == len(truth) and m["total_events"] == sum(c["events"] for c in ok)
    assert ("b.root", 0) in truth  # the chunks before the failing one were processed


def test_a_dask_executor_without_client_is_refused() -> None:
    from coffea import processor

    with pytest.raises(ValueError, match=r"DaskExecutor\(client=client\)"):
        MetricsCollector(executor=processor.DaskExecutor(), processor_instance=make_processor())
