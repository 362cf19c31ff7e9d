"""Workflow metrics at the edges, each against its own ground truth in the same run: a
``track_memory`` section repeated within a chunk (psutil), the seed's custom-field code
with collection off, workers sending nothing without a collector (the scheduler's event
counts), saved runs as strict JSON that read back with the same types, and the
direction of processing time in ``compare``."""

from __future__ import annotations

import json
import math
import mmap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
from click.testing import CliRunner
from distributed import Client, LocalCluster
from rich.console import Console

import daskscope
from daskscope import MetricsCollector, catalogue, track_memory, track_metrics
from daskscope.cli.main import cli
from daskscope.workflow import current_chunk
from daskscope.workflow.delivery import CHUNK_TOPIC

MIB = 1 << 20


@pytest.fixture(scope="module")
def client() -> Iterator[Client]:
    with (
        LocalCluster(
            n_workers=2, threads_per_worker=1, processes=False, dashboard_address=":0"
        ) as cluster,
        Client(cluster) as c,
    ):
        yield c


def _text(render: Any) -> str:
    console = Console(width=250, record=True)
    render(console)
    return console.export_text()


# -- a section that repeats within one chunk ------------------------------------------


@track_metrics
def grow_four_times(blocks: list[mmap.mmap]) -> list[tuple[int, int]]:
    """One chunk whose "grow" section runs four times, each keeping 16 MiB more; returns
    psutil's RSS before and after each call, read by the user's own code."""
    process = psutil.Process()
    seen = []
    for _ in range(4):
        before = process.memory_info().rss
        with track_memory(None, "grow"):
            # a fresh mapping, every page written: new resident memory each time (a
            # bytearray may reuse heap that earlier tests left resident)
            block = mmap.mmap(-1, 16 * MIB)
            for page in range(0, 16 * MIB, mmap.PAGESIZE):
                block[page] = 1
            blocks.append(block)
        seen.append((before, process.memory_info().rss))
    return seen


