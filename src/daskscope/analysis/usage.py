"""Account-level usage from summed cluster rows (pure, no database); prices come in as
``rates`` (an account name -> :class:`daskscope.analysis.cost.Rates`)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from daskscope.analysis.cost import HOUR, RatesOf, cost

__all__ = ["account_statistics", "cost", "member_usage"]

Row = Mapping[str, Any]


_SUMMED = (
    "clusters",
    "cluster_seconds",
    "core_seconds",
    "compute_seconds",
    "memory_limit_byte_seconds",
    "bytes_processed",
    "tasks_executed",
    "tasks_erred",
)


def account_statistics(per_account: Iterable[Row], rates: RatesOf) -> dict[str, Any]:
    """Totals over accounts, with cost priced per account and the basis shown.

    ``cost`` is absent when some account has no per-core-hour price (a partial sum
    would look complete). ``basis`` lists the rates used per account.
    """
    totals: dict[str, Any] = dict.fromkeys(_SUMMED, 0)
    total_cost: float | None = 0.0
    basis = []
    currencies = set()
    for row in per_account:
        for key in _SUMMED:
            totals[key] += row.get(key) or 0
        account_rates = rates(row.get("account"))
        basis.append({"account": row.get("account"), **account_rates})
        currencies.add(account_rates.get("currency", "USD"))
        value = cost(row["core_seconds"], row["memory_limit_byte_seconds"], account_rates)
        total_cost = None if value is None or total_cost is None else total_cost + value
    if total_cost is not None and len(currencies) <= 1:
        totals["cost"] = total_cost
        totals["currency"] = next(iter(currencies), "USD")
    totals["cost_basis"] = basis
    return totals


def member_usage(weekly: Iterable[Row], rates: RatesOf) -> dict[str, Any]:
    """Weekly rows of ``store.analytics.weekly_usage`` shaped for stacked bars.

    Returns ``{"weeks": [week_start...], "members": [{"user", "cluster_hours",
    "compute_hours", "cost"}]}`` where each series has one value per week (0 where the
    member had no cluster that week). Members are the users; accounts are summed.
    """
    rows = list(weekly)
    weeks = sorted({r["week_start"] for r in rows})
    index = {w: i for i, w in enumerate(weeks)}
    members: dict[str, dict[str, Any]] = {}
    cache: dict[Any, Mapping[str, Any]] = {}
    for r in rows:
        m = members.setdefault(
            r["user"],
            {
                "user": r["user"],
                "cluster_hours": [0.0] * len(weeks),
                "compute_hours": [0.0] * len(weeks),
                "cost": [0.0] * len(weeks),
                "clusters": [0] * len(weeks),
            },
        )
        i = index[r["week_start"]]
        m["cluster_hours"][i] += r["cluster_seconds"] / HOUR
        m["compute_hours"][i] += r["compute_seconds"] / HOUR
        m["clusters"][i] += r["clusters"]
        if r["account"] not in cache:
            cache[r["account"]] = rates(r["account"])
        value = cost(r["core_seconds"], r["memory_limit_byte_seconds"], cache[r["account"]])
        m["cost"][i] += value or 0.0
    return {"weeks": weeks, "members": sorted(members.values(), key=lambda m: m["user"])}
