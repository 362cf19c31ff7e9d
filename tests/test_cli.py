"""The command line through click's CliRunner, and one real ``daskscope demo`` run."""

from __future__ import annotations

import hashlib
import inspect
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from distributed import Client, LocalCluster
from distributed.diagnostics.plugin import SchedulerPlugin

from daskscope import model
from daskscope.cli import demo
from daskscope.cli.main import cli
from daskscope.store import open_store, write_records
from factories import (
    make_cluster,
    make_computation,
    make_error,
    make_event,
    make_group,
    make_prefix,
    make_span,
    make_span_metric,
    make_worker_sample,
)

CLUSTER_ID = "0f3c9a52-1111-4e2b-9c55-6a7e0d1c2b3a"
T0 = 1_700_000_000.0


def _records() -> list[model.Record]:
    cluster = make_cluster(
        "fixture cluster",
        start=T0,
        id=CLUSTER_ID,
        account="default",
        scheduler_address="tcp://127.0.0.1:8786",
        python_version="3.11",
        stopped_at=T0 + 3600,
        last_seen_at=T0 + 3600,
        workers_peak=2,
        threads_peak=4,
        memory_limit_peak=8 * 2**30,
        core_seconds=4 * 3600.0,
        memory_limit_byte_seconds=8 * 2**30 * 3600.0,
        tasks_executed=40,
        tasks_erred=1,
        compute_seconds=3600.0,
        bytes_processed=3 * 2**20,
    )
    worker = "tcp://127.0.0.1:40001"
    return [
        cluster,
        make_computation(
            cluster,
            id="comp-1",
            started_at=T0 + 10,
            stopped_at=T0 + 20,
            code=["result = frame.groupby('name').x.mean().compute()  # fixture call\n"],
            tasks_executed=40,
            tasks_erred=1,
            group_count=1,
        ),
        make_group(
            cluster,
            "mean-abc",
            id="tg-1",
            computation_id="comp-1",
            span_id="s-root",
            tasks_total=41,
            tasks_executed=40,
            tasks_erred=1,
            nbytes_total=3 * 2**20,
            duration_s=12.0,
            durations={"compute": 11.0, "transfer": 1.0},
            started_at=T0 + 11,
            stopped_at=T0 + 19,
        ),
        make_prefix(
            cluster,
            "mean",
            id="tp-1",
            group_count=1,
            tasks_executed=40,
            tasks_erred=1,
            nbytes_total=3 * 2**20,
            duration_s=12.0,
            durations={"compute": 11.0, "transfer": 1.0},
        ),
        make_span(
            cluster,
            "s-root",
            id="span-root",
            name=["analysis"],
            enqueued_at=T0 + 10,
            duration_s=12.0,
        ),
        make_span(
            cluster,
            "s-child",
            id="span-child",
            parent_span_id="s-root",
            name=["analysis", "load"],
            enqueued_at=T0 + 11,
            duration_s=5.0,
        ),
        make_span_metric(cluster, "s-root", "mean", "thread-cpu", "seconds", 7.0, id="m-1"),
        make_span_metric(cluster, "s-child", "read", "disk-read", "bytes", 2**20, id="m-2"),
        make_error(
            cluster,
            "mean-abc-3",
            id="err-1",
            at=T0 + 15,
            group="mean-abc",
            worker=worker,
            traceback='  File "x.py", line 3, in f\n    1 / 0\n',
        ),
        make_event(cluster, "cluster-started", id="ev-1"),
        make_worker_sample(
            cluster,
            worker,
            T0 + 5,
            id="ws-1",
            nthreads=2,
            memory_limit=4 * 2**30,
            memory=300 * 2**20,
        ),
    ]


@pytest.fixture
def db(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'fixture.db'}"
    with open_store(url) as store:
        write_records(store, _records())
    return url


def run(*args: str, env: dict[str, str] | None = None):
    return CliRunner().invoke(cli, list(args), env=env, catch_exceptions=False)


def assert_one_line_error(result, *, contains: str = "") -> None:
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ")
    assert "Traceback" not in result.output
    assert contains.lower() in lines[0].lower()


