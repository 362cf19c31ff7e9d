"""``daskscope import`` on files Dask itself wrote in the test (issue 30): a running
cluster's ``dump_cluster_state`` (msgpack and YAML, gzipped and not) and a
``performance_report`` page, imported through the CLI into real stores, their tasks and
workers equal to the cluster's own state read in the same test."""

from __future__ import annotations

import gzip
import json
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from distributed import Client, LocalCluster, performance_report

from browser import needs_chromium
from daskscope.cli.main import cli
from daskscope.store import open_store
from daskscope.store.queries import profile_trees
from daskscope.tasklog.window import timeline_window
from daskscope.views import cluster_view
from webutil import serving

WORKERS, THREADS = 2, 2


def spin(i: int, seconds: float = 0.4) -> int:
    """Busy for ``seconds`` (the worker's profiler samples it)."""
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass
    return i


def fail(i: int) -> int:
    raise ValueError(f"failed on purpose: {i}")


def _scheduler_truth(dask_scheduler: Any) -> dict[str, Any]:
    return {
        "tasks": {str(k): [ts.state, ts.group.name] for k, ts in dask_scheduler.tasks.items()},
        "groups": {
            tg.name: {s: n for s, n in tg.states.items() if n}
            for tg in dask_scheduler.task_groups.values()
        },
        "workers": {a: [ws.nthreads, ws.memory_limit] for a, ws in dask_scheduler.workers.items()},
        "erred": sorted(str(k) for k, ts in dask_scheduler.tasks.items() if ts.state == "erred"),
    }


def _worker_truth(dask_worker: Any) -> list[list[Any]]:
    """The executions the worker itself remembers: its tasks with a compute action."""
    return [
        [str(k), ts.state == "error"]
        for k, ts in dask_worker.state.tasks.items()
        if any(s["action"] == "compute" for s in ts.startstops)
    ]


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Files written by Dask and the cluster's state when they were written."""
    import dask.array as da

    where = tmp_path_factory.mktemp("dumps")
    with (
        LocalCluster(
            n_workers=WORKERS, threads_per_worker=THREADS, processes=False, dashboard_address=":0"
        ) as cluster,
        Client(cluster) as client,
    ):
        report = where / "report.html"
        before_report = time.time()
        with performance_report(filename=str(report)):
            spun = client.map(spin, range(12))
            total = client.submit(sum, spun)
            client.gather([*spun, total])
        reported = sorted(str(f.key) for f in [*spun, total])
        # Dask's own compute profile of the report's window (no task ran since)
        profile = client.profile(start=before_report)
        kept = da.ones((40, 40), chunks=20)
        kept = (kept + kept.T).persist()
        kept.sum().compute()
        failed = client.submit(fail, 1)
        with pytest.raises(ValueError, match="failed on purpose"):
            failed.result()
        del spun, total  # released: the workers forget them, in their own time

        def truth() -> tuple[Any, Any]:
            return client.run_on_scheduler(_scheduler_truth), client.run(_worker_truth)

        # the state read before and after the dumps must agree: a cluster still letting
        # go of released tasks is dumped again
        deadline = time.monotonic() + 120
        while True:
            before = truth()
            client.dump_cluster_state(str(where / "dump"), format="msgpack")
            client.dump_cluster_state(str(where / "dump"), format="yaml")
            if truth() == before:
                break
            assert time.monotonic() < deadline, "the cluster never kept still"
        scheduler, workers = before
    # the other two forms, the same contents Dask wrote
    (where / "plain.msgpack").write_bytes(gzip.decompress((where / "dump.msgpack.gz").read_bytes()))
    (where / "zipped.yaml.gz").write_bytes(gzip.compress((where / "dump.yaml").read_bytes()))
    return {
        "dir": where,
        "report": report,
        "reported": reported,
        "profile": profile,
        "scheduler": scheduler,
        "executions": {(k, w, erred) for w, rows in workers.items() for k, erred in rows},
    }


