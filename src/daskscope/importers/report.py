"""A Dask ``performance_report`` page as the recorder's records.

The page is Bokeh's standalone HTML: its figures are one Bokeh document, kept as JSON in
a ``<script type="application/json">``. Bokeh itself loads that document
(``Document.from_json``); its task stream's rectangles (key, worker and thread, the
middle and length of each action, in milliseconds) become task-log executions and the
task groups and prefixes they add up to, and the "Worker Profile (compute)" tab's
rectangles become a profile tree.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Iterable, Mapping
from html.parser import HTMLParser
from typing import Any

from daskscope import config
from daskscope.importers.errors import BadImportFile
from daskscope.importers.imported import Imported, mark_imported, prefixes_of
from daskscope.importers.naming import dask_key, group_of, prefix_of
from daskscope.model import (
    ClusterRecord,
    ProfileRecord,
    Record,
    TaskGroupRecord,
    WorkerSampleRecord,
    stable_id,
)
from daskscope.tasklog.segments import Execution, encode_segment, execution

__all__ = ["ALWAYS_MISSING", "report_records"]

ALWAYS_MISSING = (
    "task states other than finished (a report holds the executions in its window)",
    "output sizes (nbytes)",
    "errors' exceptions and tracebacks (a failed execution is only drawn black)",
    "computations",
    "spans and fine metrics",
    "worker memory limits and samples (threads counted are those seen running tasks)",
    "transfers' source workers",
    "anything outside the report's window",
)

#: Dask's task stream names an action's rectangle by this prefix, a compute by none
_ACTION_PREFIXES = ("transfer-", "disk-write-", "disk-read-", "deserialize-")
#: the task stream draws a failed execution black (distributed.diagnostics.task_stream)
_ERRED_COLOUR = "black"
_TASK_STREAM_COLUMNS = {"start", "duration", "key", "name", "worker", "worker_thread"}
_PROFILE_COLUMNS = {"left", "right", "bottom", "name", "filename", "line_number", "time"}
#: Dask's profile interval behind the report's profile times (profile.plot_data)
_PROFILE_INTERVAL = 0.010


def _bad(message: str) -> Exception:
    return BadImportFile(message)


class _JsonScripts(HTMLParser):
    """The contents of the page's ``<script type="application/json">`` elements."""

    def __init__(self) -> None:
        super().__init__()
        self.found: list[str] = []
        self._open: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "script" and dict(attrs).get("type") == "application/json":
            self._open = []

    def handle_data(self, data: str) -> None:
        if self._open is not None:
            self._open.append(data)

    def handle_endtag(self, tag: str) -> None:
        if tag == "script" and self._open is not None:
            self.found.append("".join(self._open))
            self._open = None


def _document(page: str, file: str) -> Any:
    from bokeh.document import Document

    parser = _JsonScripts()
    parser.feed(page)
    for text in parser.found:
        try:
            docs = json.loads(text)
        except ValueError:
            continue
        if isinstance(docs, Mapping) and docs:
            try:
                return Document.from_json(next(iter(docs.values())))
            except Exception as exc:  # bokeh raises what its deserializer meets
                raise _bad(
                    f"{file}: its Bokeh document cannot be read ({type(exc).__name__}: {exc}); "
                    "expected a Dask performance_report HTML file"
                ) from None
    raise _bad(
        f"{file}: no Bokeh document in it; expected a Dask performance_report HTML file "
        '(distributed.performance_report(filename="….html"))'
    )


def _panel_sources(doc: Any) -> dict[str, list[Any]]:
    """Each tab's title with the data sources under it."""
    from bokeh.models import ColumnDataSource, TabPanel

    return {
        panel.title: list(panel.child.select({"type": ColumnDataSource}))
        for root in doc.roots
        for panel in root.select({"type": TabPanel})
    }


def _summary_text(doc: Any) -> str:
    from bokeh.models import Div  # type: ignore[attr-defined]

    for root in doc.roots:
        for div in root.select({"type": Div}):
            # Bokeh keeps the Div's markup escaped in the document
            text = html.unescape(str(div.text))
            if "Dask Performance Report" in text:
                return text
    return ""


