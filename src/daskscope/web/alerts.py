"""The server's alerts (issue 30): rules from the config evaluated every
``daskscope.alerts.interval`` in the server process, and their notifications delivered
to webhooks with retries.

Deduplication and delivery state live in the store (:mod:`daskscope.store.alerts`), not
in this process: a condition that still holds is not alerted again after a restart, and
a notification pending when the server stopped is delivered by the next one. Each
notification carries its alert's id (``alert_id``; in the text of Slack and Teams
bodies), for a receiver that wants to drop a repeat after a crash between a receiver's
answer and its recording.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any

from daskscope import config
from daskscope.analysis.cost import cost_parts
from daskscope.format import money_text, timestamp_text
from daskscope.pricing import cost_rates
from daskscope.store import Store
from daskscope.store.alerts import (
    Condition,
    claim_due,
    clear_others,
    fire,
    record_attempt,
)
from daskscope.views.history import regressions_view

__all__ = [
    "KINDS",
    "AlertLoop",
    "AlertRule",
    "AlertSettings",
    "alert_body",
    "alert_settings",
    "rule_from",
]

logger = logging.getLogger("daskscope")

KINDS = ("failed", "idle", "budget", "regression")
FORMATS = ("json", "slack", "teams")


@dataclass(frozen=True, slots=True)
class AlertRule:
    name: str
    account: str
    kind: str
    webhook: str
    body_format: str
    #: idle: minutes without a task while holding workers
    idle_minutes: float
    #: failed: clusters started within this many hours
    lookback_hours: float
    #: budget: the most the account may spend in the last ``period`` seconds
    budget: float | None = None
    period: float = 30 * 86400.0


@dataclass(frozen=True, slots=True)
class AlertSettings:
    interval: float
    retry_backoff: float
    retry_max_backoff: float
    max_attempts: int
    timeout: float
    rules: tuple[AlertRule, ...]


def rule_from(raw: Any, where: str) -> AlertRule:
    """A rule as the configuration spells it; ValueError names ``where`` and what is
    wrong."""
    if not isinstance(raw, Mapping):
        raise ValueError(f"{where} must be a mapping with name, account, kind and webhook")
    missing = [k for k in ("name", "kind", "webhook") if not raw.get(k)]
    if missing:
        raise ValueError(f"{where} lacks {', '.join(missing)}")
    kind, body_format = str(raw["kind"]), str(raw.get("format", "json"))
    if kind not in KINDS:
        raise ValueError(f"{where}: kind {kind!r} is not one of {', '.join(KINDS)}")
    if body_format not in FORMATS:
        raise ValueError(f"{where}: format {body_format!r} is not one of {', '.join(FORMATS)}")
    if kind == "budget" and not isinstance(raw.get("budget"), (int, float)):
        raise ValueError(f"{where}: a budget rule needs budget: an amount (the cost's currency)")
    webhook = str(raw["webhook"])
    if not webhook.startswith(("http://", "https://")):
        raise ValueError(f"{where}: webhook must be an http(s) URL, got {webhook!r}")
    return AlertRule(
        name=str(raw["name"]),
        account=str(raw.get("account") or config.get("account") or "default"),
        kind=kind,
        webhook=webhook,
        body_format=body_format,
        idle_minutes=float(raw.get("idle-minutes", 30)),
        lookback_hours=float(raw.get("lookback-hours", 24)),
        budget=float(raw["budget"]) if kind == "budget" else None,
        period=config._duration(f"{where}.period", raw.get("period", "30 days")),
    )


def alert_settings() -> AlertSettings:
    """The alert settings from the config; a wrong rule raises ValueError naming it."""
    section = config.get("alerts") or {}
    raw_rules = section.get("rules") or ()
    rules = tuple(rule_from(r, f"daskscope.alerts.rules[{i}]") for i, r in enumerate(raw_rules))
    names = [r.name for r in rules]
    if len(set(names)) != len(names):
        raise ValueError("daskscope.alerts.rules: two rules have the same name")
    return AlertSettings(
        interval=config._duration("alerts.interval", section.get("interval", "30s")),
        retry_backoff=config._duration("alerts.retry-backoff", section.get("retry-backoff", "5s")),
        retry_max_backoff=config._duration(
            "alerts.retry-max-backoff", section.get("retry-max-backoff", "10 minutes")
        ),
        max_attempts=int(section.get("max-attempts", 20)),
        timeout=config._duration("alerts.timeout", section.get("timeout", "10s")),
        rules=rules,
    )


def alert_body(row: Mapping[str, Any]) -> dict[str, Any]:
    """The notification of one alert in its rule's format: JSON of the alert, Slack's
    ``{"text": ...}`` or a Teams MessageCard."""
    text = (
        f"daskscope alert [{row['rule']}] {row['summary']} "
        f"(since {timestamp_text(row['fired_at'])} UTC; alert {row['id']})"
    )
    if row["body_format"] == "slack":
        return {"text": text}
    if row["body_format"] == "teams":
        return {
            "@type": "MessageCard",
            "@context": "https://schema.org/extensions",
            "summary": f"daskscope alert [{row['rule']}]",
            "title": f"daskscope alert: {row['rule']}",
            "text": text,
        }
    return {
        "alert_id": row["id"],
        "rule": row["rule"],
        "kind": row["kind"],
        "account": row["account"],
        "condition": row["condition"],
        "summary": row["summary"],
        "fired_at": row["fired_at"],
        "detail": row["detail"],
    }


class AlertLoop:
    """Evaluates the rules and delivers what is due, every ``interval``."""

    def __init__(self, store: Store, settings: AlertSettings) -> None:
        self.store = store
        self.settings = settings
        #: evaluations done by this process (the history's JSON reports it)
        self.evaluations = 0

    def conditions(self, rule: AlertRule, now: float) -> list[Condition]:
        if rule.kind == "failed":
            return self.store.failed_clusters(rule.account, now - rule.lookback_hours * 3600)
        if rule.kind == "budget":
            return self.over_budget(rule, now)
        if rule.kind == "regression":
            return self.regressions(rule, now)
        return self.store.idle_clusters(rule.account, rule.idle_minutes * 60, now)

    def over_budget(self, rule: AlertRule, now: float) -> list[Condition]:
        """The account's spend over the clusters started in the last ``period``, when
        it exceeds the budget (the cost as every page computes it)."""
        rows = self.store.account_totals(since=now - rule.period, account=rule.account)
        if not rows:
            return []
        rates = cost_rates(rule.account)
        parts = cost_parts(rows[0]["core_seconds"], rows[0]["memory_limit_byte_seconds"], rates)
        if parts is None or rule.budget is None or parts["total"] <= rule.budget:
            return []
        days = rule.period / 86400
        return [
            Condition(
                key=f"budget:{rule.period:g}",
                summary=f"account {rule.account} spent "
                f"{money_text(parts['total'], parts['currency'])} in the last {days:g} days, "
                f"over its budget of {money_text(rule.budget, parts['currency'])}",
                detail={
                    "account": rule.account,
                    "spend": parts["total"],
                    "budget": rule.budget,
                    "currency": parts["currency"],
                    "period_s": rule.period,
                },
            )
        ]

    def regressions(self, rule: AlertRule, now: float) -> list[Condition]:
        """What ``daskscope regressions`` flags for the account now."""
        view = regressions_view(self.store, account=rule.account, now=now)
        return [
            Condition(
                key=f"regression:{r.kind}:{r.name}:{r.figure}:{r.prefix or ''}",
                summary=f"{r.label} of {r.kind} {r.name}"
                f"{f' (prefix {r.prefix})' if r.prefix else ''} regressed",
                detail={
                    "kind": r.kind,
                    "name": r.name,
                    "figure": r.figure,
                    "prefix": r.prefix,
                    "history_url": r.history_url,
                },
            )
            for r in view.regressions
        ]

    def rules(self) -> list[AlertRule]:
        """The configuration's rules, then those the accounts' admins set (a stored rule
        that no longer reads, or that a configured rule's name hides, is skipped)."""
        found = list(self.settings.rules)
        names = {r.name for r in found}
        for row in self.store.stored_rules():
            if row["name"] in names:
                continue
            try:
                found.append(
                    rule_from(
                        {**row["rule"], "name": row["name"], "account": row["account"]},
                        f"rule {row['name']}",
                    )
                )
            except ValueError:
                logger.warning(
                    "daskscope: stored alert rule %r skipped", row["name"], exc_info=True
                )
        return found

    def evaluate(self, now: float) -> None:
        """Open an alert for each condition that holds and has none open; clear those
        that no longer hold."""
        for rule in self.rules():
            holding = self.conditions(rule, now)
            for condition in holding:
                fire(self.store, rule=rule.name, account=rule.account, kind=rule.kind,
                     condition=condition, webhook=rule.webhook, body_format=rule.body_format,
                     now=now)  # fmt: skip
            clear_others(self.store, rule.name, [c.key for c in holding], now)

    async def deliver(self, now: float) -> int:
        """Send every due notification once; returns how many were delivered."""
        import httpx

        s = self.settings
        due = await asyncio.to_thread(claim_due, self.store, now, hold=s.timeout + s.interval)
        delivered = 0
        async with httpx.AsyncClient(timeout=s.timeout, follow_redirects=False) as client:
            for row in due:
                error: str | None = None
                try:
                    answer = await client.post(row["webhook"], json=alert_body(row))
                    if not answer.is_success:
                        error = f"HTTP {answer.status_code}"
                except httpx.HTTPError as exc:
                    error = f"{type(exc).__name__}: {exc}"
                attempts = row["attempts"] + 1
                retry_at = None
                if error is not None and attempts < s.max_attempts:
                    wait = min(s.retry_max_backoff, s.retry_backoff * 2 ** (attempts - 1))
                    retry_at = time.time() + wait
                if error is not None:
                    logger.warning("daskscope: alert %s not delivered (%s)", row["id"], error)
                delivered += error is None
                await asyncio.to_thread(
                    record_attempt, self.store, row["id"], now=time.time(), error=error,
                    retry_at=retry_at,
                )  # fmt: skip
        return delivered

    async def step(self) -> None:
        now = time.time()
        await asyncio.to_thread(self.evaluate, now)
        await self.deliver(now)
        self.evaluations += 1

    async def run(self) -> None:
        while True:
            try:
                await self.step()
            except asyncio.CancelledError:
                raise
            except Exception:  # the next round tries again; the server goes on
                logger.exception("daskscope: evaluating alerts failed")
            await asyncio.sleep(self.settings.interval)


@contextlib.asynccontextmanager
async def alerts_running(store: Store, state: Any) -> AsyncIterator[None]:
    """The alert loop for the server's lifetime (``state.alerts``): rules may come from
    the configuration or, at any time, from an account's admin."""
    state.alerts = AlertLoop(store, alert_settings())
    task = asyncio.create_task(state.alerts.run())
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