def test_a_repeated_memory_section_keeps_its_peak_and_adds_its_deltas(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    blocks: list[mmap.mmap] = []
    with MetricsCollector(name="repeat", database=url, worker_tracking_interval=None) as c:
        seen = grow_four_times(blocks)
    run_id = c.wait_stored()
    (chunk,) = c.run.chunks
    section = chunk.sections["grow"]
    # the truth: psutil around each call, in the same process, a few lines apart
    highest = max(after for _, after in seen)
    grown = sum(after - before for before, after in seen)
    assert grown >= 4 * 16 * MIB * 0.9  # the workload did grow the process
    assert section["count"] == 4
    assert abs(section["memory_after_bytes"] - highest) <= MIB  # the peak, not 4 times the RSS
    assert abs(section["memory_delta_bytes"] - grown) <= 4 * MIB  # deltas add up
    run_section = c.sections["grow"]
    assert run_section["memory_after_peak_bytes"] == section["memory_after_bytes"]
    assert run_section["memory_delta_bytes"] == section["memory_delta_bytes"]

    # the same number in the summary, `daskscope run` and the stored run
    peak_text = catalogue.figure("section", "memory_after_peak_bytes").text(
        section["memory_after_bytes"]
    )
    assert peak_text in _text(lambda console: c.print_summary(console=console))
    runner = CliRunner()
    shown = runner.invoke(cli, ["--database", url, "run", run_id, "--json"])
    assert shown.exit_code == 0, shown.output
    (stored,) = json.loads(shown.output)["sections"]
    assert stored["memory_after_peak_bytes"] == section["memory_after_bytes"]
    assert stored["memory_delta_bytes"] == section["memory_delta_bytes"]
    printed = runner.invoke(cli, ["--database", url, "run", run_id])
    assert printed.exit_code == 0 and peak_text in printed.output


# -- the seed's custom-field code never breaks the analysis ------------------------------


def seed_style(start: int, stop: int) -> int:
    """The seed's examples: no check that a chunk is running."""
    current_chunk().set("label", f"{start}-{stop}")
    current_chunk().report_events(stop - start)
    return stop - start


tracked_seed_style = track_metrics(seed_style)


def test_custom_fields_never_break_user_code_when_collection_is_off(client: Client) -> None:
    # off in this process
    daskscope.workflow.set_enabled(False)
    try:
        assert tracked_seed_style(0, 3) == 3
    finally:
        daskscope.workflow.set_enabled(True)
    # on, but no collector; and outside any tracked call
    assert tracked_seed_style(0, 4) == 4 and seed_style(0, 5) == 5
    assert not current_chunk()  # a detached chunk: falsy, keeps nothing
    # off for a run, on the workers too
    with MetricsCollector(client, enabled=False):
        assert client.gather(client.map(tracked_seed_style, [0, 10], [2, 15])) == [2, 5]
    # and with a collector the same code records its field
    with MetricsCollector(client, store=False, worker_tracking_interval=None) as c:
        assert client.gather(client.map(tracked_seed_style, [0, 10], [2, 15])) == [2, 5]
    assert sorted(ch["label"] for ch in c.chunk_metrics) == ["0-2", "10-15"]
    assert c.metrics["total_events"] == 7


# -- no collector: nothing measured, nothing sent ---------------------------------------


def _chunk_events(client: Client) -> int:
    """Chunk records in the scheduler's event log (short of its cap: an exact count)."""
    import dask

    count = len(client.get_events(CHUNK_TOPIC))
    assert count < dask.config.get("distributed.admin.low-level-log-length")
    return count


def test_without_a_collector_workers_send_no_chunk_records(client: Client) -> None:
    before = _chunk_events(client)
    # worker events travel in the task results' stream: once gathered, they are in
    assert client.gather(client.map(tracked_seed_style, [0, 5, 9], [1, 7, 12])) == [1, 2, 3]
    assert _chunk_events(client) == before
    # a collector's chunks still travel that way (routed by the collector's span)
    with MetricsCollector(client, store=False, worker_tracking_interval=None) as c:
        assert client.gather(client.map(tracked_seed_style, [0, 5], [1, 7])) == [1, 2]
    assert len(c.chunk_metrics) == 2
    assert _chunk_events(client) == before + 2


# -- saved runs: strict JSON, the same types back ---------------------------------------


@track_metrics
def odd_values(start: int, stop: int) -> int:
    np = pytest.importorskip("numpy")
    chunk = current_chunk()
    chunk.set("ratio", float("nan"))
    chunk.set("limit", float("inf"))
    chunk.set("half", np.float32(0.5))
    chunk.set("count", np.int64(3))
    chunk.set("flag", np.bool_(True))
    chunk.set("pair", (1, 2))
    chunk.set("nested", {1: (np.float64(2.0), float("nan"))})
    chunk.report_events(stop - start)
    return stop - start


def odd_derived(metrics: dict[str, Any], workers: dict[str, Any]) -> dict[str, Any]:
    np = pytest.importorskip("numpy")
    return {
        "custom_pair": (1, 2),
        "custom_rate": np.float64(2.5),
        "custom_count": np.int64(7),
        "custom_nan": float("nan"),
        "custom_inf": float("-inf"),
    }


def _types(value: Any) -> Any:
    """The value's shape with the exact type of every leaf."""
    if isinstance(value, dict):
        return {k: _types(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_types(v) for v in value]
    return type(value)


def _refuse(token: str) -> Any:
    raise ValueError(f"not JSON: {token}")


def test_saved_runs_are_strict_json_and_read_back_with_the_same_types(
    tmp_path: Path, database_url: str
) -> None:
    from daskscope.store import open_store
    from daskscope.views.run import run_view, stored_run_view

    with MetricsCollector(
        name="odd", database=database_url, worker_tracking_interval=None,
        derived_metrics=[odd_derived],
    ) as c:  # fmt: skip
        assert odd_values(0, 3) == 3
    fields = c.run.chunks[0].fields
    assert fields["ratio"] is None and fields["limit"] is None  # not a number: null
    assert fields["pair"] == [1, 2] and fields["nested"] == {"1": [2.0, None]}
    assert type(fields["half"]) is float and type(fields["count"]) is int
    assert fields["flag"] is True
    m = c.metrics
    assert m["custom_pair"] == [1, 2] and type(m["custom_rate"]) is float
    assert type(m["custom_count"]) is int
    assert "custom_nan" not in m and "custom_inf" not in m  # not a number: absent

    path = c.save(tmp_path / "odd")
    json.loads(path.read_text(), parse_constant=_refuse)  # no NaN/Infinity tokens
    loaded = MetricsCollector.load(path)
    assert loaded.run == c.run
    assert _types(loaded.run.metrics) == _types(c.run.metrics)
    assert _types(loaded.run.chunks[0].fields) == _types(fields)
    assert not any(isinstance(v, float) and not math.isfinite(v) for v in m.values())

    # the store (SQLite and PostgreSQL, whose JSON refuses NaN) gives the same view
    c.wait_stored()
    with open_store(database_url) as store:
        assert stored_run_view(store, c.run.run_id) == run_view(c.run)


# -- processing time has a direction ----------------------------------------------------


@track_metrics
def wait_for(seconds: float) -> float:
    time.sleep(seconds)  # the workload itself: a chunk that takes this long
    return seconds


def test_more_processing_time_reads_worse_in_compare(tmp_path: Path) -> None:
    from daskscope.store import open_store
    from daskscope.views.compare import compare_view

    url = f"sqlite:///{tmp_path / 'store.db'}"
    ids = []
    for seconds in (0.01, 0.3):
        with MetricsCollector(name="direction", database=url, worker_tracking_interval=None) as c:
            wait_for(seconds)
            wait_for(seconds)
        ids.append(c.wait_stored())
    assert catalogue.figure("workflow", "processing_time_s").better == "lower"
    with open_store(url) as store:
        view = compare_view(store, f"run:{ids[0]}", f"run:{ids[1]}")
    (row,) = [f for f in view.figures if f.id == "workflow.processing_time_s"]
    assert row.b is not None and row.a is not None and row.b > row.a + 0.5
    assert row.verdict == "worse"
    with open_store(url) as store:
        again = compare_view(store, f"run:{ids[1]}", f"run:{ids[0]}")
    (row,) = [f for f in again.figures if f.id == "workflow.processing_time_s"]
    assert row.verdict == "better"
