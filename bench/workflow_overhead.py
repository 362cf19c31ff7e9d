"""What MetricsCollector and @track_metrics cost a coffea workflow.

Runs the same coffea workflow (DaskExecutor on a LocalCluster) with and without the
collector in interleaved pairs and prints: the median wall-time ratio of the workflow
inside the collector to the workflow alone, the same ratio with the collector's enter and
exit included, the fixed cost of entering and leaving the collector (ms, over the real
runs and around an empty block), and the decorator's cost per chunk (µs, a tracked vs an
untracked ``process`` called in a loop on the same events). The last line is one JSON
object of the figures.

    python bench/workflow_overhead.py [--pairs 7] [--events 1000000] [--chunksize 50000]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any


def write_file(path: Path, n: int) -> None:
    import awkward as ak
    import numpy as np
    import uproot

    rng = np.random.default_rng(0)
    counts = rng.integers(0, 6, n)
    total = int(counts.sum())
    jets = ak.zip(
        {k: ak.unflatten(rng.exponential(30, total).astype("f4"), counts)
         for k in ("pt", "eta", "phi", "mass")}
    )  # fmt: skip
    with uproot.recreate(path) as f:
        f["Events"] = {
            "run": np.ones(n, "u4"),
            "luminosityBlock": np.ones(n, "u4"),
            "event": np.arange(n, dtype="u8"),
            "Jet": jets,
        }


def make_processor(tracked: bool) -> Any:
    import awkward as ak
    from coffea import processor

    from daskscope import track_metrics, track_time

    def body(self: Any, events: Any) -> dict[str, Any]:
        with track_time(self, "select"):
            jets = events.Jet[events.Jet.pt > 30]
        return {"events": len(events), "jets": int(ak.sum(ak.num(jets)))}

    class Bench(processor.ProcessorABC):
        process = track_metrics(body) if tracked else body

        def postprocess(self, acc: Any) -> Any:
            return acc

    return Bench()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pairs", type=int, default=7)
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--chunksize", type=int, default=50_000)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    warnings.filterwarnings("ignore", category=RuntimeWarning)

    from coffea import processor
    from coffea.nanoevents import NanoAODSchema, NanoEventsFactory
    from distributed import Client, LocalCluster

    from daskscope import MetricsCollector

    tmp = Path(tempfile.mkdtemp(prefix="daskscope-bench-"))
    path = tmp / "events.root"
    write_file(path, args.events)
    fileset = {"bench": [str(path)]}
    db = f"sqlite:///{tmp / 'store.db'}"

    with (
        LocalCluster(
            n_workers=args.workers, threads_per_worker=1, processes=True, dashboard_address=":0"
        ) as cluster,
        Client(cluster) as client,
    ):
        run = processor.Runner(
            executor=processor.DaskExecutor(client=client, status=False),
            schema=NanoAODSchema,
            chunksize=args.chunksize,
            savemetrics=True,
        )
        plain, tracked = make_processor(False), make_processor(True)
        run(fileset, plain, treename="Events")  # warm up: imports, numba
        run(fileset, tracked, treename="Events")

        ratios, total_ratios, without, with_, own = [], [], [], [], []
        for i in range(args.pairs):
            order = ["off", "on"] if i % 2 == 0 else ["on", "off"]
            times = {}
            for mode in order:
                t0 = time.perf_counter()
                if mode == "on":
                    with MetricsCollector(
                        client, processor_instance=tracked, worker_tracking_interval=0.5,
                        database=db,
                    ) as collector:  # fmt: skip
                        t_run = time.perf_counter()
                        _, report = run(fileset, tracked, treename="Events")
                        times["on"] = time.perf_counter() - t_run
                        collector.set_coffea_report(report)
                    info = collector.run.info
                    own.append((info["enter_s"] + info["exit_s"]) * 1e3)
                    times["on+fixed"] = time.perf_counter() - t0
                else:
                    run(fileset, plain, treename="Events")
                    times["off"] = time.perf_counter() - t0
            # the workflow's own time, with the collector's fixed enter/exit cost reported
            # apart (below), and the ratio with that cost included for this run length
            ratios.append(times["on"] / times["off"])
            total_ratios.append(times["on+fixed"] / times["off"])
            without.append(times["off"])
            with_.append(times["on"])

        # fixed cost: enter + exit around nothing, on the same live cluster
        fixed = []
        for _ in range(args.pairs):
            t0 = time.perf_counter()
            with MetricsCollector(client, worker_tracking_interval=0.5, database=db):
                pass
            fixed.append(time.perf_counter() - t0)

    # decorator cost per chunk: tracked vs untracked process() on one chunk, in-process,
    # inside a local collector (the collector clears the processor's switch on exit, so
    # outside one the decorator would only measure its switched-off path)
    factory = NanoEventsFactory.from_root(
        {str(path): "Events"}, schemaclass=NanoAODSchema, mode="virtual",
        entry_stop=1000,
    )  # fmt: skip
    events = factory.events()
    plain.process(events), tracked.process(events)
    n = 300
    per_call = {}
    for name, proc in (("plain", plain), ("tracked", tracked)):
        samples = []
        with MetricsCollector(
            processor_instance=proc, store=False, worker_tracking_interval=None
        ) as local:
            for _ in range(5):
                t0 = time.perf_counter()
                for _ in range(n):
                    proc.process(events)
                samples.append((time.perf_counter() - t0) / n)
        per_call[name] = min(samples)
    assert len(local.chunk_metrics) == 5 * n  # every tracked call was measured
    decorator_us = (per_call["tracked"] - per_call["plain"]) * 1e6

    figures = {
        "pairs": args.pairs,
        "events": args.events,
        "chunks": -(-args.events // args.chunksize),
        "median_wall_ratio": statistics.median(ratios),
        "median_wall_ratio_with_enter_exit": statistics.median(total_ratios),
        "median_wall_without_s": statistics.median(without),
        "median_wall_with_s": statistics.median(with_),
        "enter_exit_ms": statistics.median(own),
        "enter_exit_empty_block_ms": statistics.median(fixed) * 1e3,
        "decorator_us_per_chunk": decorator_us,
    }
    off, on = figures["median_wall_without_s"], figures["median_wall_with_s"]
    print(
        f"median wall ratio (with/without): {figures['median_wall_ratio']:.3f} over "
        f"{args.pairs} interleaved pairs ({off:.3f} s without vs {on:.3f} s with)"
    )
    print(
        "median wall ratio including the collector's enter + exit: "
        f"{figures['median_wall_ratio_with_enter_exit']:.3f}"
    )
    print(
        f"enter + exit of the collector: {figures['enter_exit_ms']:.1f} ms (median over the "
        f"runs; around an empty block: {figures['enter_exit_empty_block_ms']:.1f} ms)"
    )
    print(f"@track_metrics per chunk: {decorator_us:.1f} µs")
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