def test_clusters_json_and_table(db: str) -> None:
    result = run("--database", db, "clusters", "--json")
    assert result.exit_code == 0, result.output
    (row,) = json.loads(result.stdout)["clusters"]
    assert row["id"] == CLUSTER_ID and row["statistics"]["duration_s"] == 3600.0
    # 4 core-hours x 0.04 + 8 GiB-hours x 0.005 (the shipped default rates)
    assert row["statistics"]["cost"]["total"] == pytest.approx(0.2)
    assert row["statistics"]["utilisation"] == 0.25

    table = run("--database", db, "clusters").stdout
    assert CLUSTER_ID[:8] in table and "fixture cluster" in table and "alice" in table
    assert "1 h 0 min" in table and "3.0 MiB" in table and "0.2000 USD" in table


def test_database_from_environment(db: str) -> None:
    result = run("clusters", "--json", env={"DASKSCOPE_DATABASE": db})
    assert [r["id"] for r in json.loads(result.stdout)["clusters"]] == [CLUSTER_ID]


def test_show_json_is_the_cluster_view(db: str) -> None:
    result = run("--database", db, "show", CLUSTER_ID[:6], "--json")
    assert result.exit_code == 0, result.output
    detail = json.loads(result.stdout)
    assert detail["cluster"]["id"] == CLUSTER_ID
    assert detail["statistics"]["core_hours"] == 4.0
    assert detail["statistics"]["memory_gib_hours"] == pytest.approx(8.0)
    assert {"computations", "task_groups", "spans", "fine_metrics", "errors"} <= set(detail)
    assert detail["computations"][0]["task_groups"] == ["mean-abc"]


def test_show_renders_every_section(db: str) -> None:
    result = run("--database", db, "show", CLUSTER_ID)
    assert result.exit_code == 0, result.output
    out = result.stdout
    for text in (
        "statistics",
        "task prefixes",
        "groupby('name')",  # the computation's code
        "task groups",
        "mean-abc",
        "analysis",
        "load",
        "fine metrics",
        "thread-cpu",
        "7.0 s",
        "disk-read (bytes)",
        "1.0 MiB",
        "ZeroDivisionError",
        "1 / 0",
        "tcp://127.0.0.1:40001",
        "300.0 MiB",
        "cluster-started",
        "25.0 %",
    ):
        assert text in out, text


def test_unknown_cluster_id(db: str) -> None:
    unknown = run("--database", db, "show", "ffffffff")
    assert_one_line_error(unknown, contains="no cluster with id 'ffffffff'")
    assert "run `daskscope clusters` to list ids" in unknown.stderr  # the CLI's own hint
    assert_one_line_error(run("--database", db, "show", "ffffffff", "--json"))
    short = run("--database", db, "show", "0f3")
    assert_one_line_error(short, contains="a prefix needs at least 4 characters")


def test_ambiguous_prefix_says_give_more(db: str) -> None:
    twin = _records()[0]
    twin.id = CLUSTER_ID[:8] + "-twin"
    with open_store(db) as store:
        write_records(store, [twin])
    result = run("--database", db, "show", CLUSTER_ID[:6])
    assert_one_line_error(result, contains="matches several clusters")
    assert "give more of the id" in result.stderr and twin.id in result.stderr


def test_corrupt_database_file_is_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "corrupt.db"
    path.write_bytes(os.urandom(8192))
    before = hashlib.sha256(path.read_bytes()).hexdigest()
    url = f"sqlite:///{path}"
    for args in (["clusters"], ["show", CLUSTER_ID], ["db", "upgrade"], ["db", "current"]):
        result = run("--database", url, *args)
        # the store's fact, then the command line's own hint
        assert_one_line_error(result, contains="is not a daskscope database")
        assert "move the file aside" in result.stderr and "--database URL" in result.stderr
    assert hashlib.sha256(path.read_bytes()).hexdigest() == before


def test_unreachable_postgres() -> None:
    result = run("--database", "postgresql://u@127.0.0.1:1/x", "clusters")
    assert_one_line_error(result)


