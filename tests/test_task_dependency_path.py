"""The critical path and what-if through the task dependencies the task log records
(issue 25): the common ``x = delayed(f)(x)`` loop keeps its chain inside one task group,
which the group model cannot see. Real runs on in-process clusters, each figure against
Dask's task stream of the same run and the sleeps the tasks made: the chain on its own;
the same chain recorded without a task log (the group model, and the view saying so);
and a computation whose first group's task log was written, as by a daskscope from
before triggers were kept, without dependencies (both models at once)."""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dask
import pyarrow as pa
import pyarrow.ipc as ipc
import pytest
import sqlalchemy as sa
from click.testing import CliRunner
from distributed import Client, LocalCluster, get_task_stream

import daskscope
from daskscope.cli.main import cli
from daskscope.store import cluster_detail, open_store, write_records
from daskscope.store import schema as s
from daskscope.tasklog.segments import FORMAT, decode_segment
from daskscope.views.critical_path import AmbiguousComputation, critical_path_view
from daskscope.web import create_app
from factories import T0, make_cluster, make_computation
from webutil import call

#: The loop's sleeps: 8 links, 3.0 s in all, in one task group ("link")
SECONDS = [0.25, 0.5, 0.25, 0.5, 0.25, 0.5, 0.375, 0.375]


def link(x: int, seconds: float) -> int:
    time.sleep(seconds)
    return x + 1


def compute_by_key(stream: list[dict[str, Any]]) -> dict[str, float]:
    return {
        str(t["key"]): sum(
            ss["stop"] - ss["start"] for ss in t["startstops"] if ss["action"] == "compute"
        )
        for t in stream
    }


def record_chain(url: str, *, task_log: bool) -> dict[str, Any]:
    """The loop on two workers of two threads, recorded into ``url``; Dask's task stream
    of the same run is kept as the ground truth."""
    with (
        dask.config.set({"daskscope.tasks.enabled": task_log}),
        LocalCluster(
            n_workers=2,
            threads_per_worker=2,
            processes=False,
            dashboard_address=":0",
            silence_logs=logging.CRITICAL,
        ) as cluster,
        Client(cluster) as client,
    ):
        cluster_id = daskscope.register(client, database=url)
        x: Any = 0
        for seconds in SECONDS:
            x = dask.delayed(link)(x, seconds)
        with get_task_stream(client) as stream:
            assert x.compute() == len(SECONDS)
        assert daskscope.flush(client)["write_failures"] == 0
    with open_store(url) as store:
        (computation,) = [
            c for c in cluster_detail(store, cluster_id)["computations"] if c["tasks_executed"]
        ]
    return {
        "url": url,
        "cluster_id": cluster_id,
        "computation_id": computation["id"],
        "compute": compute_by_key(stream.data),
    }


