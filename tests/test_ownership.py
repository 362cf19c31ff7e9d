"""Ownership on every write (issue 10, point 6), against a real ``daskscope serve --auth``
process on SQLite and PostgreSQL: no account appends to another's workflow run, and no
member relabels or writes to another member's cluster."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from daskscope.model import (
    ClusterRecord,
    TaskGroupRecord,
    WorkflowChunkRecord,
    WorkflowRunRecord,
    stable_id,
)
from daskscope.store import cluster_detail, open_store, table_counts
from daskscope.store.identity import add_user, create_account, create_token
from daskscope.store.runs import run_detail
from daskscope.wire import encode_batch
from pgserver import free_port
from test_ingest import Server


@dataclasses.dataclass
class Team:
    server: Server
    tokens: dict[str, str]


@pytest.fixture
def team(database_url: str, tmp_path: Path) -> Iterator[Team]:
    with open_store(database_url) as store:
        create_account(store, "atlas")
        create_account(store, "cms")
        add_user(store, "alice", account="atlas")
        add_user(store, "bob", account="atlas")
        add_user(store, "carol", account="cms")
        tokens = {name: create_token(store, name) for name in ("alice", "bob", "carol")}
    server = Server(database_url, free_port(), tmp_path / "server.log", "--auth")
    server.start()
    try:
        yield Team(server, tokens)
    finally:
        server.stop()


def send(team: Team, who: str, records: list) -> httpx.Response:
    return httpx.post(
        f"{team.server.url}/api/v1/ingest",
        content=encode_batch(records),
        headers={
            "Authorization": f"Bearer {team.tokens[who]}",
            "Content-Type": "application/json",
        },
        timeout=30,
    )


def cluster(cluster_id: str, **changes: object) -> ClusterRecord:
    values: dict = dict(
        id=cluster_id, name=cluster_id, account="x", user="x", scheduler_address="tcp://s:1",
        dask_version="1", distributed_version="1", python_version="3",
        started_at=1.8e9, last_seen_at=1.8e9 + 60, core_seconds=240.0,
    )  # fmt: skip
    values.update(changes)
    return ClusterRecord(**values)


def run(cluster_id: str) -> WorkflowRunRecord:
    return WorkflowRunRecord(
        id=stable_id("run", cluster_id), cluster_id=cluster_id, name="analysis",
        backend="dask", started_at=1.8e9, stopped_at=1.8e9 + 10, wall_time_s=10.0,
        chunk_count=1,
    )  # fmt: skip


def chunk(run_id: str, cluster_id: str | None, index: int) -> WorkflowChunkRecord:
    return WorkflowChunkRecord(
        id=stable_id(run_id, "chunk", index, cluster_id),
        run_id=run_id,
        cluster_id=cluster_id,
        chunk_index=index,
        events=1000,
    )


def test_no_account_appends_chunks_to_another_accounts_run(team: Team) -> None:
    alices = run("alice-c")
    ok = send(team, "alice", [cluster("alice-c"), alices, chunk(alices.id, "alice-c", 0)])
    assert ok.status_code == 200, ok.text
    assert send(team, "carol", [cluster("carol-c")]).status_code == 200

    # carol knows the run's id: her chunks, on her own cluster or on none, are refused
    for cluster_id in ("carol-c", None):
        refused = send(team, "carol", [chunk(alices.id, cluster_id, 7)])
        assert refused.status_code == 409, refused.text
        assert "records[0].data.run_id" in refused.json()["error"]["message"]
    # and so is a run record of hers under the same id
    taken = send(team, "carol", [dataclasses.replace(run("carol-c"), id=alices.id)])
    assert taken.status_code == 409, taken.text

    with open_store(team.server.database) as store:
        detail = run_detail(store, alices.id)
    assert [c["chunk_index"] for c in detail["chunks"]] == [0]
    assert detail["run"]["cluster_id"] == "alice-c"


def test_a_cluster_keeps_its_member(team: Team) -> None:
    assert send(team, "alice", [cluster("alice-c")]).status_code == 200
    # bob, of the same account, sends alice's cluster id: relabelled and inflated
    relabel = send(team, "bob", [cluster("alice-c", core_seconds=1e12)])
    assert relabel.status_code == 409, relabel.text
    assert "records[0].data.id" in relabel.json()["error"]["message"]
    assert "another member" in relabel.json()["error"]["message"]
    group = TaskGroupRecord(
        id=stable_id("alice-c", "tg"), cluster_id="alice-c", name="inc-1", prefix="inc"
    )
    written = send(team, "bob", [group])
    assert written.status_code == 409, written.text
    assert "records[0].data.cluster_id" in written.json()["error"]["message"]

    with open_store(team.server.database) as store:
        stored = cluster_detail(store, "alice-c")["cluster"]
        assert (stored["user"], stored["core_seconds"]) == ("alice", 240.0)
        assert table_counts(store, "alice-c")["task_groups"] == 0
    # alice herself still writes to it
    assert send(team, "alice", [cluster("alice-c", core_seconds=480.0), group]).status_code == 200


def seen_runs(team: Team, who: str) -> list[str]:
    response = httpx.get(
        f"{team.server.url}/api/v1/runs",
        headers={"Authorization": f"Bearer {team.tokens[who]}"},
        timeout=30,
    )
    assert response.status_code == 200, response.text
    return [r["id"] for r in response.json()["runs"]]


def test_a_run_without_a_cluster_is_its_senders(team: Team) -> None:
    """A local run (no recorder, no cluster) belonged to nobody: with authentication no
    member could see it, and anyone could overwrite it or add chunks to it."""
    bobs = dataclasses.replace(run("none"), id="bobs-local-run", cluster_id=None, user="x")
    sent = send(team, "bob", [bobs, chunk(bobs.id, None, 0)])
    assert sent.status_code == 200, sent.text
    assert seen_runs(team, "bob") == [bobs.id]
    assert seen_runs(team, "alice") == [bobs.id]  # the same account sees it
    assert seen_runs(team, "carol") == []

    # neither another account nor another member writes to it
    for who in ("carol", "alice"):
        overwrite = send(team, who, [dataclasses.replace(bobs, name="mine now")])
        assert overwrite.status_code == 409, overwrite.text
        assert "records[0].data.id" in overwrite.json()["error"]["message"]
        appended = send(team, who, [chunk(bobs.id, None, 9)])
        assert appended.status_code == 409, appended.text
    with open_store(team.server.database) as store:
        detail = run_detail(store, bobs.id)
    assert detail["run"]["name"] == "analysis"
    assert (detail["run"]["account"], detail["run"]["user"]) == ("atlas", "bob")
    assert [c["chunk_index"] for c in detail["chunks"]] == [0]
