"""Issue 24: a team server keeps an audit log in its database — tokens created, used
from a new address, revoked; failed logins — shows each account's admins their own
account's events (page and API), and exports it as JSON lines (``daskscope audit
export``, ``/api/v1/audit?format=jsonl``). Through a real ``daskscope serve --workers 2``
on SQLite and PostgreSQL: a token used from one address through both processes is
recorded once; other addresses on loopback (127.0.0.2, ...) are new ones."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy as sa

from cliutil import run_cli
from daskscope.store import open_store
from daskscope.store.audit import audit_page, prune_events, record_event
from daskscope.store.identity import add_user, create_account, create_token, revoke_token
from daskscope.wire import encode_batch
from factories import make_cluster
from serveproc import connections_to_each_process, serve


@pytest.fixture
def team(database_url: str, tmp_path: Path) -> Iterator[dict[str, Any]]:
    """Two accounts: atlas (alice admin, bob member, whose old token is revoked) and cms
    (carol admin), behind ``serve --auth --workers 2``."""
    with open_store(database_url) as store:
        create_account(store, "atlas")
        create_account(store, "cms")
        add_user(store, "alice", account="atlas", admin=True)
        add_user(store, "bob", account="atlas")
        add_user(store, "carol", account="cms", admin=True)
        tokens = {name: create_token(store, name) for name in ("alice", "bob", "carol")}
        tokens["bob-old"] = create_token(store, "bob")
        revoke_token(store, token=tokens["bob-old"])
    log = tmp_path / "serve.log"
    with serve(database_url, log, "--auth", "--workers", "2") as base:
        yield {"base": base, "url": database_url, "tokens": tokens, "log": log}


def client(team: dict[str, Any], who: str | None = None, source: str = "127.0.0.1") -> httpx.Client:
    """A client of the server connecting from ``source`` (any address of 127/8 reaches
    the server on 127.0.0.1), with ``who``'s token."""
    headers = {"authorization": f"Bearer {team['tokens'][who]}"} if who else {}
    transport = httpx.HTTPTransport(local_address=source)
    return httpx.Client(base_url=team["base"], headers=headers, transport=transport, timeout=60)


def log_in(c: httpx.Client, token: str) -> httpx.Response:
    c.get("/login")
    return c.post("/login", data={"token": token, "csrf": c.cookies["daskscope_csrf"]})


def events_of(response: httpx.Response) -> list[dict[str, Any]]:
    assert response.status_code == 200, response.text
    return list(response.json()["events"])