@pytest.fixture(scope="module")
def chain(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return record_chain(f"sqlite:///{tmp_path_factory.mktemp('chain') / 'store.db'}", task_log=True)


@pytest.fixture(scope="module")
def chain_without_log(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    url = f"sqlite:///{tmp_path_factory.mktemp('no-log') / 'store.db'}"
    return record_chain(url, task_log=False)


def test_a_chain_inside_one_group_is_as_long_as_its_links(chain: dict[str, Any]) -> None:
    """The issue's loop read 0.614 s through its one group, and 4 threads 1.13 s; the
    links' compute seconds add up to the path, and no estimate is shorter."""
    with open_store(chain["url"]) as store:
        view = critical_path_view(store, chain["cluster_id"], chain["computation_id"], threads=8)
    assert view is not None
    truth = sum(chain["compute"].values())
    assert len(chain["compute"]) == len(SECONDS)
    assert view.model == "task dependencies" and view.model_note is None
    assert view.path == ["link"] and view.path_tasks == len(SECONDS)
    assert view.critical_path_s == pytest.approx(truth, abs=1e-5)
    assert view.critical_path_s >= sum(SECONDS)  # a sleep never ends early
    # nothing beats the chain: not 2, 4 or 8 threads, nor the count measured
    assert view.requested is not None
    assert view.requested.wall_s == pytest.approx(view.critical_path_s)
    assert view.estimates[0].threads == 1
    assert view.estimates[0].wall_s == pytest.approx(truth, abs=1e-4)
    assert view.measured_threads in [e.threads for e in view.estimates]
    assert all(e.wall_s >= view.critical_path_s - 1e-9 for e in view.estimates)
    [group] = view.groups
    assert group.model == "task dependencies" and group.on_path
    assert group.tasks == len(SECONDS)
    assert group.longest_s == pytest.approx(max(chain["compute"].values()), abs=1e-5)
    # the chain that happened is the same eight links
    assert len(view.task_path) == len(SECONDS)


def test_the_cli_json_and_page_say_which_model_and_take_id_starts(chain: dict[str, Any]) -> None:
    cid, comp = chain["cluster_id"], chain["computation_id"]
    base = ["--database", chain["url"], "critical-path"]
    text = CliRunner().invoke(cli, [*base, cid[:8], comp[:8]])
    assert text.exit_code == 0, text.output
    assert "model: through the task dependencies" in text.output
    assert f"of the wall time) through {len(SECONDS)} tasks" in text.output
    printed = CliRunner().invoke(cli, [*base, cid[:8], comp[:8], "--json"])
    assert printed.exit_code == 0, printed.output
    data = json.loads(printed.output)
    assert data["computation_id"] == comp
    assert data["model"] == "task dependencies" and data["path_tasks"] == len(SECONDS)
    assert data["groups"][0]["model"] == "task dependencies"
    app = create_app(chain["url"])
    try:
        answer = call(app, "GET", f"/api/v1/clusters/{cid}/computations/{comp[:8]}/critical-path")
        assert answer.status_code == 200, answer.text
        assert answer.json()["model"] == "task dependencies"
        assert answer.json()["critical_path_s"] == pytest.approx(data["critical_path_s"])
        page = call(app, "GET", f"/clusters/{cid}/computations/{comp[:8]}")
        assert page.status_code == 200
        assert '<b data-stat="model">task dependencies</b>' in page.text
        assert 'id="whatif-model"' in page.text and "through the task dependencies" in page.text
    finally:
        app.state.store.close()


def test_without_a_task_log_the_group_model_says_so(chain_without_log: dict[str, Any]) -> None:
    """No task log: the group's recorded compute seconds spread over its 8 tasks, each
    group a stage; the view, the command and the page name the model and why."""
    run = chain_without_log
    cid, comp = run["cluster_id"], run["computation_id"]
    with open_store(run["url"]) as store:
        view = critical_path_view(store, cid, comp)
    assert view is not None
    assert view.model == "task groups" and view.durations_from == "group totals"
    assert view.model_note == "the task log holds no task of this computation"
    assert view.path_tasks is None and view.path == ["link"]
    # the group model's answer: the group's mean task (its total from Dask's groups)
    truth = sum(run["compute"].values())
    assert view.critical_path_s == pytest.approx(truth / len(SECONDS), rel=1e-6)
    assert all(g.model == "task group" for g in view.groups)
    out = CliRunner().invoke(cli, ["--database", run["url"], "critical-path", cid, comp])
    assert out.exit_code == 0, out.output
    assert "model: through the task groups as stages" in out.output
    assert "the task log holds no task of this computation" in out.output
    app = create_app(run["url"])
    try:
        page = call(app, "GET", f"/clusters/{cid}/computations/{comp}")
        assert page.status_code == 200
        assert '<p id="path-model" class="notice">' in page.text
        assert '<b data-stat="model">task groups</b>' in page.text
    finally:
        app.state.store.close()


# -- both models in one computation ------------------------------------------------------

#: in-process workers run tasks in this process's threads: the test and the gate share them
GATE_STARTED = threading.Event()
GATE_OPEN = threading.Event()


def load(i: int, seconds: float) -> int:
    time.sleep(seconds)
    return i


def gate(*loads: int) -> int:
    GATE_STARTED.set()
    assert GATE_OPEN.wait(timeout=300), "the test never opened the gate"
    return sum(loads)


def without_triggers(url: str, segment_id: str) -> None:
    """Rewrite a stored segment as a daskscope from before triggers were kept wrote it:
    the same executions, without the three trigger columns."""
    t = s.task_segments.c
    with open_store(url) as store, store.engine.begin() as conn:
        fmt, payload = conn.execute(sa.select(t.format, t.payload).where(t.id == segment_id)).one()
        assert fmt == FORMAT
        payload = bytes(payload)
        size = int.from_bytes(payload[:8], "little")
        inner = pa.decompress(payload[8:], decompressed_size=size, codec="zstd", asbytes=True)
        length = int.from_bytes(inner[:8], "little")
        rows = ipc.open_stream(pa.py_buffer(inner[8 : 8 + length])).read_all()
        rows = rows.drop_columns(["trigger_group", "trigger_form", "trigger_rest"])
        sink = pa.BufferOutputStream()
        with ipc.new_stream(sink, rows.schema) as writer:
            writer.write_table(rows)
        written = sink.getvalue().to_pybytes()
        inner = len(written).to_bytes(8, "little") + written + inner[8 + length :]
        packed = pa.compress(inner, codec="zstd", asbytes=True)
        conn.execute(
            sa.update(s.task_segments)
            .where(t.id == segment_id)
            .values(payload=len(inner).to_bytes(8, "little") + packed)
        )


@pytest.fixture(scope="module")
def mixed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """Four loads, a gate that waits for all of them, then three chained steps. The
    recorder's log is flushed while the gate waits, so the loads are a segment of their
    own, then rewritten without triggers."""
    url = f"sqlite:///{tmp_path_factory.mktemp('mixed') / 'store.db'}"
    GATE_STARTED.clear()
    GATE_OPEN.clear()
    loads = [dask.delayed(load)(i, 0.1 * (i + 1), dask_key_name=f"load-{i}") for i in range(4)]
    x: Any = dask.delayed(gate)(*loads, dask_key_name="gate")
    for i in range(3):
        x = dask.delayed(link)(x, 0.2, dask_key_name=f"step-{i}")
    with (
        dask.config.set({"daskscope.flush-interval": "1h"}),
        LocalCluster(
            n_workers=1,
            threads_per_worker=4,
            processes=False,
            dashboard_address=":0",
            silence_logs=logging.CRITICAL,
        ) as cluster,
        Client(cluster) as client,
    ):
        cluster_id = daskscope.register(client, database=url)
        with get_task_stream(client) as stream:
            future = client.compute(x)
            try:
                assert GATE_STARTED.wait(timeout=300)
                assert daskscope.flush(client)["write_failures"] == 0  # seals the loads
            finally:
                GATE_OPEN.set()
            assert future.result() == 6 + 3
        assert daskscope.flush(client)["write_failures"] == 0
    with open_store(url) as store:
        (computation,) = [
            c for c in cluster_detail(store, cluster_id)["computations"] if c["tasks_executed"]
        ]
        held = []
        t = s.task_segments.c
        with store.engine.connect() as conn:
            rows = conn.execute(
                sa.select(t.id, t.format, t.payload).where(t.cluster_id == cluster_id)
            ).all()
        for segment_id, fmt, payload in rows:
            seg = decode_segment(fmt, bytes(payload))
            held.append((segment_id, {seg.key(r) for r in range(len(seg))}))
    [(first_id, first_keys)] = [h for h in held if "load-0" in h[1]]
    assert first_keys == {f"load-{i}" for i in range(4)}, held
    without_triggers(url, first_id)
    yield {
        "url": url,
        "cluster_id": cluster_id,
        "computation_id": computation["id"],
        "compute": compute_by_key(stream.data),
    }


def test_a_log_partly_without_dependencies_mixes_the_models(mixed: dict[str, Any]) -> None:
    with open_store(mixed["url"]) as store:
        view = critical_path_view(store, mixed["cluster_id"], mixed["computation_id"])
    assert view is not None
    compute = mixed["compute"]
    assert view.model == "mixed"
    assert view.model_note is not None
    assert "1 of 3 task groups are stages" in view.model_note
    assert "written before daskscope kept dependencies: load" in view.model_note
    models = {g.name: g.model for g in view.groups}
    assert models == {
        "load": "task group",
        "gate": "task dependencies",
        "step": "task dependencies",
    }
    # the gate waits for the whole stage of loads (its longest), then the steps chain
    truth = max(compute[f"load-{i}"] for i in range(4)) + compute["gate"]
    truth += sum(compute[f"step-{i}"] for i in range(3))
    assert view.critical_path_s == pytest.approx(truth, abs=1e-5)
    assert view.path == ["load", "gate", "step"] and view.path_tasks == 1 + 1 + 3
    assert view.estimates[0].wall_s == pytest.approx(sum(compute.values()), abs=1e-4)
    assert all(e.wall_s >= view.critical_path_s - 1e-9 for e in view.estimates)
    out = CliRunner().invoke(
        cli,
        ["--database", mixed["url"], "critical-path", mixed["cluster_id"], mixed["computation_id"]],
    )
    assert out.exit_code == 0, out.output
    assert "model: through the task dependencies, and the task groups as stages" in out.output


def test_a_start_of_two_computation_ids_is_refused_with_what_to_do(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    cluster = make_cluster("two alike")
    with open_store(url) as store:
        write_records(
            store,
            [
                cluster,
                make_computation(cluster, 0, id="abc-1", stopped_at=T0 + 2),
                make_computation(cluster, 1, id="abc-2", stopped_at=T0 + 3),
            ],
        )
        with pytest.raises(AmbiguousComputation, match="the start of more than one"):
            critical_path_view(store, cluster.id, "abc")
        view = critical_path_view(store, cluster.id, "abc-2")
        assert view is not None and view.computation_id == "abc-2"
        assert view.model == "task groups" and view.path == []
        assert critical_path_view(store, cluster.id, "abd") is None
    out = CliRunner().invoke(cli, ["--database", url, "critical-path", cluster.id, "abc"])
    assert out.exit_code == 2 and "give more of its id" in out.output
    app = create_app(url)
    try:
        answer = call(app, "GET", f"/api/v1/clusters/{cluster.id}/computations/abc/critical-path")
        assert answer.status_code == 400
        assert "the start of more than one" in answer.json()["error"]["message"]
    finally:
        app.state.store.close()
