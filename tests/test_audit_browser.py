"""The audit log page in Chromium: an admin who mistyped a revoked token at the login
page, then logged in, finds both in the log through the navigation; filters it by kind
with the form; the export link downloads that kind as JSON lines; at phone width the
table scrolls in its own box. A member sees no link and is refused the page.
Screenshots at 1440x900 and 390x844."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from browser import SIZES, needs_chromium, screenshot
from daskscope.store import open_store
from daskscope.store.identity import add_user, create_account, create_token, revoke_token
from webutil import serving

pytestmark = needs_chromium

from daskscope.web import create_app  # noqa: E402


@pytest.fixture
def server(tmp_path: Path) -> Iterator[dict[str, Any]]:
    url = f"sqlite:///{tmp_path / 'daskscope.db'}"
    with open_store(url) as store:
        create_account(store, "atlas")
        add_user(store, "alice", account="atlas", admin=True)
        add_user(store, "bob", account="atlas")
        tokens = {name: create_token(store, name) for name in ("alice", "bob")}
        tokens["bob-old"] = create_token(store, "bob")
        revoke_token(store, token=tokens["bob-old"])
    app = create_app(url, auth=True)
    with serving(app) as base:
        yield {"base": base, "tokens": tokens}
    app.state.store.close()


def log_in(page: Any, base: str, token: str) -> None:
    page.goto(f"{base}/login")
    page.fill("input[name=token]", token)
    page.click("button[type=submit]")


def test_an_admin_reads_filters_and_exports_the_log(server: dict[str, Any], open_page: Any) -> None:
    base, tokens = server["base"], server["tokens"]
    page = open_page()
    log_in(page, base, tokens["bob-old"])  # the revoked one, by mistake
    assert page.locator("p.message").inner_text() == "That token is unknown or revoked."
    log_in(page, base, tokens["alice"])
    page.wait_for_url(f"{base}/")
    page.click("nav >> text=Audit log")
    page.wait_for_url(f"{base}/audit")
    assert page.locator("nav a[aria-current=page]").inner_text() == "Audit log"
    rows = page.locator("#audit-listing tbody tr")
    kinds = rows.evaluate_all("rows => rows.map(r => r.dataset.kind)")
    assert sorted(kinds) == sorted(
        ["token_used_from_new_address", "login_failed", "token_revoked"] + ["token_created"] * 3
    )
    assert kinds[0] == "token_used_from_new_address"  # newest first: alice's session
    first = rows.nth(0).locator("td").all_inner_texts()
    assert first[1:] == ["token used from a new address", "alice", "127.0.0.1",
                         tokens["alice"][:10] + "…", "via: session"]  # fmt: skip
    assert page.locator("#audit-count").inner_text() == "Events 1\u20136 of 6"
    for width, height in SIZES.values():
        page.set_viewport_size({"width": width, "height": height})
        screenshot(page, f"audit-log-{width}")
        # the table scrolls in its box; the page itself never wider than the screen
        assert page.evaluate("document.documentElement.scrollWidth") <= width

    page.select_option("#audit-kind", "login_failed")
    page.click("#audit-filters button[type=submit]")
    page.wait_for_url(f"{base}/audit?kind=login_failed")
    cells = page.locator("#audit-listing tbody tr td").all_inner_texts()
    assert cells[1:] == ["login failed", "bob", "127.0.0.1", tokens["bob-old"][:10] + "…",
                         "reason: the token was revoked"]  # fmt: skip
    assert page.locator("#audit-kind").input_value() == "login_failed"
    href = page.locator("#audit-export").get_attribute("href")
    assert href == "/api/v1/audit?kind=login_failed&format=jsonl"
    with page.expect_download() as downloading:
        page.click("#audit-export")
    saved = Path(downloading.value.path())
    assert downloading.value.suggested_filename == "daskscope-audit-atlas.jsonl"
    (event,) = [json.loads(line) for line in saved.read_text().splitlines()]
    assert (event["kind"], event["user"], event["token_hint"]) == (
        "login_failed",
        "bob",
        tokens["bob-old"][:10],
    )


def test_a_member_has_no_link_and_is_refused(server: dict[str, Any], open_page: Any) -> None:
    page = open_page()
    log_in(page, server["base"], server["tokens"]["bob"])
    page.wait_for_url(f"{server['base']}/")
    assert page.locator("nav >> text=Audit log").count() == 0
    response = page.goto(f"{server['base']}/audit")
    assert response is not None and response.status == 403
    assert "only an account's admins see its audit log" in page.locator("main").inner_text()