def summary(events: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """Oldest first, as (kind, account, user, address, detail)."""
    rows = [(e["kind"], e["account"], e["user"], e["address"], e["detail"]) for e in events]
    return sorted(rows, key=lambda row: [str(part) for part in row])


def test_the_log_records_tokens_and_logins_and_shows_each_admin_their_own(
    team: dict[str, Any],
) -> None:
    tokens = team["tokens"]
    # bob's token from 127.0.0.1 through both server processes, 3 connections each
    by_process = connections_to_each_process(
        team["base"],
        team["log"],
        3,
        tokens["bob"],
        headers={"authorization": f"Bearer {tokens['bob']}"},
    )
    try:
        for conns in by_process.values():
            for c in conns:
                assert c.get("/api/v1/clusters").status_code == 200
    finally:
        for conns in by_process.values():
            for c in conns:
                c.close()
    # ... from a second address, twice; and a batch of ingest from a third (the route
    # that takes a token it saw valid from memory)
    with client(team, "bob", "127.0.0.2") as c:
        assert c.get("/api/v1/clusters").status_code == 200
        assert c.get("/api/v1/runs").status_code == 200
    batch = encode_batch([make_cluster("audited", id="audited-cluster")])
    json_headers = {"content-type": "application/json"}
    with client(team, "bob") as c:
        assert c.post("/api/v1/ingest", content=batch, headers=json_headers).status_code != 401
    with client(team, "bob", "127.0.0.3") as c:
        assert c.post("/api/v1/ingest", content=batch, headers=json_headers).status_code != 401
    # a browser session from a fourth
    with client(team, None, "127.0.0.4") as c:
        assert log_in(c, tokens["alice"]).status_code == 303
        assert c.get("/").status_code == 200
    # failed logins: a revoked token, one nobody holds, a password typed by mistake
    with client(team, None, "127.0.0.5") as c:
        assert log_in(c, tokens["bob-old"]).status_code == 401
        assert log_in(c, "dsk_nobodys").status_code == 401
        assert log_in(c, "hunter2-my-password").status_code == 401
    with client(team, "carol") as c:
        assert c.get("/api/v1/clusters").status_code == 200

    with client(team, "alice") as c:
        atlas = events_of(c.get("/api/v1/audit"))
        lines = c.get("/api/v1/audit?format=jsonl")
    hints = {name: token[:10] for name, token in tokens.items()}
    assert summary(atlas) == summary(
        [
            {"kind": "token_created", "account": "atlas", "user": u, "address": None,
             "detail": None}
            for u in ("alice", "bob", "bob")
        ]
        + [
            {"kind": "token_revoked", "account": "atlas", "user": "bob", "address": None,
             "detail": None},
            {"kind": "login_failed", "account": "atlas", "user": "bob", "address": "127.0.0.5",
             "detail": {"reason": "the token was revoked"}},
            {"kind": "token_used_from_new_address", "account": "atlas", "user": "alice",
             "address": "127.0.0.1", "detail": {"via": "api"}},
            {"kind": "token_used_from_new_address", "account": "atlas", "user": "alice",
             "address": "127.0.0.4", "detail": {"via": "session"}},
        ]
        + [
            {"kind": "token_used_from_new_address", "account": "atlas", "user": "bob",
             "address": address, "detail": {"via": "api"}}
            for address in ("127.0.0.1", "127.0.0.2", "127.0.0.3")
        ]
    )  # fmt: skip
    # newest first; hints are the tokens' starts, as `daskscope user list` shows them
    assert [e["id"] for e in atlas] == sorted((e["id"] for e in atlas), reverse=True)
    used = {e["address"]: e["token_hint"] for e in atlas if e["user"] == "bob" and e["address"]}
    assert used == {
        "127.0.0.1": hints["bob"],
        "127.0.0.2": hints["bob"],
        "127.0.0.3": hints["bob"],
        "127.0.0.5": hints["bob-old"],
    }
    # the JSON lines hold the same events, oldest first, one object a line
    assert lines.status_code == 200
    assert lines.headers["content-type"].startswith("application/x-ndjson")
    exported = [json.loads(line) for line in lines.text.splitlines()]
    assert exported == list(reversed(atlas))
    assert all(e["time"].endswith("Z") for e in exported)

    # carol sees only cms's events, bob (no admin) and strangers nothing
    with client(team, "carol") as c:
        assert {e["account"] for e in events_of(c.get("/api/v1/audit"))} == {"cms"}
    with client(team, "bob") as c:
        for path in ("/api/v1/audit", "/api/v1/audit?format=jsonl", "/audit"):
            assert c.get(path).status_code == 403, path
    with client(team) as c:
        assert c.get("/api/v1/audit").status_code == 401
        assert c.get("/audit", follow_redirects=False).status_code == 303

    # the operator's export has the failed logins of no account too; nothing of the
    # password, not even its start
    everything = export(team["url"])
    no_account = [e for e in everything if e["account"] is None]
    assert [(e["kind"], e["token_hint"], e["detail"]["reason"]) for e in no_account] == [
        ("login_failed", "dsk_nobody", "no account holds this token"),
        ("login_failed", None, "not a token"),
    ]
    assert "hunter2" not in json.dumps(everything)
    assert export(team["url"], "--account", "atlas") == exported
    assert {e["account"] for e in export(team["url"], "--account", "cms")} == {"cms"}
    kinds = {e["kind"] for e in export(team["url"], "--kind", "login_failed")}
    assert kinds == {"login_failed"}
    assert export(team["url"], "--since", "2999-01-01") == []


def export(url: str, *options: str) -> list[dict[str, Any]]:
    """``daskscope audit export`` as a command, its lines parsed."""
    done = run_cli("--database", url, "audit", "export", *options)
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


def test_the_page_is_for_admins_and_the_nav_shows_it_to_them(team: dict[str, Any]) -> None:
    with client(team, None) as admin, client(team, None) as member:
        assert log_in(admin, team["tokens"]["alice"]).status_code == 303
        assert log_in(member, team["tokens"]["bob"]).status_code == 303
        home = admin.get("/").text
        assert 'href="/audit"' in home
        page = admin.get("/audit")
        assert page.status_code == 200
        assert "Audit log" in page.text and 'id="audit-listing"' in page.text
        assert page.text.count('data-kind="token_created"') == 3
        only = admin.get("/audit?kind=token_revoked")
        assert only.text.count("data-kind=") == 1
        assert 'href="/audit"' not in member.get("/").text
        refused = member.get("/audit")
        assert refused.status_code == 403
        assert "only an account&#39;s admins see its audit log" in refused.text


def test_the_export_file_and_a_bad_date(team: dict[str, Any], tmp_path: Path) -> None:
    target = tmp_path / "audit.jsonl"
    url = team["url"]
    done = run_cli(
        "--database", url, "audit", "export", "--account", "atlas", "--output", str(target)
    )
    assert done.returncode == 0, done.stderr
    kinds = [json.loads(line)["kind"] for line in target.read_text().splitlines()]
    assert kinds == ["token_created"] * 3 + ["token_revoked"]
    assert "wrote 4 events" in done.stderr
    bad = run_cli("--database", url, "audit", "export", "--since", "last tuesday")
    assert bad.returncode == 2 and "is not a date (2026-01-31)" in bad.stderr


# -- the store ------------------------------------------------------------------------------


def test_paging_filters_and_retention(store: Any) -> None:
    with store.engine.begin() as conn:
        for i in range(25):
            kind = "login_failed" if i % 5 == 0 else "token_created"
            record_event(conn, kind, account="atlas", user="u", at=1_000_000.0 + i)
        record_event(conn, "token_created", account="cms", user="v", at=1_000_030.0)
    page = audit_page(store, account="atlas", offset=10, limit=10)
    assert page.total == 25
    assert [e.at for e in page.events] == [1_000_014.0 - i for i in range(10)]
    failed = audit_page(store, account="atlas", kinds=("login_failed",))
    assert [e.at for e in failed.events] == [
        1_000_020.0,
        1_000_015.0,
        1_000_010.0,
        1_000_005.0,
        1_000_000.0,
    ]
    late = audit_page(store, account="atlas", since=1_000_020.0, until=1_000_023.0)
    assert [e.at for e in late.events] == [1_000_022.0, 1_000_021.0, 1_000_020.0]
    assert audit_page(store, account=None).total == 26
    assert prune_events(store, before=1_000_010.0) == 10
    assert audit_page(store, account=None).total == 16
    with pytest.raises(ValueError, match="unknown audit event kind"):
        with store.engine.begin() as conn:
            record_event(conn, "token_stolen")
    with store.engine.connect() as conn:
        assert conn.execute(sa.text("SELECT count(*) FROM audit_events")).scalar() == 16
