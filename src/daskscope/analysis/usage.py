"""Account-level usage from summed cluster rows (pure, no database); prices come in as
``rates`` (an account name -> :class:`daskscope.analysis.cost.Rates`)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from daskscope.analysis.cost import GIB, HOUR, RatesOf, cost

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


def _pricing(rates: Mapping[str, Any]) -> tuple[float, float] | None:
    """Cost per core-second and per memory-limit byte-second at ``rates`` (what
    :func:`cost` multiplies by), None without a core price; taken once per account."""
    per_core = rates.get("per_core_hour")
    if per_core is None:
        return None
    per_gib = rates.get("per_gib_hour")
    return float(per_core) / HOUR, 0.0 if per_gib is None else float(per_gib) / GIB / HOUR


def member_usage(weekly: Iterable[Row], rates: RatesOf) -> dict[str, Any]:
    """Weekly rows of ``store.analytics.weekly_usage`` as one series per member.

    Returns ``{"weeks": [week_start...], "members": [{"user", "cluster_hours",
    "compute_hours", "cost", "clusters"}]}`` where each series has one value per week (0
    where the member had no cluster that week). Members are the users; accounts are
    summed, each priced at its own rates (0 where unpriced).
    """
    rows = list(weekly)
    weeks = sorted({r["week_start"] for r in rows})
    index = {w: i for i, w in enumerate(weeks)}
    members: dict[str, dict[str, Any]] = {}
    prices: dict[Any, tuple[float, float] | None] = {}
    for r in rows:
        m = members.get(r["user"])
        if m is None:
            m = members[r["user"]] = {
                "user": r["user"],
                "cluster_hours": [0.0] * len(weeks),
                "compute_hours": [0.0] * len(weeks),
                "cost": [0.0] * len(weeks),
                "clusters": [0] * len(weeks),
            }
        i = index[r["week_start"]]
        m["cluster_hours"][i] += r["cluster_seconds"] / HOUR
        m["compute_hours"][i] += r["compute_seconds"] / HOUR
        m["clusters"][i] += r["clusters"]
        account = r["account"]
        if account not in prices:
            prices[account] = _pricing(rates(account))
        price = prices[account]
        if price is not None:
            m["cost"][i] += r["core_seconds"] * price[0] + r["memory_limit_byte_seconds"] * price[1]
    return {"weeks": weeks, "members": sorted(members.values(), key=lambda m: m["user"])}
