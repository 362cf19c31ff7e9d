"""Coffea-specific bits. coffea itself is imported only inside functions that need it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["is_coffea_report", "processor_prefixes", "report_to_plain"]

#: Keys of coffea's ``savemetrics`` report (classic processor path)
_REPORT_KEYS = ("entries", "bytesread", "chunks", "processtime", "columns")


def processor_prefixes(processor_instance: Any) -> set[str]:
    """Task prefixes of the processor's chunks: coffea's ``DaskExecutor`` names the
    work tasks after the processor's class."""
    if processor_instance is None:
        return set()
    if isinstance(processor_instance, type):
        return {processor_instance.__name__}
    return {type(processor_instance).__name__}


def is_coffea_report(report: Any) -> bool:
    """Whether ``report`` is coffea's ``savemetrics`` report (a mapping of figures), not
    uproot's report of the dask-awkward path (``{dataset: rows}``, rows, or still lazy)."""
    if hasattr(report, "__dask_graph__") or not isinstance(report, Mapping):
        return False
    return not report or any(key in report for key in _REPORT_KEYS)


def report_to_plain(report: Mapping[str, Any]) -> dict[str, Any]:
    """coffea's ``savemetrics`` report as JSON-able values (sets become sorted lists)."""
    out: dict[str, Any] = {}
    for key, value in dict(report).items():
        if isinstance(value, (set, frozenset)):
            value = sorted(str(v) for v in value)
        elif hasattr(value, "item"):  # numpy scalars
            value = value.item()
        elif not isinstance(value, (str, int, float, bool, list, dict, type(None))):
            value = str(value)
        out[str(key)] = value
    return out
