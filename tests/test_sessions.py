"""Issue 10, point 5: a browser login is a server-side session, not the token in a
cookie. Ended at logout, at expiry and when its token is revoked; login rate-limited;
the cookie Secure when the public URL is https. Real ``daskscope serve`` processes on
SQLite and PostgreSQL."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy as sa

from daskscope.store import open_store
from daskscope.store.identity import add_user, create_account, create_token, revoke_token
from daskscope.store.schema import sessions
from serveproc import serve


@pytest.fixture
def team(database_url: str, tmp_path: Path) -> Iterator[dict[str, Any]]:
    with open_store(database_url) as store:
        create_account(store, "atlas")
        add_user(store, "bob", account="atlas")
        token = create_token(store, "bob")
    with serve(database_url, tmp_path / "serve.log", "--auth") as base:
        yield {"base": base, "url": database_url, "token": token}


def log_in(client: httpx.Client, token: str) -> httpx.Response:
    client.get("/login")  # sets the CSRF cookie the form sends back
    return client.post(
        "/login", data={"token": token, "next": "/", "csrf": client.cookies["daskscope_csrf"]}
    )


def session_rows(url: str) -> list[Any]:
    with open_store(url) as store, store.engine.connect() as conn:
        return conn.execute(sa.select(sessions)).all()


def test_login_opens_a_server_side_session_and_logout_ends_it(team: dict[str, Any]) -> None:
    with httpx.Client(base_url=team["base"]) as client:
        response = log_in(client, team["token"])
        assert response.status_code == 303, response.text
        cookie = response.headers["set-cookie"]
        assert "httponly" in cookie.lower() and "samesite=strict" in cookie.lower()
        assert "secure" not in cookie.lower()  # plain http on loopback
        session = client.cookies["daskscope_session"]
        assert team["token"] not in response.headers.get_list("set-cookie")[0]
        assert session != team["token"] and "daskscope_token" not in client.cookies
        # only the session id's hash is stored
        rows = session_rows(team["url"])
        assert [r.id_hash for r in rows] == [hashlib.sha256(session.encode()).hexdigest()]
        assert rows[0].expires_at > rows[0].created_at
        assert "bob · atlas" in client.get("/").text
        out = client.post("/logout", data={"csrf": client.cookies["daskscope_csrf"]})
        assert out.status_code == 303
    assert session_rows(team["url"]) == []
    # the old cookie, replayed, opens nothing
    replay = httpx.get(f"{team['base']}/", cookies={"daskscope_session": session}, timeout=60)
    assert replay.status_code == 303 and replay.headers["location"].startswith("/login")


def test_the_token_in_a_cookie_is_no_login(team: dict[str, Any]) -> None:
    for name in ("daskscope_session", "daskscope_token"):
        response = httpx.get(
            f"{team['base']}/api/v1/clusters", cookies={name: team["token"]}, timeout=60
        )
        assert response.status_code == 401, name


def test_revoking_the_token_ends_its_sessions(team: dict[str, Any]) -> None:
    with httpx.Client(base_url=team["base"]) as client:
        assert log_in(client, team["token"]).status_code == 303
        assert client.get("/api/v1/clusters").status_code == 200
        with open_store(team["url"]) as store:
            revoke_token(store, token=team["token"])
        assert client.get("/api/v1/clusters").status_code == 401


def test_an_expired_session_opens_nothing(team: dict[str, Any]) -> None:
    with httpx.Client(base_url=team["base"]) as client:
        assert log_in(client, team["token"]).status_code == 303
        assert client.get("/api/v1/clusters").status_code == 200
        with open_store(team["url"]) as store, store.engine.begin() as conn:
            conn.execute(sessions.update().values(expires_at=1.0))  # as if long ago
        assert client.get("/api/v1/clusters").status_code == 401


def test_login_needs_the_csrf_field(team: dict[str, Any]) -> None:
    with httpx.Client(base_url=team["base"]) as client:
        client.get("/login")
        refused = client.post("/login", data={"token": team["token"], "csrf": "forged"})
        assert refused.status_code == 403 and "reload the page" in refused.text
        assert "daskscope_session" not in client.cookies
    # another site's login form (no CSRF cookie at all) does not reach the route
    cross = httpx.post(f"{team['base']}/login", data={"token": team["token"]}, timeout=60)
    assert cross.status_code == 403
    assert session_rows(team["url"]) == []


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_login_is_rate_limited_per_client(team: dict[str, Any]) -> None:
    with httpx.Client(base_url=team["base"]) as client:
        statuses = [log_in(client, "dsk_guess").status_code for _ in range(10)]
        assert statuses == [401] * 10
        limited = log_in(client, team["token"])  # even the right token waits now
        assert limited.status_code == 429
        assert 1 <= int(limited.headers["retry-after"]) <= 60
        assert "Too many login attempts" in limited.text
        assert "daskscope_session" not in client.cookies


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_cookies_are_secure_when_the_public_url_is_https(database_url: str, tmp_path: Path) -> None:
    with open_store(database_url) as store:
        create_account(store, "atlas")
        add_user(store, "bob", account="atlas")
        token = create_token(store, "bob")
    env = {"DASK_DASKSCOPE__PUBLIC_URL": "https://daskscope.example.org"}
    with serve(database_url, tmp_path / "serve.log", "--auth", env=env) as base:
        host = {"host": "daskscope.example.org"}  # its public name is served too
        form = httpx.get(f"{base}/login", headers=host, timeout=60)
        assert form.status_code == 200
        assert "; secure" in form.headers["set-cookie"].lower()
        csrf = form.cookies["daskscope_csrf"]
        response = httpx.post(
            f"{base}/login",
            data={"token": token, "csrf": csrf},
            headers={**host, "origin": "https://daskscope.example.org"},
            cookies={"daskscope_csrf": csrf},
            timeout=60,
        )
        assert response.status_code == 303, response.text
        cookie = response.headers["set-cookie"].lower()
        assert cookie.startswith("daskscope_session=") and "; secure" in cookie