@pytest.mark.parametrize("url", ["not a url", "mysql://u@localhost/x", "nosuchdb://x"])
def test_bad_url(url: str) -> None:
    assert_one_line_error(run("--database", url, "clusters"))


def test_demo_checks_the_store_before_starting_a_cluster(tmp_path: Path) -> None:
    url = "postgresql://u@127.0.0.1:1/x"
    assert_one_line_error(run("--database", url, "demo", "--no-serve"))


def test_usage_errors_stay_clicks(db: str) -> None:
    result = run("--database", db, "show")
    assert result.exit_code == 2
    assert "Usage:" in result.stderr and "Missing argument" in result.stderr
    assert run("--database", db, "clusters", "--limit", "0").exit_code == 2


def test_db_upgrade_and_current(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'new.db'}"
    assert run("--database", url, "db", "current").stdout.startswith("none")
    upgraded = run("--database", url, "db", "upgrade")
    assert upgraded.exit_code == 0 and "upgraded" in upgraded.stdout
    with open_store(url, upgrade=False) as store:
        head = store.head_revision()
    assert run("--database", url, "db", "current").stdout.strip() == head
    assert "already at revision" in run("--database", url, "db", "upgrade").stdout


class _CountTransitions(SchedulerPlugin):
    """Independent ground truth for the demo: what the scheduler itself ran."""

    name = "count-transitions"

    def __init__(self) -> None:
        self.finished: dict[str, int] = {}
        self.keys: set = set()

    def transition(self, key, start, finish, *args, **kwargs) -> None:
        if start == "processing" and finish in ("memory", "erred"):
            self.finished[finish] = self.finished.get(finish, 0) + 1
            self.keys.add(key)


def test_demo_workload_ground_truth() -> None:
    with (
        LocalCluster(n_workers=2, threads_per_worker=1, processes=False) as cluster,
        Client(cluster) as client,
    ):
        client.register_plugin(_CountTransitions())
        facts = demo.run_demo_workload(client, progress=False)
        finished, keys = client.run_on_scheduler(
            lambda dask_scheduler: (
                dask_scheduler.plugins["count-transitions"].finished,
                len(dask_scheduler.plugins["count-transitions"].keys),
            )
        )
    assert facts["failing_task_failed"] is True
    assert finished["erred"] == 1
    assert keys == facts["keys"]
    assert facts["parts"]["dataframe groupby"]["rows"] == 20 * 86400  # 20 days at 1 s


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "daskscope.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=240,
    )


def test_demo_end_to_end(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'x.db'}"
    done = _cli("demo", "--no-serve", "--database", url)  # the form
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    submitted = int(re.search(r"(\d+) tasks submitted", done.stdout).group(1))

    # what it stored, read back through the CLI in this process (no new Python each)
    listed = run("--database", url, "clusters", "--json")
    assert listed.exit_code == 0, listed.stderr
    (row,) = json.loads(listed.stdout)["clusters"]
    shown = run("--database", url, "show", row["id"], "--json")
    assert shown.exit_code == 0, shown.stderr
    detail = json.loads(shown.stdout)

    cluster = detail["cluster"]
    assert cluster["tasks_executed"] > 0
    assert cluster["tasks_erred"] == 1
    assert cluster["tasks_executed"] + cluster["tasks_erred"] == submitted
    (error,) = detail["errors"]
    assert demo.DEMO_FAILURE_MESSAGE in error["exception"]
    names = {tuple(s["name"]) for s in detail["spans"]}
    assert {("analysis",), ("analysis", "load"), ("analysis", "reduce")} <= names
    assert ("dataframe groupby",) in names
    code = "\n".join(snippet for c in detail["computations"] for snippet in c["code"])
    calling_line = "persisted = client.persist(result)"
    assert calling_line in inspect.getsource(demo)
    assert calling_line in code
    assert detail["statistics"]["tasks_executed"] == cluster["tasks_executed"]
    # the human summary was printed too, and --no-serve printed no dashboard line
    assert "statistics" in done.stdout and "dashboard" not in done.stdout
