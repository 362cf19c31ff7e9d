"""Alerts delivered to a webhook (issue 30, point 3): a real recorded cluster whose task
failed, a local HTTP receiver that refuses the first deliveries, and ``daskscope serve``
killed mid-alert and started again: each alert reaches the receiver exactly once, one
alert per condition until it clears."""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from distributed import Client, LocalCluster

import daskscope
from browser import needs_chromium
from daskscope.store import open_store
from daskscope.store.alerts import alert_history
from daskscope.web.alerts import AlertLoop, AlertRule, AlertSettings
from pgserver import free_port
from serveproc import launch, stop

DEADLINE = 120.0


def fail(i: int) -> int:
    raise ValueError(f"failed on purpose: {i}")


class Receiver:
    """A webhook on 127.0.0.1 that answers 500 while ``refusing`` and keeps every
    request's body with the status it answered."""

    def __init__(self) -> None:
        self.refusing = True
        self.seen: list[tuple[int, dict[str, Any]]] = []
        self.lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with receiver.lock:
                    status = 500 if receiver.refusing else 200
                    receiver.seen.append((status, body))
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def delivered(self) -> list[dict[str, Any]]:
        with self.lock:
            return [body for status, body in self.seen if status == 200]

    def refused(self) -> int:
        with self.lock:
            return sum(status != 200 for status, _ in self.seen)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def wait_for(condition: Callable[[], Any], what: str) -> Any:
    deadline = time.monotonic() + DEADLINE
    while time.monotonic() < deadline:
        found = condition()
        if found:
            return found
        time.sleep(0.1)
    raise AssertionError(f"not within {DEADLINE:.0f} s: {what}")


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A store holding one recorded cluster in which a task failed."""
    path = tmp_path_factory.mktemp("alerts") / "recorded.db"
    url = f"sqlite:///{path}"
    with (
        LocalCluster(
            n_workers=1, threads_per_worker=1, processes=False, dashboard_address=":0",
            silence_logs=logging.CRITICAL,
        ) as cluster,
        Client(cluster) as client,
    ):  # fmt: skip
        cid = daskscope.register(client, database=url, name="alerts", account="team")
        with pytest.raises(ValueError, match="failed on purpose"):
            client.submit(fail, 1).result()
        daskscope.flush(client)
    return {"path": path, "cluster_id": cid}


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    made = Receiver()
    try:
        yield made
    finally:
        made.close()


def store_copy(recorded: dict[str, Any], tmp_path: Path) -> str:
    path = tmp_path / "store.db"
    shutil.copy(recorded["path"], path)
    return f"sqlite:///{path}"


def settings(*rules: AlertRule) -> AlertSettings:
    return AlertSettings(
        interval=0.2, retry_backoff=0.1, retry_max_backoff=0.5, max_attempts=50, timeout=10,
        rules=rules,
    )  # fmt: skip


def rule(name: str, webhook: str, body_format: str, lookback_hours: float = 24) -> AlertRule:
    return AlertRule(
        name=name, account="team", kind="failed", webhook=webhook, body_format=body_format,
        idle_minutes=30, lookback_hours=lookback_hours,
    )  # fmt: skip


def test_one_alert_per_condition_until_it_clears(
    recorded: dict[str, Any], receiver: Receiver, tmp_path: Path
) -> None:

    url = store_copy(recorded, tmp_path)
    cid = recorded["cluster_id"]
    with open_store(url) as store:
        started = (
            store.engine.connect()
            .exec_driver_sql("SELECT started_at FROM clusters WHERE id = ?", (cid,))
            .scalar_one()
        )
        loop = AlertLoop(store, settings(rule("failures", receiver.url, "teams", 1.0)))
        receiver.refusing = True
        now = time.time() + 60  # the clock of retries: a refused delivery is due again soon
        loop.evaluate(now)
        loop.evaluate(now + 1)  # still holds: no second alert
        assert off_loop(loop.deliver(now + 2)) == 0  # refused: kept for a retry
        rows = alert_history(store)
        assert len(rows) == 1 and rows[0]["delivery"] == "pending" and rows[0]["attempts"] == 1
        assert rows[0]["condition"] == f"cluster:{cid}"
        receiver.refusing = False
        assert off_loop(loop.deliver(now + 10)) == 1
        assert off_loop(loop.deliver(now + 20)) == 0  # delivered: never again
        # the cluster falls out of the rule's hour: the condition clears ...
        loop.evaluate(started + 2 * 3600)
        rows = alert_history(store)
        assert len(rows) == 1 and rows[0]["cleared_at"] == started + 2 * 3600
        # ... and holding again, it is a new alert, delivered once
        loop.evaluate(now + 3)
        assert off_loop(loop.deliver(now + 4)) == 1
        rows = alert_history(store)
        assert len(rows) == 2 and {r["delivery"] for r in rows} == {"delivered"}
    delivered = receiver.delivered()
    assert len(delivered) == 2
    for card in delivered:  # a Teams MessageCard naming the cluster and the alert
        assert card["@type"] == "MessageCard" and card["title"] == "daskscope alert: failures"
        assert cid[:8] in card["text"]
    assert {r["id"] for r in rows} == {
        next(r["id"] for r in rows if r["id"] in card["text"]) for card in delivered
    }
    assert receiver.refused() == 1


def _start_server(url: str, config_dir: Path, log: Path, port: int) -> Any:
    command = [sys.executable, "-m", "daskscope.cli.main", "--database", url]
    command += ["serve", "--host", "127.0.0.1", "--port", str(port)]
    return launch(command, log, env={"DASK_CONFIG": str(config_dir)})


def _alerts_api(port: int) -> dict[str, Any] | None:
    try:
        answer = httpx.get(f"http://127.0.0.1:{port}/api/v1/alerts", timeout=5)
    except httpx.HTTPError:
        return None
    return answer.json() if answer.status_code == 200 else None


def test_a_server_killed_mid_alert_delivers_it_once_after_its_restart(
    recorded: dict[str, Any], receiver: Receiver, tmp_path: Path
) -> None:
    url = store_copy(recorded, tmp_path)
    cid = recorded["cluster_id"]
    config_dir = tmp_path / "config"
    config_dir.mkdir()
    rules = [
        {"name": "failures-slack", "account": "team", "kind": "failed",
         "webhook": receiver.url, "format": "slack"},
        {"name": "failures-json", "account": "team", "kind": "failed",
         "webhook": receiver.url, "format": "json"},
    ]  # fmt: skip
    alerts = {"interval": "200ms", "retry-backoff": "100ms", "retry-max-backoff": "300ms",
              "rules": rules}  # fmt: skip
    (config_dir / "daskscope.yaml").write_text(yaml.safe_dump({"daskscope": {"alerts": alerts}}))
    log = tmp_path / "server.log"
    port = free_port()
    first = _start_server(url, config_dir, log, port)
    try:
        # the receiver refuses: the server retries, with both alerts pending
        wait_for(lambda: receiver.refused() >= 6, "deliveries retried")
        os.kill(first.pid, signal.SIGKILL)  # mid-alert: nothing delivered yet
        first.wait(30)
    finally:
        stop(first)
    with open_store(url) as store:
        rows = alert_history(store)
    assert sorted(r["rule"] for r in rows) == ["failures-json", "failures-slack"]
    assert all(r["delivery"] == "pending" and r["attempts"] >= 1 for r in rows)
    assert not receiver.delivered()
    receiver.refusing = False
    second = _start_server(url, config_dir, log, port)
    try:
        wait_for(lambda: len(receiver.delivered()) >= 2, "both alerts delivered after the restart")
        # the restarted server has evaluated the rules several times since: the condition
        # still holds, and nothing is delivered again
        after = wait_for(lambda: _alerts_api(port), "the alerts API")["evaluations"]
        wait_for(
            lambda: (_alerts_api(port) or {}).get("evaluations", 0) >= after + 5,
            "five more evaluations",
        )
        shown = _alerts_api(port)
        assert shown is not None
    finally:
        stop(second)
    delivered = receiver.delivered()
    assert len(delivered) == 2
    slack = next(d for d in delivered if set(d) == {"text"})
    plain = next(d for d in delivered if "alert_id" in d)
    ids = {r["id"] for r in rows}
    assert plain["alert_id"] in ids and plain["condition"] == f"cluster:{cid}"
    assert plain["detail"]["cluster_id"] == cid and plain["detail"]["tasks_erred"] == 1
    assert any(i in slack["text"] for i in ids - {plain["alert_id"]})
    assert {a["id"] for a in shown["alerts"]} == ids
    assert {a["delivery"] for a in shown["alerts"]} == {"delivered"}
    assert "Traceback" not in log.read_text()


def inc(x: int) -> int:
    return x + 1


def open_alerts(store: Any, rule_name: str) -> list[dict[str, Any]]:
    return [r for r in alert_history(store) if r["rule"] == rule_name and r["cleared_at"] is None]


def test_an_idle_cluster_holding_workers_alerts_until_it_runs_a_task(
    tmp_path: Path, receiver: Receiver
) -> None:

    from distributed import get_task_stream

    url = f"sqlite:///{tmp_path / 'idle.db'}"
    idle = AlertRule(
        name="idle", account="team", kind="idle", webhook=receiver.url, body_format="json",
        idle_minutes=0.05, lookback_hours=24,
    )  # fmt: skip
    receiver.refusing = False
    with (
        LocalCluster(
            n_workers=1, threads_per_worker=1, processes=False, dashboard_address=":0",
            silence_logs=logging.CRITICAL,
        ) as cluster,
        Client(cluster) as client,
        open_store(url) as store,
    ):  # fmt: skip
        cid = daskscope.register(
            client, database=url, account="team", flush_interval="200ms",
            worker_sampling_interval="200ms",
        )  # fmt: skip
        loop = AlertLoop(store, settings(idle))
        for round_ in (1, 2):
            with get_task_stream(client) as stream:
                client.submit(inc, round_, pure=False).result()
            daskscope.flush(client)
            last_stop = max(s["stop"] for t in stream.data for s in t["startstops"])
            # evaluated at chosen moments after the task's end (within the recorder's
            # signs of life): not idle just after it, idle from idle-minutes on
            loop.evaluate(last_stop + 1)
            assert not open_alerts(store, "idle"), round_
            loop.evaluate(last_stop + 4)
            (alert,) = open_alerts(store, "idle")
            assert alert["condition"] == f"cluster:{cid}"
            assert alert["detail"]["workers"] == len(client.scheduler_info()["workers"]) == 1
            assert alert["detail"]["idle_since"] == pytest.approx(last_stop, abs=1e-3)
            assert off_loop(loop.deliver(last_stop + 4)) == 1
            loop.evaluate(last_stop + 5)  # still idle: the same alert, not another
            assert len(alert_history(store)) == round_
        # a task ends the second idle spell: cleared
        with get_task_stream(client) as stream:
            client.submit(inc, 3, pure=False).result()
        daskscope.flush(client)
        loop.evaluate(max(s["stop"] for t in stream.data for s in t["startstops"]) + 1)
        assert not open_alerts(store, "idle")
    rows = alert_history(store)
    assert len(rows) == 2 and all(r["cleared_at"] is not None for r in rows)
    delivered = receiver.delivered()
    assert [d["alert_id"] for d in delivered] == [r["id"] for r in reversed(rows)]
    assert all(d["kind"] == "idle" and d["account"] == "team" for d in delivered)


def test_spend_over_the_budget_alerts_and_clears_under_it(
    recorded: dict[str, Any], receiver: Receiver, tmp_path: Path
) -> None:
    import dask

    url = store_copy(recorded, tmp_path)
    cid = recorded["cluster_id"]
    with open_store(url) as store, dask.config.set({"daskscope.cost": {"team": {
        "per-core-hour": 7200.0, "currency": "EUR"}}}):  # fmt: skip
        with store.engine.connect() as conn:
            core_seconds, started = conn.exec_driver_sql(
                "SELECT core_seconds, started_at FROM clusters WHERE id = ?", (cid,)
            ).one()
        spend = 2 * core_seconds  # 7,200 a core-hour: 2 a core-second; memory unpriced
        assert spend > 0
        now = time.time()

        def budget_rule(amount: float, period: float = 86400.0) -> AlertRule:
            return AlertRule(
                name="budget", account="team", kind="budget", webhook=receiver.url,
                body_format="json", idle_minutes=30, lookback_hours=24, budget=amount,
                period=period,
            )  # fmt: skip

        AlertLoop(store, settings(budget_rule(spend * 2))).evaluate(now)
        assert not alert_history(store)
        AlertLoop(store, settings(budget_rule(spend * 0.5))).evaluate(now)
        (alert,) = open_alerts(store, "budget")
        assert alert["detail"]["spend"] == pytest.approx(spend)
        assert alert["detail"]["currency"] == "EUR" and "EUR" in alert["summary"]
        # a period that no longer holds the cluster: back under budget, cleared
        AlertLoop(store, settings(budget_rule(spend * 0.5, now - started - 1))).evaluate(now)
        assert not open_alerts(store, "budget")
        assert len(alert_history(store)) == 1


def test_what_daskscope_regressions_flags_alerts_once(tmp_path: Path, receiver: Receiver) -> None:
    import datetime as dt

    from click.testing import CliRunner

    from daskscope.cli.main import cli
    from daskscope.store import write_records
    from factories import make_cluster, make_prefix

    url = f"sqlite:///{tmp_path / 'nightly.db'}"
    now = dt.datetime.now(dt.UTC).timestamp()
    records: list[Any] = []
    for day in range(11):  # a nightly cluster whose "sum" tasks take twice as long at the end
        slowed = day >= 8
        cluster = make_cluster(
            "nightly", start=now - (11 - day) * 86400,
            compute_seconds=40_000.0 if slowed else 20_000.0 + day,
        )  # fmt: skip
        records += [cluster, make_prefix(cluster, "sum", duration_s=200.0 if slowed else 100.0)]
    regressed = AlertRule(
        name="slower", account="atlas", kind="regression", webhook=receiver.url,
        body_format="json", idle_minutes=30, lookback_hours=24,
    )  # fmt: skip
    receiver.refusing = False
    with open_store(url) as store:
        write_records(store, records)
        flagged = CliRunner().invoke(cli, ["--database", url, "regressions", "--json"])
        assert flagged.exit_code == 1
        truth = {
            (r["kind"], r["name"], r["figure"], r["prefix"] or "")
            for r in json.loads(flagged.stdout)["regressions"]
        }
        assert truth  # the doubled compute time and task time of "sum"
        loop = AlertLoop(store, settings(regressed))
        loop.evaluate(now)
        loop.evaluate(now + 1)
        assert off_loop(loop.deliver(now + 1)) == len(truth)
        loop.evaluate(now + 2)
        assert off_loop(loop.deliver(now + 2)) == 0
        rows = alert_history(store)
    found = {(r["detail"]["kind"], r["detail"]["name"], r["detail"]["figure"],
              r["detail"]["prefix"] or "") for r in rows}  # fmt: skip
    assert found == truth and len(rows) == len(truth)
    assert {d["condition"] for d in receiver.delivered()} == {r["condition"] for r in rows}
    assert all(d["detail"]["history_url"].startswith("/history?") for d in receiver.delivered())


def off_loop(coroutine: Any) -> Any:
    """Run ``coroutine`` to its end in a thread of its own (Playwright's sync API holds
    an event loop in the test's thread)."""
    import asyncio
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coroutine).result()


