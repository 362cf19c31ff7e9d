"""coffea's dask-awkward path measured against ground truth taken in the same run: the
entries written into the ROOT files, uproot's own counts, the processor's own output,
bytes read by uproot on fresh handles, and Dask's task stream."""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("dask_awkward", reason="run in .venv-awkward: ./dev test tests/awkward")

import dask
import dask_awkward as dak
import hist.dask as hda
import uproot
from click.testing import CliRunner
from coffea import processor
from coffea.dataset_tools import apply_to_fileset
from coffea.nanoevents import NanoAODSchema
from dask.utils import key_split
from distributed import get_task_stream
from nanoaod_files import ENTRIES, STEPS

from daskscope import MetricsCollector, track_metrics
from daskscope.cli.main import cli
from daskscope.views.run import run_view
from daskscope.workflow.awkward import (
    HANDED_OVER,
    NO_CHUNKS,
    NO_ENTRY_RANGES,
    NO_REPORT,
    AwkwardMetricsCollector,
    report_rows,
)

pytestmark = pytest.mark.filterwarnings("ignore:Missing cross-reference:RuntimeWarning")

REPORT = {"allow_read_errors_with_report": True}


class JetProcessor(processor.ProcessorABC):
    def process(self, events: Any) -> dict[str, Any]:
        jets = events.Jet[events.Jet.pt > 30]
        h = hda.Hist.new.Reg(20, 0, 200, name="pt").Double()
        h.fill(pt=dak.flatten(jets.pt))
        return {"nevents": dak.num(events, axis=0), "pt": h}

    def postprocess(self, accumulator: Any) -> Any:
        return accumulator


def input_layers(collections: Any) -> set[str]:
    names: set[str] = set()
    for coll in _flat(collections):
        for name, layer in coll.__dask_graph__().layers.items():
            if type(layer).__name__ == "AwkwardInputLayer":
                names.add(name)
    return names


def _flat(obj: Any) -> list[Any]:
    if isinstance(obj, dict):
        return [c for v in obj.values() for c in _flat(v)]
    if isinstance(obj, (list, tuple)):
        return [c for v in obj for c in _flat(v)]
    return [obj] if hasattr(obj, "__dask_graph__") else []


def fresh_read_bytes(path: str, columns: set[str], start: int, stop: int) -> int:
    """What uproot requests to read ``columns`` of entries [start, stop) on a new handle."""
    with uproot.open(path) as f:
        f["Events"].arrays(sorted(columns), entry_start=start, entry_stop=stop)
        return f.file.source.num_requested_bytes


def necessary_columns(out: Any) -> set[str]:
    per_layer = dak.report_necessary_columns(out)
    columns = {frozenset(c) for c in per_layer.values()}
    assert len(columns) == 1, per_layer  # one processor, the same branches everywhere
    return set(next(iter(columns)))


