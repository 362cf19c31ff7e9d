"""uproot's report of a dask-awkward read (``allow_read_errors_with_report=True``) as
plain rows, one per partition, and the figures summed over them."""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["NO_ENTRY_RANGES", "per_dataset", "report_figures", "report_rows"]

NO_ENTRY_RANGES = (
    "uproot's report gives step numbers, not entry ranges (files without explicit "
    "'steps'): events per partition are unknown"
)


def _literal(text: Any) -> Any:
    # uproot stores each argument as repr(); ints, strings and bools come back exactly
    if not isinstance(text, str):
        return text
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def report_rows(report: Any) -> list[dict[str, Any]]:
    """uproot's computed report as plain rows, one per partition.

    ``report``: what ``dask.compute`` returned for the report of ``apply_to_fileset``
    (``{dataset: awkward.Array}``), of ``NanoEventsFactory.from_root(...).events()`` or
    of ``uproot.dask`` (an ``awkward.Array``), or lists of row dicts. Each row has
    ``dataset``, ``file``, ``object_path``, ``entry_start``, ``entry_stop``,
    ``entries`` (None when uproot's arguments are step numbers), ``duration_s``,
    ``bytes_read``, ``requests``, ``requested_chunks``, ``exception``, ``message``.
    """
    if isinstance(report, Mapping):
        rows: list[dict[str, Any]] = []
        for dataset, part in report.items():
            for row in report_rows(part):
                row["dataset"] = str(dataset)
                rows.append(row)
        return rows
    if hasattr(report, "__dask_graph__"):
        raise TypeError(
            "the uproot report is still lazy: compute it together with the output "
            "(dask.compute(out, report)) and pass the computed report"
        )
    if hasattr(report, "to_list"):
        report = report.to_list()
    if not isinstance(report, Iterable) or isinstance(report, (str, bytes)):
        raise TypeError(
            f"not an uproot report: {type(report).__name__}; expected the computed report "
            "of apply_to_fileset / uproot.dask with allow_read_errors_with_report=True"
        )
    return [_row(raw) for raw in report]


def _row(raw: Mapping[str, Any]) -> dict[str, Any]:
    if not isinstance(raw, Mapping) or "args" not in raw:
        raise TypeError(
            f"not a row of uproot's report: {raw!r}; expected fields args, duration, "
            "performance_counters, exception"
        )
    args = [_literal(a) for a in raw.get("args") or []]
    file = object_path = start = stop = None
    if len(args) == 5:  # open_files=False: file, object path, start/step, stop/steps, is_chunk
        file, object_path = args[0], args[1]
        if args[4] is True:
            start, stop = args[2], args[3]
    elif len(args) == 3:  # open_files=True: the TTree, start, stop
        file, start, stop = args[0], args[1], args[2]
    ranged = isinstance(start, int) and isinstance(stop, int)
    counters = raw.get("performance_counters") or {}
    return {
        "dataset": None,
        "file": file,
        "object_path": object_path,
        "entry_start": start if ranged else None,
        "entry_stop": stop if ranged else None,
        "entries": stop - start if ranged else None,  # type: ignore[operator]
        "duration_s": raw.get("duration"),
        "bytes_read": counters.get("num_requested_bytes"),
        "requests": counters.get("num_requests"),
        "requested_chunks": counters.get("num_requested_chunks"),
        "exception": raw.get("exception"),
        "message": raw.get("message"),
    }


def _total(rows: list[dict[str, Any]], key: str) -> Any:
    values = [r[key] for r in rows]
    return None if any(v is None for v in values) else sum(values)


def report_figures(rows: list[dict[str, Any]]) -> tuple[dict[str, Any], dict[str, str]]:
    """(figures, not_measured) over the report's rows.

    Events, bytes, requests and read seconds are summed over the partitions that were
    read; a failed partition counts only in ``partitions_failed``.
    """
    ok = [r for r in rows if r["exception"] is None]
    figures: dict[str, Any] = {
        "partitions": len(rows),
        "partitions_failed": len(rows) - len(ok),
        "bytes_read": sum(r["bytes_read"] or 0 for r in ok),
        "read_requests": sum(r["requests"] or 0 for r in ok),
        "read_time_s": sum(r["duration_s"] or 0.0 for r in ok),
    }
    missing: dict[str, str] = {}
    events = _total(ok, "entries")
    if events is None:
        missing["total_events"] = NO_ENTRY_RANGES
    else:
        figures["total_events"] = events
    return figures, missing


def per_dataset(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for name in dict.fromkeys(r["dataset"] for r in rows):
        figures, _ = report_figures([r for r in rows if r["dataset"] == name])
        out[str(name)] = figures
    return out