def _summary_field(text: str, label: str) -> str:
    # the summary tab's list items: "<li> Address: tcp://… </li>"
    found = re.search(rf"<li>\s*{re.escape(label)}:\s*([^<]*?)\s*</li>", text)
    return found.group(1) if found else ""


def _thread(worker: str, worker_thread: str) -> int | None:
    rest = worker_thread[len(worker) + 1 :] if worker_thread.startswith(worker + "-") else ""
    return int(rest) if rest.isdigit() else None


def _executions(data: Mapping[str, list[Any]]) -> list[Execution]:
    """One execution per (key, worker thread): its actions' rectangles put together."""
    by_run: dict[tuple[Any, str], dict[str, Any]] = {}
    columns = zip(
        data["key"], data["name"], data["worker"], data["worker_thread"], data["start"],
        data["duration"], data.get("color", [""] * len(data["key"])), strict=False,
    )  # fmt: skip
    for key, name, worker, worker_thread, middle_ms, length_ms, colour in columns:
        key = dask_key(key)
        action = next((p[:-1] for p in _ACTION_PREFIXES if str(name).startswith(p)), "compute")
        start = float(middle_ms) / 1000 - float(length_ms) / 2000
        run = by_run.setdefault(
            (key if not isinstance(key, list) else tuple(key), str(worker_thread)),
            {"key": key, "worker": str(worker), "thread": _thread(str(worker), str(worker_thread)),
             "startstops": [], "erred": False},
        )  # fmt: skip
        run["startstops"].append(
            {"action": action, "start": start, "stop": start + float(length_ms) / 1000}
        )
        run["erred"] |= action == "compute" and colour == _ERRED_COLOUR
    found = []
    for run in by_run.values():
        group = group_of(run["key"])
        startstops = sorted(run["startstops"], key=lambda s: s["start"])
        found.append(
            execution(run["key"], group, prefix_of(group), run["worker"], run["thread"],
                      startstops, erred=run["erred"], nbytes=None, computation=None, span=None)
        )  # fmt: skip
    return found


def _groups(cluster_id: str, executions: Iterable[Execution]) -> list[TaskGroupRecord]:
    records: dict[str, TaskGroupRecord] = {}
    for e in executions:
        key, group, erred = e[0], e[1], e[8]
        actions = e[7] or [{"action": "compute", "start": e[5], "stop": e[6]}]
        g = records.setdefault(
            group,
            TaskGroupRecord(
                id=stable_id(cluster_id, "task-group", group),
                cluster_id=cluster_id,
                name=group,
                prefix=e[2],
                states={},
            ),
        )
        state = "erred" if erred else "memory"
        g.states[state] = g.states.get(state, 0) + 1
        g.tasks_total += 1
        g.tasks_executed += not erred
        g.tasks_erred += bool(erred)
        for a in actions:
            seconds = a["stop"] - a["start"]
            g.durations[a["action"]] = g.durations.get(a["action"], 0.0) + seconds
            if a["action"] == "compute":
                g.duration_s += seconds
            g.started_at = min(g.started_at or a["start"], a["start"])
            g.stopped_at = max(g.stopped_at or a["stop"], a["stop"])
        del key
    return list(records.values())