def test_apply_to_fileset_measured_against_ground_truth(
    client: Any, fileset: dict[str, Any], root_files: dict[str, Path]
) -> None:
    with AwkwardMetricsCollector(client, name="jets", store=False) as collector:
        out, report = apply_to_fileset(
            JetProcessor(), fileset, schemaclass=NanoAODSchema, uproot_options=REPORT
        )
        inputs = input_layers(out)
        columns = necessary_columns(out)
        with get_task_stream(client) as stream:
            started = time.perf_counter()
            result, _ = collector.compute(out, report)
            compute_wall = time.perf_counter() - started
    m = collector.metrics

    # events: entries written == uproot's count == the processor's own count == measured
    for name, path in root_files.items():
        with uproot.open(path) as f:
            assert f["Events"].num_entries == ENTRIES[name]
    assert result["ttbar"]["nevents"] == ENTRIES["a.root"]
    assert result["wjets"]["nevents"] == ENTRIES["b.root"]
    assert m["total_events"] == sum(ENTRIES.values()) == 2000
    datasets = collector.run.info["datasets"]
    assert datasets["ttbar"]["total_events"] == 1300 and datasets["wjets"]["total_events"] == 700
    # the user's own figures per dataset sit beside uproot's, on this path too
    collector.set_custom_metrics({"ttbar": {"cutflow": {"passed": 12}}})
    datasets = collector.run.info["datasets"]
    assert datasets["ttbar"]["cutflow.passed"] == 12 and datasets["ttbar"]["total_events"] == 1300
    assert "cutflow.passed" not in datasets["wjets"]

    # partitions: the steps asked for == input tasks that ran in Dask's task stream
    input_tasks = {t["key"] for t in stream.data if key_split(t["key"]) == "from-uproot"}
    read_tasks = {k for k in input_tasks if (k[0] if isinstance(k, tuple) else k) in inputs}
    steps = sum(len(s) for s in STEPS.values())
    assert m["partitions"] == m["num_chunks"] == len(read_tasks) == steps == 5
    assert m["partitions_failed"] == 0 and collector.run.info["read_failures"] == []
    ranges = sorted((r["file"], r["entry_start"], r["entry_stop"]) for r in collector.report_rows)
    assert ranges == sorted(
        (str(root_files[name]), a, b) for name, s in STEPS.items() for a, b in s
    )

    # bytes: what uproot requests for the same branches and ranges on fresh handles
    expected = sum(
        fresh_read_bytes(str(root_files[name]), columns, a, b)
        for name, s in STEPS.items()
        for a, b in s
    )
    assert m["bytes_read"] == expected > 0
    assert m["data_rate_gbps"] == pytest.approx(m["bytes_read"] * 8 / m["wall_time_s"] / 1e9)

    # wall time encloses the compute; rates follow from it
    assert m["wall_time_s"] >= compute_wall
    assert m["event_rate_wall_khz"] == pytest.approx(2000 / m["wall_time_s"] / 1e3)
    assert m["cores"] == 2

    # CPU and the split: every prefix that ran (task stream) has fine metrics and a kind
    ran = {key_split(t["key"]) for t in stream.data}
    measured = {k[1] for k in collector.span_metrics if k[1] != "N/A"}
    assert ran == measured
    kinds = collector.run.info["prefix_kinds"]
    assert ran <= set(kinds) and collector.run.info["unclassified_prefixes"] == []
    assert kinds["from-uproot"] == "read"
    assert kinds["hist-on-block"] == "processor"
    assert kinds["histreduce-agg"] == "overhead"  # the histogram's tree reduction
    assert kinds["from-uproot-report"] == "overhead"
    cpu = sum(v for k, v in collector.span_metrics.items() if k[2] == "thread-cpu")
    assert m["cpu_seconds"] == pytest.approx(cpu) and cpu > 0
    parts = ("read", "processor", "overhead")
    assert sum(m[f"{p}_seconds"] for p in parts) == pytest.approx(m["execute_seconds"])
    assert sum(m[f"{p}_cpu_seconds"] for p in parts) == pytest.approx(m["cpu_seconds"])
    assert m["read_seconds"] > 0 and m["processor_seconds"] > 0
    assert m["event_rate_per_cpu_second_khz"] == pytest.approx(2000 / m["cpu_seconds"] / 1e3)
    busy = m["execute_seconds"]
    assert m["parallel_efficiency"] == pytest.approx(busy / (m["wall_time_s"] * 2))
    # uproot's own read seconds, per partition, summed
    assert m["read_time_s"] == pytest.approx(sum(r["duration_s"] for r in collector.report_rows))

    # what this path cannot measure is absent, with its reason
    for key in ("processing_time_s", "chunk_cpu_seconds", "chunk_memory_peak_bytes"):
        assert key not in m and collector.not_measured[key] == NO_CHUNKS
    assert collector.chunk_metrics == []