def frames(tree: dict[str, Any]) -> Counter[tuple[str, str, int, int]]:
    """Each frame of a profile tree that has samples: name, file, line, samples."""
    found: Counter[tuple[str, str, int, int]] = Counter()
    pending = [tree]
    while pending:
        node = pending.pop()
        if node["count"]:
            d = node["description"]
            found[(d["name"], d["filename"], d["line_number"], node["count"])] += 1
        pending.extend(node["children"].values())
    return found


def run_import(url: str, path: Path) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["--database", url, "import", str(path), "--json"])
    return result.exit_code, result.stdout, result.stderr


def imported_ok(url: str, path: Path) -> dict[str, Any]:
    code, out, err = run_import(url, path)
    assert code == 0, err
    answer: dict[str, Any] = json.loads(out)
    return answer


def check_dump(url: str, answer: dict[str, Any], made: dict[str, Any]) -> None:
    truth = made["scheduler"]
    cid = answer["cluster_id"]
    with open_store(url) as store:
        view = cluster_view(store, cid, groups=None)
        window = timeline_window(store, cid, max_tasks=100_000)
    # executions: every one a worker remembered, on that worker, in its state
    assert window.raw
    assert any(erred for *_, erred in made["executions"]) and len(made["executions"]) >= 5
    stored = {(t.key, t.worker, t.state == "erred") for t in window.tasks}
    assert stored == made["executions"]
    assert len(window.tasks) == len(made["executions"])
    # each live group's task states are the scheduler's
    groups = {g.name: g.states for g in view.task_groups}
    for name, states in truth["groups"].items():
        assert groups[name] == states, name
    held = Counter(group for _, group in truth["tasks"].values())
    for name, count in held.items():
        assert sum(groups[name].values()) >= count
    # workers: the scheduler's addresses, threads and memory limits
    workers = {w.worker: [w.nthreads, w.memory_limit] for w in view.workers}
    assert workers == truth["workers"]
    assert view.cluster.workers_peak == WORKERS
    assert view.cluster.threads_peak == WORKERS * THREADS
    # the failed task, with Dask's exception
    assert sorted(e.key for e in view.errors) == truth["erred"]
    assert all("failed on purpose" in e.exception for e in view.errors)
    assert not view.running
    imported = view.cluster.imported
    assert imported is not None and imported["missing"] == answer["missing"]
    assert any("spans" in line for line in imported["missing"])


@pytest.mark.parametrize("name", ["plain.msgpack", "dump.yaml", "zipped.yaml.gz"])
def test_a_dump_in_each_form_imports_the_clusters_state(
    made: dict[str, Any], tmp_path: Path, name: str
) -> None:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    answer = imported_ok(url, made["dir"] / name)
    assert answer["format"] == f"dump_cluster_state ({'msgpack' if 'msgpack' in name else 'yaml'})"
    check_dump(url, answer, made)


def test_a_gzipped_msgpack_dump_imports_on_both_databases(
    made: dict[str, Any], database_url: str
) -> None:
    answer = imported_ok(database_url, made["dir"] / "dump.msgpack.gz")
    check_dump(database_url, answer, made)
    # the same file again stores nothing new: same ids, same rows
    again = imported_ok(database_url, made["dir"] / "dump.msgpack.gz")
    assert again["cluster_id"] == answer["cluster_id"]
    with open_store(database_url) as store:
        view = cluster_view(store, answer["cluster_id"], groups=None)
    assert len(view.workers) == WORKERS


