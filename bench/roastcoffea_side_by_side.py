"""daskscope and roastcoffea 0.1.2 on the same coffea processor, the same ROOT files,
the same Dask cluster: their figures side by side (docs/workflow.md keeps the table).

roastcoffea needs Python >= 3.12; run this in an environment that has both::

    uv venv --python 3.12 .venv-roast
    uv pip install --python .venv-roast/bin/python roastcoffea==0.1.2 coffea uproot -e .
    .venv-roast/bin/python bench/roastcoffea_side_by_side.py [--threads 4] [--events 200000]

Without roastcoffea it says so and runs daskscope alone. ``--threads`` more threads per
worker than the machine has cores makes the CPU contention under which the two
"CPU" event rates part: daskscope divides by thread-CPU seconds, roastcoffea by summed
chunk wall seconds.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import awkward as ak
import numpy as np
import uproot
from coffea import processor
from coffea.nanoevents import NanoAODSchema
from distributed import Client, LocalCluster

import daskscope

HAVE_ROAST = importlib.util.find_spec("roastcoffea") is not None
DASH = "\u2013"  # what the docs print for "no such figure"

#: (what it is, daskscope's key, roastcoffea's key); None: that tool has no such figure
PAIRS = (
    ("wall time (s)", "wall_time_s", "elapsed_time_seconds"),
    ("events", "total_events", "total_events"),
    ("bytes read", "bytes_read", "total_bytes_read"),
    ("chunks", "num_chunks", "num_chunks"),
    ("data rate (Gbit/s, wall)", "data_rate_gbps", "data_rate_gbps"),
    ("event rate (kHz, wall)", "event_rate_wall_khz", "event_rate_elapsed_khz"),
    ("event rate per CPU-second (kHz)", "event_rate_per_cpu_second_khz", None),
    ("event rate per chunk-second (kHz)", "event_rate_per_chunk_second_khz",
     "event_rate_cpu_total_khz"),
    ("event rate per core (kHz)", "event_rate_core_khz", "event_rate_core_khz"),
    ("Σ chunk wall (s)", "processing_time_s", "total_cpu_time"),
    ("thread-CPU of all tasks (s)", "cpu_seconds", None),
    ("thread-CPU of the processor's tasks (s)", "processor_cpu_seconds",
     "processor_cpu_time_seconds"),
    ("non-CPU of the processor's tasks (s)", "processor_noncpu_seconds",
     "processor_io_wait_time_seconds"),
    ("speedup", "speedup", "speedup_factor"),
    ("parallel efficiency", "parallel_efficiency", "core_efficiency"),
    ("cores", "cores", "total_cores"),
    ("workers (mean)", "workers_avg", "avg_workers"),
    ("memory peak (bytes)", "memory_peak_bytes", "peak_memory_bytes"),
    ("input compressed (bytes)", "input_compressed_bytes", None),
    ("input uncompressed (bytes)", "input_uncompressed_bytes", None),
    ("compression ratio (uncompr./compr.)", "compression_ratio", None),
)  # fmt: skip


def write_file(path: Path, n: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    counts = rng.integers(0, 6, n)
    total = int(counts.sum())
    jets = ak.zip({
        "pt": ak.unflatten(rng.exponential(30, total).astype("f4"), counts),
        "eta": ak.unflatten(rng.normal(0, 2, total).astype("f4"), counts),
        "phi": ak.unflatten(rng.uniform(-3, 3, total).astype("f4"), counts),
        "mass": ak.unflatten(rng.uniform(0, 10, total).astype("f4"), counts),
    })  # fmt: skip
    branches = {
        "run": np.ones(n, "u4"), "luminosityBlock": np.ones(n, "u4"),
        "event": np.arange(n, dtype="u8"), "Jet": jets,
    }  # fmt: skip
    with uproot.recreate(path) as f:
        # a TTree (plain assignment writes an RNTuple with recent uproot)
        f.mktree(
            "Events", {k: v.type if k == "Jet" else v.dtype for k, v in branches.items()},
            field_name=lambda outer, inner: inner if outer == "" else f"{outer}_{inner}",
            counter_name=lambda counter: "n" + counter,
        )  # fmt: skip
        f["Events"].extend(branches)


def body(events: Any, timed: Any, counted: Any, owner: Any) -> dict[str, Any]:
    # the same work under both tools; some CPU per event so that contention shows
    with counted(owner, events, "jets"):
        pt = events.Jet.pt
    with timed(owner, "selection"):
        selected = pt[pt > 30]
        for _ in range(20):
            float(ak.sum(np.sqrt(selected**2 + 1.0)))
    return {"events": len(events), "jets": int(ak.sum(ak.num(selected)))}


def processors() -> tuple[Any, Any]:
    from daskscope import track_bytes, track_metrics, track_time

    class Ours(processor.ProcessorABC):
        @track_metrics
        def process(self, events: Any) -> dict[str, Any]:
            return body(events, track_time, track_bytes, self)

        def postprocess(self, accumulator: Any) -> Any:
            return accumulator

    theirs = None
    if HAVE_ROAST:
        import roastcoffea

        class Theirs(processor.ProcessorABC):
            @roastcoffea.track_metrics
            def process(self, events: Any) -> dict[str, Any]:
                return body(events, roastcoffea.track_time, roastcoffea.track_bytes, self)

            def postprocess(self, accumulator: Any) -> Any:
                return accumulator

        theirs = Theirs()
    return Ours(), theirs


def run_ours(client: Client, fileset: dict, proc: Any, out: Path) -> dict[str, Any]:
    runner = processor.Runner(
        executor=processor.DaskExecutor(client=client, status=False),
        schema=NanoAODSchema, chunksize=50_000, savemetrics=True,
    )  # fmt: skip
    with daskscope.MetricsCollector(
        client, processor_instance=proc, worker_tracking_interval=0.5, store=False
    ) as collector:
        _, report = runner(fileset, proc, treename="Events")
        collector.set_coffea_report(report)
    saved = collector.save(out / "daskscope-run")
    plots = collector.save_plots(out / "daskscope-plots")
    return {"metrics": collector.metrics, "saved": saved, "plots": len(plots)}


def run_theirs(client: Client, fileset: dict, proc: Any, out: Path) -> dict[str, Any]:
    import roastcoffea
    from roastcoffea.visualization import plots as roast_plots

    runner = processor.Runner(
        executor=processor.DaskExecutor(client=client, status=False),
        schema=NanoAODSchema, chunksize=50_000, savemetrics=True,
    )  # fmt: skip
    with roastcoffea.MetricsCollector(
        client, processor_instance=proc, worker_tracking_interval=0.5
    ) as collector:
        output, report = runner(fileset, proc, treename="Events")
        collector.extract_metrics_from_output(output)
        collector.set_coffea_report(report)
    saved = collector.save_measurement(out / "roastcoffea", "run")
    n_plots = len([name for name in roast_plots.__all__ if name.startswith("plot_")])
    return {"metrics": collector.get_metrics(), "saved": saved, "plots": n_plots}


def medians(metrics: list[dict[str, Any]]) -> dict[str, Any]:
    """Per key, the median over the runs of the numbers (None when a run lacks it)."""
    import statistics

    out: dict[str, Any] = {}
    for key in metrics[0] if metrics else ():
        values = [m.get(key) for m in metrics]
        if all(isinstance(v, int | float) and not isinstance(v, bool) for v in values):
            out[key] = statistics.median(values)
    return out


def strict_json(path: Path) -> str:
    """'yes', or the first non-strict token a strict parser refuses."""
    files = [path] if path.is_file() else sorted(path.rglob("*.json"))

    def refuse(token: str) -> Any:
        raise ValueError(token)

    for file in files:
        try:
            json.loads(file.read_text(), parse_constant=refuse)
        except ValueError as exc:
            return f"no ({file.name}: {exc})"
    return "yes" if files else "no JSON file"


def text(value: Any) -> str:
    if value is None:
        return DASH
    if isinstance(value, float):
        return "NaN" if math.isnan(value) else f"{value:.4g}"
    return str(value)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=4, help="threads per worker")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--events", type=int, default=200_000, help="events per file")
    parser.add_argument("--repeat", type=int, default=3, help="runs per tool, order alternating")
    args = parser.parse_args()
    if not HAVE_ROAST:
        print("roastcoffea is not importable here (it needs Python >= 3.12): daskscope alone")
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        files = [out / f"f{i}.root" for i in range(2)]
        for i, path in enumerate(files):
            write_file(path, args.events, i)
        fileset = {"sample": [str(p) for p in files]}
        ours, theirs = processors()
        with (
            LocalCluster(
                n_workers=args.workers, threads_per_worker=args.threads, processes=True,
                dashboard_address=":0",
            ) as cluster,
            Client(cluster) as client,
        ):  # fmt: skip
            # warm-up: workers import coffea and open the files once, for neither tool
            processor.Runner(
                executor=processor.DaskExecutor(client=client, status=False),
                schema=NanoAODSchema, chunksize=50_000,
            )(fileset, processors()[0], treename="Events")  # fmt: skip
            t0 = time.perf_counter()
            runs: dict[str, list[dict[str, Any]]] = {"daskscope": [], "roastcoffea": []}
            for i in range(args.repeat):
                order = ["daskscope", "roastcoffea"][:: 1 if i % 2 == 0 else -1]
                for tool in order:
                    if tool == "daskscope":
                        runs[tool].append(run_ours(client, fileset, ours, out / f"d{i}"))
                    elif theirs is not None:
                        runs[tool].append(run_theirs(client, fileset, theirs, out / f"r{i}"))
            elapsed = time.perf_counter() - t0
        load = os.getloadavg()
        print(
            f"{args.workers} workers x {args.threads} threads on {os.cpu_count()} cores; "
            f"{args.repeat} runs per tool (medians); load average {load[0]:.2f} "
            f"{load[1]:.2f} {load[2]:.2f}; {elapsed:.0f} s"
        )
        results = {tool: done[-1] for tool, done in runs.items() if done}
        ds = medians([r["metrics"] for r in runs["daskscope"]])
        rc = medians([r["metrics"] for r in runs["roastcoffea"]])
        print("| figure | daskscope key | value | roastcoffea key | value |")
        print("|---|---|---|---|---|")
        for label, ours_key, their_key in PAIRS:
            theirs_key = f"`{their_key}`" if their_key else DASH
            theirs_value = text(rc.get(their_key)) if their_key else DASH
            print(f"| {label} | `{ours_key}` | {text(ds.get(ours_key))} | {theirs_key} | "
                  f"{theirs_value} |")  # fmt: skip
        if rc and ds.get("event_rate_per_cpu_second_khz") and rc.get("event_rate_cpu_total_khz"):
            ratio = ds["event_rate_per_cpu_second_khz"] / rc["event_rate_cpu_total_khz"]
            print(f"\ndaskscope per CPU-second / roastcoffea 'Total CPU' rate: {ratio:.1f}x")
        if ds.get("event_rate_per_cpu_second_khz") and ds.get("event_rate_per_chunk_second_khz"):
            ratio = ds["event_rate_per_cpu_second_khz"] / ds["event_rate_per_chunk_second_khz"]
            print(f"daskscope per CPU-second / per chunk-second, same runs: {ratio:.1f}x")
        if "roastcoffea" in results:
            # its per-file ratio, from the same tree sizes: compressed / uncompressed
            theirs_ratios = results["roastcoffea"]["metrics"].get("compression_ratios")
            print(f"roastcoffea compression_ratios (compressed/uncompressed): {theirs_ratios}")
            inverse = ds.get("input_compressed_bytes", 0) / ds.get("input_uncompressed_bytes", 1)
            print(f"daskscope input_compressed_bytes / input_uncompressed_bytes: {inverse:.4f}")
        for name, result in results.items():
            print(f"{name}: {result['plots']} plots; saved run is strict JSON: "
                  f"{strict_json(Path(result['saved']))}")  # fmt: skip


if __name__ == "__main__":
    main()
