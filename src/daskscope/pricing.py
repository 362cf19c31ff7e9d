"""Prices of compute per account, read from config ``daskscope.cost``; the analyses get
them as data (``daskscope.analysis.cost``), never read config themselves."""

from __future__ import annotations

from daskscope import config
from daskscope.analysis.cost import Rates

__all__ = ["cost_rates"]


def cost_rates(account: str | None) -> Rates:
    """Prices for ``account`` from config ``daskscope.cost.<account>``, else ``default``.

    Returns ``{"account", "currency", "per_core_hour", "per_gib_hour"}``; a price that is
    not configured is absent. ``account`` says which config entry applied (None: none).
    """
    # Read the whole mapping: account names may contain dots, which dask's dotted
    # config lookup would split.
    table = config.get("cost") or {}
    used = account if account in table else "default" if "default" in table else None
    entry = (table.get(used) if used is not None else None) or {}
    rates: Rates = {"account": used, "currency": entry.get("currency", "USD")}
    core = entry.get("per-core-hour", entry.get("per_core_hour"))
    gib = entry.get("per-gib-hour", entry.get("per_gib_hour"))
    if core is not None:
        rates["per_core_hour"] = float(core)
    if gib is not None:
        rates["per_gib_hour"] = float(gib)
    return rates