def api(app: Any, method: str, url: str, **kwargs: Any) -> Any:
    """One request through the in-process ASGI client, off the test's thread."""
    from concurrent.futures import ThreadPoolExecutor

    from webutil import call

    with ThreadPoolExecutor(1) as pool:
        return pool.submit(call, app, method, url, **kwargs).result()


@needs_chromium
def test_the_history_page_lists_each_alert_with_its_delivery(
    recorded: dict[str, Any], receiver: Receiver, tmp_path: Path, open_page: Any
) -> None:
    pytest.importorskip("playwright.sync_api")
    from daskscope.web import create_app
    from webutil import serving

    url = store_copy(recorded, tmp_path)
    now = time.time() + 60
    with open_store(url) as store:
        loop = AlertLoop(store, settings(rule("refused", receiver.url, "json"),
                                         rule("taken", receiver.url + "?ok", "slack")))  # fmt: skip
        loop.evaluate(now)
        receiver.refusing = True
        off_loop(loop.deliver(now))  # both refused
        receiver.refusing = False
        assert off_loop(loop.deliver(now + 1)) == 2
        rows = {r["rule"]: r for r in alert_history(store)}
    app = create_app(url)
    try:
        with serving(app) as base:
            page = open_page()
            page.goto(f"{base}/alerts")
            listed = page.locator("#alerts-listing tbody tr")
            listed.first.wait_for(timeout=120_000)
            shown = {
                row.get_attribute("data-alert"): (row.get_attribute("data-delivery"),
                                                  row.locator("td").nth(5).inner_text())
                for row in listed.all()
            }  # fmt: skip
    finally:
        app.state.store.close()
    assert shown == {r["id"]: ("delivered", "2") for r in rows.values()}
    assert all(r["attempts"] == 2 for r in rows.values())