def test_plain_dask_compute_report_after_the_block_reaches_the_store(
    client: Any, fileset: dict[str, Any], database_url: str
) -> None:
    url = database_url  # SQLite and PostgreSQL
    with AwkwardMetricsCollector(client, name="plain", database=url) as collector:
        out, report = apply_to_fileset(
            JetProcessor(), fileset, schemaclass=NanoAODSchema, uproot_options=REPORT
        )
        collector.watch(out, report)
        result, computed = dask.compute(out, report)
    assert "total_events" not in collector.metrics
    assert collector.not_measured["total_events"] == NO_REPORT
    collector.set_uproot_report(computed)
    assert collector.metrics["total_events"] == result["ttbar"]["nevents"] + 700 == 2000
    assert "total_events" not in collector.not_measured
    run_id = collector.wait_stored()
    shown = CliRunner().invoke(cli, ["--database", url, "run", run_id, "--json"])
    assert shown.exit_code == 0, shown.output
    stored = {f["key"]: f for g in json.loads(shown.output)["figures"] for f in g["figures"]}
    assert stored["total_events"]["value"] == 2000
    assert stored["partitions"]["value"] == 5
    assert stored["bytes_read"]["value"] == collector.metrics["bytes_read"]
    assert stored["processing_time_s"]["value"] is None
    assert stored["processing_time_s"]["why"] == NO_CHUNKS


def test_a_failed_read_is_counted_not_its_events(
    client: Any, root_files: dict[str, Path], tmp_path: Path
) -> None:
    missing = tmp_path / "gone.root"
    fileset = {
        "broken": {
            "files": {
                str(root_files["a.root"]): {"object_path": "Events", "steps": [[0, 500]]},
                str(missing): {"object_path": "Events", "steps": [[0, 100]]},
            }
        }
    }
    with AwkwardMetricsCollector(client, store=False) as collector:
        out, report = apply_to_fileset(
            JetProcessor(), fileset, schemaclass=NanoAODSchema, uproot_options=REPORT
        )
        result, _ = collector.compute(out, report)
    m = collector.metrics
    # the processor saw only the partition that was read
    assert result["broken"]["nevents"] == 500 == m["total_events"]
    assert m["partitions"] == 2 and m["partitions_failed"] == 1
    (failure,) = collector.run.info["read_failures"]
    assert failure["file"] == str(missing) and failure["exception"] == "FileNotFoundError"
    assert failure["entries"] == 100 and failure["bytes_read"] is None
    assert m["bytes_read"] == fresh_read_bytes(
        str(root_files["a.root"]), necessary_columns(out), 0, 500
    )


def test_without_report_or_entry_ranges_figures_are_absent_with_reasons(
    client: Any, fileset: dict[str, Any], root_files: dict[str, Path]
) -> None:
    with AwkwardMetricsCollector(client, store=False) as collector:
        out = apply_to_fileset(JetProcessor(), fileset, schemaclass=NanoAODSchema)
        (result,) = collector.compute(out)
    m = collector.metrics
    assert result["ttbar"]["nevents"] == 1300
    for key in ("total_events", "bytes_read", "partitions", "num_chunks"):
        assert key not in m and collector.not_measured[key] == NO_REPORT
    for key in ("data_rate_gbps", "event_rate_wall_khz", "event_rate_per_cpu_second_khz"):
        assert key not in m
    # CPU is still measured; the processor/overhead split still comes from the graph
    assert m["cpu_seconds"] > 0 and m["processor_seconds"] > 0
    if "read_seconds" not in m:  # uproot's read fused into the processor's tasks
        assert "fused" in collector.not_measured["read_seconds"]

    # files without explicit steps: uproot reports step numbers, not entry ranges
    whole = {"x": {"files": {str(root_files["b.root"]): "Events"}}}
    with AwkwardMetricsCollector(client, store=False) as collector:
        out, report = apply_to_fileset(
            JetProcessor(), whole, schemaclass=NanoAODSchema, uproot_options=REPORT
        )
        result, _ = collector.compute(out, report)
    assert result["x"]["nevents"] == 700
    assert "total_events" not in collector.metrics
    assert collector.not_measured["total_events"] == NO_ENTRY_RANGES
    assert collector.metrics["partitions"] == 1
    assert collector.metrics["bytes_read"] == fresh_read_bytes(
        str(root_files["b.root"]), necessary_columns(out), 0, 700
    )


def test_bad_input_says_what_to_do(fileset: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="needs a Dask client"):
        AwkwardMetricsCollector()
    _, report = apply_to_fileset(
        JetProcessor(), fileset, schemaclass=NanoAODSchema, uproot_options=REPORT
    )
    with pytest.raises(TypeError, match="still lazy"):
        report_rows(report)
    with pytest.raises(TypeError, match="not a row of uproot's report"):
        report_rows([{"entries": 3}])