def test_a_performance_report_imports_its_task_stream(made: dict[str, Any], tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    answer = imported_ok(url, made["report"])
    assert answer["format"] == "performance_report (html)"
    cid = answer["cluster_id"]
    with open_store(url) as store:
        view = cluster_view(store, cid, groups=None)
        window = timeline_window(store, cid, max_tasks=100_000)
    keys = sorted(t.key for t in window.tasks if any(a.action == "compute" for a in t.actions))
    assert keys == made["reported"]
    assert {t.worker for t in window.tasks} <= set(made["scheduler"]["workers"])
    assert view.cluster.tasks_executed == len(made["reported"])
    assert sum(g.tasks_executed for g in view.task_groups) == len(made["reported"])
    assert {w.worker for w in view.workers} <= set(made["scheduler"]["workers"])
    assert view.cluster.scheduler_address
    # the compute profile: the workers' profiler sampled the spins
    assert len(view.profiles) == 1 and view.profiles[0].samples > 0
    assert not any("profile" in line for line in answer["missing"])
    with open_store(url) as store:
        trees = profile_trees(store, cid)
    assert len(trees) == 1 and trees[0]["tree"]["count"] == view.profiles[0].samples
    assert trees[0]["tree"]["count"] == made["profile"]["count"]
    assert frames(trees[0]["tree"]) == frames(made["profile"])


BAD = {
    "notes.txt": (b"hello", "not a file daskscope can import"),
    "cut.msgpack.gz": (None, "not a whole gzip file"),
    "garbage.msgpack": (b"\xc1\xc1\xc1", "not msgpack"),
    "list.yaml": (b"- 1\n- 2\n", "not a dump_cluster_state file"),
    "other.yaml": (b"scheduler: {}\n", "not a dump_cluster_state file"),
    "broken.yaml": (b"a: [1, 2\n", "not YAML"),
    "page.html": (b"<html><body>hi</body></html>", "no Bokeh document"),
    "missing.yaml": (b"", "no such file"),
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_a_wrong_file_is_refused_and_nothing_stored_changes(
    made: dict[str, Any], tmp_path: Path, name: str
) -> None:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    good = imported_ok(url, made["dir"] / "dump.yaml")
    before = CliRunner().invoke(cli, ["--database", url, "show", good["cluster_id"], "--json"])
    content, expected = BAD[name]
    path = tmp_path / name
    if name == "cut.msgpack.gz":
        content = (made["dir"] / "dump.msgpack.gz").read_bytes()[:1000]
    if name != "missing.yaml":
        path.write_bytes(content or b"")
    code, _, err = run_import(url, path)
    assert code == 2
    assert err.startswith("error: ") and expected in err
    assert "expected" in err or "no such file" in err
    after = CliRunner().invoke(cli, ["--database", url, "show", good["cluster_id"], "--json"])
    listing = CliRunner().invoke(cli, ["--database", url, "clusters", "--json"])
    assert json.loads(listing.stdout)["clusters"][0]["id"] == good["cluster_id"]
    assert len(json.loads(listing.stdout)["clusters"]) == 1
    assert before.stdout == after.stdout


@needs_chromium
def test_the_cluster_page_says_it_is_imported_and_what_is_missing(
    made: dict[str, Any], tmp_path: Path, open_page: Any
) -> None:
    pytest.importorskip("playwright.sync_api")
    from daskscope.web import create_app

    url = f"sqlite:///{tmp_path / 'store.db'}"
    dumped = imported_ok(url, made["dir"] / "dump.yaml")
    reported = imported_ok(url, made["report"])
    app = create_app(url)
    try:
        with serving(app) as base:
            shown_files = (
                (dumped, "dump.yaml", len(made["executions"])),
                (reported, "report.html", len(made["reported"])),
            )
            for answer, file, executions in shown_files:
                page = open_page()
                page.goto(f"{base}/clusters/{answer['cluster_id']}")
                note = page.locator("#imported")
                note.wait_for(timeout=120_000)
                assert file in note.inner_text() and answer["format"] in note.inner_text()
                shown = page.locator("#imported-missing li").all_inner_texts()
                assert [" ".join(s.split()) for s in shown] == answer["missing"]
                # the imported task log draws on the timeline like a recorded one's
                page.goto(f"{base}/clusters/{answer['cluster_id']}/timeline")
                page.wait_for_function(
                    "() => document.body.dataset.window !== undefined"
                    " && Number(timeline.dataset.paints) > 0",
                    timeout=120_000,
                )
                tasks = page.locator('[data-stat="tasks"]').inner_text()
                assert tasks == f"{executions:,}"
    finally:
        app.state.store.close()