def test_an_account_admin_sets_rules_that_the_server_evaluates(
    recorded: dict[str, Any], receiver: Receiver, tmp_path: Path
) -> None:
    from daskscope.store.identity import add_user, create_account, create_token
    from daskscope.web import create_app

    url = store_copy(recorded, tmp_path)
    with open_store(url) as store:
        for account in ("team", "other"):
            create_account(store, account)
        add_user(store, "ada", account="team", admin=True)
        add_user(store, "bob", account="team")
        add_user(store, "eve", account="other", admin=True)
        tokens = {who: create_token(store, who) for who in ("ada", "bob", "eve")}

    def as_(who: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {tokens[who]}"}

    rule_body = {"kind": "failed", "webhook": receiver.url, "format": "json", "account": "other"}
    app = create_app(url, auth=True)
    try:
        path = "/api/v1/alerts/rules/team-failures"
        assert api(app, "PUT", path, json=rule_body, headers=as_("bob")).status_code == 403
        bad = api(app, "PUT", path, json={**rule_body, "kind": "nope"}, headers=as_("ada"))
        assert bad.status_code == 422 and "kind 'nope'" in bad.text
        put = api(app, "PUT", path, json=rule_body, headers=as_("ada"))
        assert put.status_code == 200, put.text
        assert put.json()["account"] == "team"  # the admin's own account, whatever asked
        taken = api(app, "PUT", path, json=rule_body, headers=as_("eve"))
        assert taken.status_code == 409  # another account's rule
        assert api(app, "DELETE", path, headers=as_("eve")).status_code == 404
        assert [r["name"] for r in api(app, "GET", "/api/v1/alerts/rules",
                                        headers=as_("eve")).json()] == []  # fmt: skip
        with open_store(url) as store:
            loop = AlertLoop(store, settings())  # no configured rules: the stored one
            assert [(r.name, r.account, r.kind) for r in loop.rules()] == [
                ("team-failures", "team", "failed")
            ]
            receiver.refusing = False
            loop.evaluate(time.time())
            assert off_loop(loop.deliver(time.time())) == 1
        (body,) = receiver.delivered()
        assert body["rule"] == "team-failures"
        assert body["condition"] == f"cluster:{recorded['cluster_id']}"
        listed = api(app, "GET", "/api/v1/alerts", headers=as_("bob")).json()
        assert [a["rule"] for a in listed["alerts"]] == ["team-failures"]
        assert api(app, "GET", "/api/v1/alerts", headers=as_("eve")).json()["alerts"] == []
        assert api(app, "DELETE", path, headers=as_("ada")).status_code == 200
        with open_store(url) as store:
            assert AlertLoop(store, settings()).rules() == []
    finally:
        app.state.store.close()


def test_dedup_and_the_outbox_on_both_databases(store: Any, receiver: Receiver) -> None:
    """The same state machine on SQLite and PostgreSQL: one open alert per condition
    (two loops, as two server processes), a claimed notification sent once."""
    from daskscope.store import write_records
    from factories import make_cluster

    now = time.time()
    failed = make_cluster("nightly", start=now - 600, account="team", tasks_erred=3)
    write_records(store, [failed])
    rules = settings(rule("failures", receiver.url, "json"))
    first, second = AlertLoop(store, rules), AlertLoop(store, rules)
    first.evaluate(now)
    second.evaluate(now + 1)
    (alert,) = alert_history(store)
    assert alert["condition"] == f"cluster:{failed.id}" and alert["detail"]["tasks_erred"] == 3
    receiver.refusing = False
    assert off_loop(first.deliver(now + 1)) + off_loop(second.deliver(now + 1)) == 1
    assert [d["alert_id"] for d in receiver.delivered()] == [alert["id"]]
    first.evaluate(now + 2 + 24 * 3600)  # out of the rule's day: cleared
    assert alert_history(store)[0]["cleared_at"] == now + 2 + 24 * 3600
