"""Ownership on every write (issue 10, point 6), against a real ``daskscope serve --auth``
process on SQLite and PostgreSQL: no account appends to another's workflow run, and no
member relabels or writes to another member's cluster."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from daskscope.model import ClusterRecord
from daskscope.store import cluster_detail, open_store, table_counts
from daskscope.store.identity import add_user, create_account, create_token
from daskscope.store.runs import run_detail
from daskscope.wire import encode_batch
from factories import make_cluster, make_group, make_workflow_chunk, make_workflow_run
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
    values: dict = {"id": cluster_id, "core_seconds": 240.0, **changes}
    return make_cluster(cluster_id, start=1.8e9, **values)


def test_no_account_appends_chunks_to_another_accounts_run(team: Team) -> None:
    alices = make_workflow_run("alice-c")
    ok = send(team, "alice", [cluster("alice-c"), alices, make_workflow_chunk(alices, 0)])
    assert ok.status_code == 200, ok.text
    assert send(team, "carol", [cluster("carol-c")]).status_code == 200

    # carol knows the run's id: her chunks, on her own cluster or on none, are refused
    for cluster_id in ("carol-c", None):
        refused = send(team, "carol", [make_workflow_chunk(alices.id, 7, cluster_id=cluster_id)])
        assert refused.status_code == 409, refused.text
        assert "records[0].data.run_id" in refused.json()["error"]["message"]
    # and so is a run record of hers under the same id
    taken = send(team, "carol", [dataclasses.replace(make_workflow_run("carol-c"), id=alices.id)])
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
    group = make_group("alice-c", "inc-1")
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
    bobs = make_workflow_run(None, id="bobs-local-run", user="x")
    sent = send(team, "bob", [bobs, make_workflow_chunk(bobs, 0)])
    assert sent.status_code == 200, sent.text
    assert seen_runs(team, "bob") == [bobs.id]
    assert seen_runs(team, "alice") == [bobs.id]  # the same account sees it
    assert seen_runs(team, "carol") == []

    # neither another account nor another member writes to it
    for who in ("carol", "alice"):
        overwrite = send(team, who, [dataclasses.replace(bobs, name="mine now")])
        assert overwrite.status_code == 409, overwrite.text
        assert "records[0].data.id" in overwrite.json()["error"]["message"]
        appended = send(team, who, [make_workflow_chunk(bobs, 9)])
        assert appended.status_code == 409, appended.text
    with open_store(team.server.database) as store:
        detail = run_detail(store, bobs.id)
    assert detail["run"]["name"] == "analysis"
    assert (detail["run"]["account"], detail["run"]["user"]) == ("atlas", "bob")
    assert [c["chunk_index"] for c in detail["chunks"]] == [0]
