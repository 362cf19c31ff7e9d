"""Workflow runs follow the cluster's sink: with a daskscope server configured (or the
cluster's recorder registered with one), a MetricsCollector run goes to that server
under the token's account, not to the client's local SQLite file; members see their
runs with authentication on, other accounts do not."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import dask
import httpx
import pytest
from distributed import Client, LocalCluster

import daskscope
from daskscope import MetricsCollector, track_metrics
from daskscope.store import open_store
from daskscope.store.identity import add_user, create_account, create_token
from daskscope.store.runs import list_runs
from pgserver import free_port
from test_ingest import Server, count_events


@pytest.fixture
def team(tmp_path: Path) -> Iterator[tuple[Server, dict[str, str]]]:
    """A server with authentication: alice (admin) and bob in atlas, carol in cms."""
    database = f"sqlite:///{tmp_path / 'server.db'}"
    with open_store(database) as store:
        create_account(store, "atlas")
        create_account(store, "cms")
        add_user(store, "alice", account="atlas", admin=True)
        add_user(store, "bob", account="atlas")
        add_user(store, "carol", account="cms")
        tokens = {name: create_token(store, name) for name in ("alice", "bob", "carol")}
    server = Server(database, free_port(), tmp_path / "server.log", "--auth")
    server.start()
    yield server, tokens
    server.stop()


def runs_seen(server: Server, token: str) -> list[str]:
    response = httpx.get(
        f"{server.url}/api/v1/runs", headers={"Authorization": f"Bearer {token}"}, timeout=30
    )
    assert response.status_code == 200, response.text
    body = response.json()
    rows = body["runs"] if isinstance(body, dict) else body
    return [row["id"] for row in rows]


@pytest.mark.parametrize("how", ["config", "register"])
def test_a_members_run_reaches_the_server_as_theirs(
    team: tuple[Server, dict[str, str]], tmp_path: Path, how: str
) -> None:
    server, tokens = team
    local = f"sqlite:///{tmp_path / 'local.db'}"  # where runs landed before
    settings = {"daskscope.database": local, "daskscope.spool-dir": str(tmp_path / "spool")}
    if how == "config":
        settings |= {"daskscope.server": server.url, "daskscope.token": tokens["bob"]}
    tracked = track_metrics(count_events)
    with (
        dask.config.set(settings),
        LocalCluster(n_workers=1, processes=False, dashboard_address=":0") as cluster,
        Client(cluster) as client,
    ):
        if how == "config":
            daskscope.register(client, flush_interval=0.2)
        else:  # only the cluster's recorder knows the server and the token
            daskscope.register(client, server=server.url, token=tokens["bob"], flush_interval=0.2)
        daskscope.flush(client, wait_for_metrics=False)  # the server knows the cluster
        with MetricsCollector(client, name="bob's run") as collector:
            assert sum(client.gather(client.map(tracked, [0, 10], [10, 25]))) == 25
        run_id = collector.wait_stored()

    assert runs_seen(server, tokens["bob"]) == [run_id]
    assert runs_seen(server, tokens["alice"]) == [run_id]  # bob's admin
    assert runs_seen(server, tokens["carol"]) == []  # another account
    headers = {"Authorization": f"Bearer {tokens['carol']}"}
    assert (
        httpx.get(f"{server.url}/api/v1/runs/{run_id}", headers=headers, timeout=60).status_code
        == 404
    )
    with open_store(local) as store:
        assert list_runs(store) == []  # nothing in the client's local file
    assert not list((tmp_path / "spool").glob("*.batch"))