class TrackedJetProcessor(JetProcessor):
    """The classic path's habit: ``@track_metrics`` on ``process``."""

    @track_metrics
    def process(self, events: Any) -> dict[str, Any]:
        return super().process(events)


def test_a_plain_metrics_collector_hands_over_to_this_paths_measurement(
    client: Any,
    fileset: dict[str, Any],
    root_files: dict[str, Path],
    caplog: pytest.LogCaptureFixture,
) -> None:
    proc = TrackedJetProcessor()
    with (
        caplog.at_level(logging.WARNING, logger="daskscope"),
        MetricsCollector(client, processor_instance=proc, store=False) as collector,
    ):
        out, report = apply_to_fileset(
            proc, fileset, schemaclass=NanoAODSchema, uproot_options=REPORT
        )
        columns = necessary_columns(out)
        with get_task_stream(client) as stream:
            result, computed = dask.compute(out, report)
    with pytest.raises(TypeError, match="still lazy"):
        collector.set_coffea_report(report)  # the report before it was computed
    collector.set_coffea_report(computed)  # after the block: the figures follow
    m = collector.metrics
    # said, and recorded with the run
    assert HANDED_OVER in caplog.text and collector.run.info["path"] == "dask-awkward"
    assert collector.run.info["path_note"] == HANDED_OVER
    # no chunk: process() ran twice on the client, building the graph
    assert collector.chunk_metrics == [] and "processing_time_s" not in m
    assert collector.run.info["not_measured"]["processing_time_s"] == NO_CHUNKS
    # events and bytes from uproot's report, equal to the files' own counts
    assert result["ttbar"]["nevents"] + result["wjets"]["nevents"] == m["total_events"] == 2000
    expected = sum(
        fresh_read_bytes(str(root_files[name]), columns, a, b)
        for name, s in STEPS.items()
        for a, b in s
    )
    assert m["bytes_read"] == expected and m["partitions"] == 5
    datasets = collector.run.info["datasets"]
    assert datasets["ttbar"]["total_events"] == ENTRIES["a.root"]
    assert datasets["wjets"]["total_events"] == ENTRIES["b.root"]
    # speedup and efficiency from the task seconds Dask measured, not the client's time
    ran = {key_split(t["key"]) for t in stream.data}
    assert ran == {k[1] for k in collector.span_metrics if k[1] != "N/A"}
    busy = m["execute_seconds"]
    assert busy > 0 and m["speedup"] == pytest.approx(busy / m["wall_time_s"])
    assert m["parallel_efficiency"] == pytest.approx(busy / (m["wall_time_s"] * m["cores"]))
    # the graph process() returned told the read from the processor's work
    kinds = collector.run.info["prefix_kinds"]
    assert kinds["from-uproot"] == "read" and kinds["hist-on-block"] == "processor"
    assert m["read_seconds"] > 0 and m["processor_seconds"] > 0


def test_a_plain_metrics_collector_knows_this_path_by_its_tasks(
    client: Any, fileset: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    # no @track_metrics, the report not given: uproot's read tasks in the span give it
    # away (the report keeps the read apart; fused into the processor's tasks without
    # it, nothing tells, and no chunk means no speedup at all, never a wrong one)
    with (
        caplog.at_level(logging.WARNING, logger="daskscope"),
        MetricsCollector(client, store=False) as collector,
    ):
        out, report = apply_to_fileset(
            JetProcessor(), fileset, schemaclass=NanoAODSchema, uproot_options=REPORT
        )
        result, _ = dask.compute(out, report)
    m = collector.metrics
    assert result["ttbar"]["nevents"] == 1300
    assert HANDED_OVER in caplog.text and collector.run.info["path"] == "dask-awkward"
    for key in ("total_events", "bytes_read", "num_chunks"):
        assert key not in m and collector.run.info["not_measured"][key] == NO_REPORT
    assert "processing_time_s" not in m
    assert m["speedup"] == pytest.approx(m["execute_seconds"] / m["wall_time_s"])
    view = run_view(collector.run)
    assert view.datasets == () and view.datasets_why == NO_REPORT
    speedup = view.figure("speedup")
    assert speedup is not None and speedup.value == m["speedup"]
