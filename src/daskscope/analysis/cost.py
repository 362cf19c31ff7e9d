"""Cost, computed once: core-hours x per-core-hour + GiB-hours x per-gib-hour.

The prices come in as data (:class:`Rates`, made by :func:`daskscope.pricing.cost_rates`
from config); nothing here reads config.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypedDict

__all__ = ["GIB", "HOUR", "Rates", "RatesOf", "cost", "cost_parts"]

GIB = 2**30
HOUR = 3600.0


class Rates(TypedDict, total=False):
    """Prices of one account; a price that is not configured is absent."""

    account: str | None  # the config entry that applied (None: none did)
    currency: str
    per_core_hour: float
    per_gib_hour: float


#: The rates of an account, by its name (``daskscope.pricing.cost_rates``)
RatesOf = Callable[[str | None], Mapping[str, Any]]


def cost_parts(
    core_seconds: float, memory_byte_seconds: float, rates: Mapping[str, Any]
) -> dict[str, Any] | None:
    """``{"total", "cores", "memory", "currency", "per_core_hour", "per_gib_hour",
    "account"}``: the cost with the rates it used as its basis; None without a
    per-core-hour price (memory unpriced costs 0)."""
    per_core = rates.get("per_core_hour")
    if per_core is None:
        return None
    per_gib = rates.get("per_gib_hour")
    cores = core_seconds / HOUR * float(per_core)
    memory = memory_byte_seconds / GIB / HOUR * float(per_gib) if per_gib is not None else 0.0
    return {
        "total": cores + memory,
        "cores": cores,
        "memory": memory,
        "currency": rates.get("currency", "USD"),
        "per_core_hour": float(per_core),
        "per_gib_hour": None if per_gib is None else float(per_gib),
        "account": rates.get("account"),
    }


def cost(core_seconds: float, memory_byte_seconds: float, rates: Mapping[str, Any]) -> float | None:
    """core-hours x per-core-hour + GiB-hours x per-gib-hour; None without a core price."""
    parts = cost_parts(core_seconds, memory_byte_seconds, rates)
    return None if parts is None else float(parts["total"])
