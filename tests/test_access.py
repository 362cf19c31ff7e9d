"""Access control on a server with authentication: a matrix of roles and routes, the
cross-account 404, revoked tokens, login sessions, and identity at ingest."""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path
from typing import Any

import pytest

from daskscope.model import stable_id
from daskscope.store import cluster_detail, open_store, write_records
from daskscope.store.identity import add_user, create_account, create_token, revoke_token
from daskscope.store.reports import save_report
from daskscope.web import create_app
from daskscope.wire import encode_batch
from factories import make_group, make_span
from webutil import call, synthetic_clusters


@dataclasses.dataclass
class World:
    app: Any
    tokens: dict[str, str]
    atlas_cluster: str
    cms_cluster: str
    atlas_report: str


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> World:
    url = f"sqlite:///{tmp_path_factory.mktemp('access') / 'server.db'}"
    store = open_store(url)
    # alice (admin) and bob in atlas; carol in cms
    clusters = []
    for record in synthetic_clusters(time.time(), weeks=2):
        account = "cms" if record.user == "carol" else "atlas"
        clusters.append(dataclasses.replace(record, account=account))
    atlas = next(c for c in clusters if c.account == "atlas")
    cms = next(c for c in clusters if c.account == "cms")
    group = make_group(atlas, "inc-1")
    span = make_span(atlas, "s1", name=["load"], enqueued_at=atlas.started_at)
    write_records(store, [*clusters, group, span])
    create_account(store, "atlas")
    create_account(store, "cms")
    add_user(store, "alice", account="atlas", admin=True)
    add_user(store, "bob", account="atlas")
    add_user(store, "carol", account="cms")
    tokens = {name: create_token(store, name) for name in ("alice", "bob", "carol")}
    tokens["revoked"] = create_token(store, "bob")
    revoke_token(store, token=tokens["revoked"])
    report = save_report(store, b"<html>atlas</html>", name="r.html", account="atlas")
    return World(create_app(url, auth=True), tokens, atlas.id, cms.id, report["id"])


def get(world: World, who: str | None, path: str) -> Any:
    headers = {"Authorization": f"Bearer {world.tokens[who]}"} if who else {}
    return call(world.app, "GET", path, headers=headers, follow_redirects=False)


ROUTES = [
    "/",
    "/api/v1/account",
    "/api/v1/statistics",
    "/api/v1/usage",
    "/api/v1/clusters",
    "/clusters/{atlas}",
    "/api/v1/clusters/{atlas}",
    "/api/v1/clusters/{atlas}/workers",
    "/api/v1/clusters/{atlas}/profile",
    "/api/v1/clusters/{atlas}/metrics",
    "/runs",
    "/api/v1/runs",
    "/reports",
    "/api/v1/reports",
    "/reports/{report}",
    "/api/v1/reports/{report}",
    "/reports/{report}/raw",
    "/metrics",  # for Prometheus (web/routes/metrics.py)
]
# Expected status by role: members of atlas see atlas's things; carol (cms) is told they
# do not exist; without a valid token, pages send to /login and the API (and /metrics,
# read by Prometheus) answers 401.
EXPECTED = {
    "alice": 200,
    "bob": 200,
    "carol": {"atlas-specific": 404, "other": 200},
    "revoked": {"page": 303, "api": 401},
    None: {"page": 303, "api": 401},
}


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("who", ["alice", "bob", "carol", "revoked", None])
def test_roles_by_routes(world: World, who: str | None, route: str) -> None:
    path = route.format(atlas=world.atlas_cluster, report=world.atlas_report)
    response = get(world, who, path)
    expected = EXPECTED[who]
    if isinstance(expected, dict) and "page" in expected:
        for_programs = path.startswith("/api/") or path == "/metrics"
        expected = expected["api" if for_programs else "page"]
        if expected == 303:
            assert response.headers["location"].startswith("/login?next=")
    elif isinstance(expected, dict):
        specific = "{atlas}" in route or "{report}" in route
        expected = expected["atlas-specific" if specific else "other"]
    assert response.status_code == expected, (who, path, response.text[:300])


def test_a_member_sees_only_their_account(world: World) -> None:
    listed = get(world, "bob", "/api/v1/clusters").json()["clusters"]
    assert listed and {c["account"] for c in listed} == {"atlas"}
    listed = get(world, "carol", "/api/v1/clusters").json()["clusters"]
    assert listed and {c["account"] for c in listed} == {"cms"}
    assert get(world, "carol", "/api/v1/reports").json()["reports"] == []
    # a prefix of another account's cluster id matches nothing either
    assert get(world, "carol", f"/api/v1/clusters/{world.atlas_cluster[:8]}").status_code == 404
    assert get(world, "carol", f"/api/v1/clusters/{world.cms_cluster}").status_code == 200


def _members(usage: dict) -> set[str]:
    return {m["user"] if isinstance(m, dict) else m for m in usage.get("members", [])}