def _profile_tree(data: Mapping[str, list[Any]]) -> dict[str, Any] | None:
    """Dask's profile tree again from its flame graph's rectangles: each node's parent
    is the rectangle one row down that spans it; counts are widths times the root's
    samples (its time over Dask's profile interval)."""
    from dask.utils import parse_timedelta

    rows = sorted(
        zip(data["bottom"], data["left"], data["right"], data["name"], data["filename"],
            data["line_number"], data.get("line", [""] * len(data["name"])), data["time"],
            strict=False),
        key=lambda r: (r[0], r[1]),
    )  # fmt: skip
    if not rows or rows[0][0] != 0:
        return None
    try:
        total = round(float(parse_timedelta(str(rows[0][7]).replace(" ", ""))) / _PROFILE_INTERVAL)
    except (ValueError, TypeError, KeyError):
        return None
    if total <= 0:
        return None
    by_depth: dict[int, list[tuple[float, float, dict[str, Any]]]] = {}
    root: dict[str, Any] | None = None
    for depth, left, right, name, filename, line_number, line, _ in rows:
        node = {
            "identifier": f"{name};{filename};{line_number}",
            "description": {"name": name, "filename": filename, "line_number": line_number,
                            "line": line},
            "count": round((float(right) - float(left)) * total),
            "children": {},
        }  # fmt: skip
        if depth == 0:
            root = node
        else:
            parent = next(
                (n for lo, hi, n in by_depth.get(int(depth) - 1, ())
                 if lo - 1e-9 <= float(left) < hi),
                None,
            )  # fmt: skip
            if parent is None:
                continue
            parent["children"][node["identifier"]] = node
        by_depth.setdefault(int(depth), []).append((float(left), float(right), node))
    if root is not None:
        root["count"] = total
    return root


def report_records(page: str, *, file: str, imported_at: float) -> Imported:
    """The records of a performance report's page. Raises BadImportFile."""
    doc = _document(page, file)
    panels = _panel_sources(doc)
    stream = next(
        (s.data for s in panels.get("Task Stream", []) if set(s.data) >= _TASK_STREAM_COLUMNS),
        None,
    )
    if stream is None:
        raise _bad(
            f"{file}: a Bokeh page without Dask's task stream; expected a Dask "
            "performance_report HTML file"
        )
    summary = _summary_text(doc)
    address = _summary_field(summary, "Address")
    executions = _executions(stream)
    firsts = [e[5] if e[7] is None else min(a["start"] for a in e[7]) for e in executions]
    lasts = [e[6] if e[7] is None else max(a["stop"] for a in e[7]) for e in executions]
    started = min(firsts, default=imported_at)
    stopped = max(lasts, default=started)
    cluster_id = stable_id("imported-report", address, started, len(executions))
    groups = _groups(cluster_id, executions)
    threads: dict[str, set[Any]] = {}
    for e in executions:
        threads.setdefault(e[3], set()).add(e[4])
    samples = [
        WorkerSampleRecord(
            id=stable_id(cluster_id, "worker-sample", worker, stopped),
            cluster_id=cluster_id,
            worker=worker,
            sampled_at=stopped,
            nthreads=len(seen),
        )
        for worker, seen in sorted(threads.items())
    ]
    records: list[Record] = [*groups, *prefixes_of(cluster_id, groups), *samples]
    tree = next(
        (
            _profile_tree(s.data)
            for s in panels.get("Worker Profile (compute)", [])
            if set(s.data) >= _PROFILE_COLUMNS and s.data["left"]
        ),
        None,
    )
    missing = list(ALWAYS_MISSING)
    if tree is not None:
        records.append(
            ProfileRecord(
                id=stable_id(cluster_id, "profile", started),
                cluster_id=cluster_id,
                started_at=started,
                stopped_at=stopped,
                samples=int(tree["count"]),
                tree=tree,
            )
        )
    else:
        missing.append("a profile (the report's compute profile is empty)")
    if executions:
        records += encode_segment(cluster_id, 0, executions)
    cluster = ClusterRecord(
        id=cluster_id,
        name=f"performance report {file}",
        account=str(config.get("account") or "default"),
        user=str(config.get("user") or config.os_user()),
        scheduler_address=address,
        dask_version=_summary_field(summary, "Dask Version"),
        distributed_version=_summary_field(summary, "Dask.Distributed Version"),
        python_version="",
        started_at=started,
        stopped_at=stopped,
        last_seen_at=stopped,
        workers_peak=len(samples),
        threads_peak=sum(s.nthreads for s in samples),
        tasks_executed=sum(g.tasks_executed for g in groups),
        tasks_erred=sum(g.tasks_erred for g in groups),
        compute_seconds=sum(g.durations.get("compute", 0.0) for g in groups),
    )
    mark_imported(
        cluster,
        file=file,
        format="performance_report (html)",
        imported_at=imported_at,
        missing=missing,
        held={"executions": len(executions), "workers": len(samples)},
    )
    return Imported(cluster, records)
