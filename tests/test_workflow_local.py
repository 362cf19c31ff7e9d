"""The local backend's workers are the pool's processes: coffea's ``FuturesExecutor`` on
its default pool type (loky) beside the helper processes such a pool starts (resource
trackers), checked against the pool's own list of its processes. No Dask cluster lives
in this module: its processes would be children of this process too."""

from __future__ import annotations

import psutil
import pytest

pytest.importorskip("coffea")
loky = pytest.importorskip("loky")

from daskscope import MetricsCollector  # noqa: E402
from test_workflow_coffea import (  # noqa: E402
    ENTRIES,
    check_against_ground_truth,
    make_processor,
    runner,
    write_nanoaod,
)

pytestmark = pytest.mark.filterwarnings("ignore:Missing cross-reference:RuntimeWarning")


@pytest.fixture(scope="module")
def fileset(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[str]]:
    root = tmp_path_factory.mktemp("nanoaod-local")
    paths = []
    for seed, (name, n) in enumerate(ENTRIES.items()):
        write_nanoaod(root / name, n, seed)
        paths.append(str(root / name))
    return {"ttbar": paths[:1], "wjets": paths[1:]}


def test_workers_are_the_pools_processes_not_its_helpers(fileset: dict[str, list[str]]) -> None:
    from coffea import processor

    proc = make_processor()
    with loky.ProcessPoolExecutor(max_workers=2) as pool:  # coffea's default pool type
        pool.submit(int, 0).result()  # its processes exist before the collector
        executor = processor.FuturesExecutor(pool=pool, workers=2, status=False)
        run = runner(executor)
        with MetricsCollector(
            processor_instance=proc, executor=executor, store=False,
            worker_tracking_interval=0.05,
        ) as c:  # fmt: skip
            out, report = run(fileset, proc, treename="Events")
            tree = {p.pid for p in psutil.Process().children(recursive=True)}
        workers = {p.pid for p in pool._processes.values()}
    check_against_ground_truth(c, out, report, fileset)
    # the truth: the pool's own processes; beside them the pool's helpers ran
    assert len(workers) == 2 and workers < tree
    assert {ch["pid"] for ch in c.chunk_metrics} <= workers
    m = c.metrics
    assert m["workers_peak"] == 2 and set(c.tracking_data["workers"]) == {2}
    assert m["workers_avg"] == pytest.approx(2)


def test_in_process_the_worker_is_this_process(fileset: dict[str, list[str]]) -> None:
    from coffea import processor

    proc = make_processor()
    run = runner(processor.IterativeExecutor())
    with MetricsCollector(processor_instance=proc, store=False, worker_tracking_interval=0.05) as c:
        out, report = run(fileset, proc, treename="Events")
    check_against_ground_truth(c, out, report, fileset)
    assert set(c.tracking_data["workers"]) == {1}
    assert {ch["pid"] for ch in c.chunk_metrics} == {psutil.Process().pid}