def test_admins_see_every_members_usage_members_their_own(world: World) -> None:
    admin = json.dumps(get(world, "alice", "/api/v1/usage").json())
    member = json.dumps(get(world, "bob", "/api/v1/usage").json())
    assert '"alice"' in admin and '"bob"' in admin and '"carol"' not in admin
    assert '"bob"' in member and '"alice"' not in member


def test_login_sets_a_session_and_logout_ends_it(world: World) -> None:
    # the form's CSRF field matches its cookie (double submit)
    csrf = {"cookie": "daskscope_csrf=c5rf"}
    refused = call(
        world.app,
        "POST",
        "/login",
        data={"token": "dsk_wrong", "next": "/", "csrf": "c5rf"},
        headers=csrf,
    )
    assert refused.status_code == 401 and "unknown or revoked" in refused.text
    response = call(
        world.app,
        "POST",
        "/login",
        data={"token": world.tokens["bob"], "next": "https://evil.example/", "csrf": "c5rf"},
        headers=csrf,
        follow_redirects=False,
    )
    assert response.status_code == 303 and response.headers["location"] == "/"
    cookie = response.headers["set-cookie"]
    assert cookie.startswith("daskscope_session=")
    assert "httponly" in cookie.lower() and "samesite=strict" in cookie.lower()
    session = cookie.split(";")[0].split("=", 1)[1]
    assert session != world.tokens["bob"]  # a session id, not the token (tests/test_sessions.py)
    page = call(world.app, "GET", "/", headers={"cookie": f"daskscope_session={session}"})
    assert page.status_code == 200 and "bob · atlas" in page.text
    out = call(
        world.app, "POST", "/logout", data={"csrf": "c5rf"},
        headers={"cookie": f"daskscope_session={session}; daskscope_csrf=c5rf"},
        follow_redirects=False,
    )  # fmt: skip
    assert out.status_code == 303 and 'daskscope_session=""' in out.headers["set-cookie"]


def test_public_routes_need_no_token(world: World) -> None:
    for path in ("/login", "/openapi.json", "/api/docs", "/assets/plotly.min.js"):
        assert get(world, None, path).status_code == 200, path


def post_batch(world: World, who: str | None, records: list[Any]) -> Any:
    headers = {"content-type": "application/json"}
    if who:
        headers["Authorization"] = f"Bearer {world.tokens[who]}"
    return call(world.app, "POST", "/api/v1/ingest", content=encode_batch(records), headers=headers)


def test_ingest_takes_identity_from_the_token(world: World) -> None:
    claimed = dataclasses.replace(
        synthetic_clusters(time.time(), weeks=1)[0],
        id="carols-new-cluster",
        account="atlas",  # what a collector claims does not count
        user="alice",
    )
    assert post_batch(world, None, [claimed]).status_code == 401
    assert post_batch(world, "revoked", [claimed]).status_code == 401
    response = post_batch(world, "carol", [claimed])
    assert response.status_code == 200, response.text
    row = cluster_detail(world.app.state.store, "carols-new-cluster")["cluster"]
    assert (row["account"], row["user"]) == ("cms", "carol")


def test_ingest_refuses_what_belongs_to_another_account(world: World) -> None:
    store = world.app.state.store
    before = cluster_detail(store, world.atlas_cluster)
    # a cluster record with another account's cluster id
    atlas_row = synthetic_clusters(time.time(), weeks=1)[0]
    stolen = dataclasses.replace(atlas_row, id=world.atlas_cluster, name="hijacked")
    response = post_batch(world, "carol", [stolen])
    assert response.status_code == 409
    assert "records[0].data.id" in response.json()["error"]["message"]
    # records pointing into another account's cluster
    intruder = make_group(world.atlas_cluster, "evil", id=stable_id("x"))
    response = post_batch(world, "carol", [intruder])
    assert response.status_code == 409
    assert "cluster_id" in response.json()["error"]["message"]
    # a record id of another account's row, under carol's own cluster
    atlas_group = make_group(world.atlas_cluster, "inc-1")  # the world's group
    moved = make_group(world.cms_cluster, "x", id=atlas_group.id)
    response = post_batch(world, "carol", [moved])
    assert response.status_code == 409
    assert "another cluster" in response.json()["error"]["message"]
    # nothing changed
    after = cluster_detail(store, world.atlas_cluster)
    assert after["cluster"] == before["cluster"]
    assert after["task_groups"] == before["task_groups"]


def test_serve_turns_authentication_on_off_loopback() -> None:
    from daskscope.cli.serve import auth_wanted

    assert auth_wanted(None, "127.0.0.1") is False
    assert auth_wanted(None, "0.0.0.0") is True
    assert auth_wanted(False, "0.0.0.0") is False
    assert auth_wanted(True, "127.0.0.1") is True


def test_cli_serve_refuses_without_token_on_a_real_socket(world: World, tmp_path: Path) -> None:
    import httpx

    from webutil import serving

    with serving(world.app) as base:
        assert httpx.get(f"{base}/api/v1/clusters", timeout=60).status_code == 401
        ok = httpx.get(
            f"{base}/api/v1/clusters",
            headers={"Authorization": f"Bearer {world.tokens['bob']}"},
            timeout=60,
        )
        assert ok.status_code == 200
