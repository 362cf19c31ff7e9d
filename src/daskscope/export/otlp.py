"""A recorded cluster as an OpenTelemetry trace (OTLP), for Jaeger, Tempo or Grafana.

One trace per cluster, its id derived from the cluster id (the same cluster always
exports the same trace, so sending it twice replaces rather than duplicates in most
back ends). Below the root span of the cluster:

- a span per computation (what one compute/persist sent), with its call line, task
  counts and group names;
- Dask's span tree (``distributed.span``) with each span's totals over its subtree:
  seconds by activity (Dask's fine metrics), duration, active CPU, bytes, task states;
- optionally a span per task group, below its Dask span (else its computation); a
  group whose tasks all failed has no start in Dask's record (Dask dates a group by its
  tasks that ended in memory), so it is placed by its executions in the task log (else
  from its failures' times to its stop).

A span with failed tasks has the status ERROR, its message the count and the first
exception: a computation and a group by their own ``tasks_erred``, a Dask span by the
failed tasks of the groups of its subtree (Dask's span states forget a failed task once
it is released, so they are not read for this).

Attribute names follow OpenTelemetry's style: lower case, dot-separated namespaces,
snake_case words; times in seconds as doubles, byte counts as integers. Encodings: OTLP
protobuf (``ExportTraceServiceRequest``, what ``/v1/traces`` takes with
``application/x-protobuf``) and OTLP/JSON (protobuf's JSON mapping with the ids in hex
and enums as numbers, as the OTLP specification asks).

Why it is long (~560 lines): it is one mapping, from the export view to one OTLP
request, and its helpers (``_Trace``, the failures, the times of groups Dask did not
date) serve that mapping only. The JSON form, the POST to a collector and the two
exporters (the last ~130 lines) could stand in a module of their own; they stay here so
that one module knows OTLP.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import json
import urllib.error
import urllib.request
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from google.protobuf import json_format  # type: ignore[import-untyped]
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import (
    AnyValue,
    ArrayValue,
    InstrumentationScope,
    KeyValue,
)
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span, Status

from daskscope.analysis import elapsed
from daskscope.export.common import call_line
from daskscope.views.export import ExportError, ExportView, export_view

if TYPE_CHECKING:
    from daskscope.store import Store

__all__ = [
    "ID_FIELDS",
    "OtlpJson",
    "OtlpProtobuf",
    "otlp_json",
    "otlp_request",
    "otlp_trace",
    "post_traces",
    "request_from_json",
    "span_id_of",
    "trace_id_of",
]

#: OTLP/JSON fields that hold ids (hex in JSON, bytes in protobuf)
ID_FIELDS = ("traceId", "spanId", "parentSpanId")
_ATTRIBUTE = str | int | float | bool | list[str]


def trace_id_of(cluster_id: str) -> bytes:
    """The trace id (16 bytes) of a cluster: the same id every time."""
    return hashlib.sha256(f"daskscope trace {cluster_id}".encode()).digest()[:16]


def span_id_of(cluster_id: str, kind: str, ident: str) -> bytes:
    """The span id (8 bytes) of one thing of a cluster ("cluster", "computation", ...)."""
    return hashlib.sha256(f"daskscope {cluster_id} {kind} {ident}".encode()).digest()[:8]


def _value(value: _ATTRIBUTE) -> AnyValue:
    if isinstance(value, bool):
        return AnyValue(bool_value=value)
    if isinstance(value, int):
        return AnyValue(int_value=value)
    if isinstance(value, float):
        return AnyValue(double_value=value)
    if isinstance(value, list):
        return AnyValue(array_value=ArrayValue(values=[AnyValue(string_value=v) for v in value]))
    return AnyValue(string_value=value)


def _attributes(pairs: Mapping[str, _ATTRIBUTE | None]) -> list[KeyValue]:
    """Attributes without the missing ones (OTel has no null)."""
    return [KeyValue(key=k, value=_value(v)) for k, v in pairs.items() if v is not None]


def _nanos(seconds: float) -> int:
    return round(seconds * 1e9)


def _word(text: str) -> str:
    """An attribute-name component: "disk-read" -> "disk_read"."""
    return "".join(c if c.isalnum() else "_" for c in text.lower()).strip("_") or "other"


class _Trace:
    """Spans of one cluster's trace, ids derived from what they stand for."""

    def __init__(self, cluster_id: str, end: float) -> None:
        self.cluster_id = cluster_id
        self.trace_id = trace_id_of(cluster_id)
        self.end = end  # the cluster's last moment: the stop of what never stopped
        self.spans: list[Span] = []

    def add(
        self,
        kind: str,
        ident: str,
        name: str,
        start: float,
        stop: float | None,
        parent: bytes | None,
        attributes: Mapping[str, _ATTRIBUTE | None],
        *,
        error: str | None = None,
    ) -> bytes:
        span_id = span_id_of(self.cluster_id, kind, ident)
        stop = max(start, stop if stop is not None else self.end)
        span = Span(
            trace_id=self.trace_id,
            span_id=span_id,
            parent_span_id=parent or b"",
            name=name,
            kind=Span.SpanKind.SPAN_KIND_INTERNAL,
            start_time_unix_nano=_nanos(start),
            end_time_unix_nano=_nanos(stop),
            attributes=_attributes(attributes),
        )
        if error:
            span.status.CopyFrom(Status(code=Status.StatusCode.STATUS_CODE_ERROR, message=error))
        self.spans.append(span)
        return span_id


def _tasks_failed(erred: int, exception: str | None = None) -> str | None:
    """The status message of a span with ``erred`` failed tasks (None: none failed)."""
    if not erred:
        return None
    text = f"{erred} task{'s' if erred != 1 else ''} failed"
    first = (exception or "").strip().splitlines()
    return f"{text}: {first[0][:200]}" if first else text


@dataclass
class _Failures:
    """Failed tasks by Dask span (the groups' ``tasks_erred``), and the first exception
    (by time) of each group, computation and Dask span."""

    by_span: dict[str, int] = dataclasses.field(default_factory=dict)
    group_exception: dict[str, str] = dataclasses.field(default_factory=dict)
    computation_exception: dict[str, str] = dataclasses.field(default_factory=dict)
    span_exception: dict[str, str] = dataclasses.field(default_factory=dict)


def _failures(view: ExportView, errors: Iterable[Mapping[str, Any]]) -> _Failures:
    """The cluster's failures: its groups with failed tasks (their span and computation)
    and the errors recorded (each with its group's id)."""
    erred = view.erred_groups()
    found = _Failures()
    owner = {gid: (span_id, computation_id) for gid, span_id, computation_id, _ in erred}
    for _, span_id, _, n in erred:
        if span_id is not None:
            found.by_span[span_id] = found.by_span.get(span_id, 0) + int(n)
    for e in sorted(errors, key=lambda e: e["at"]):
        gid = e.get("group_id")
        if gid is None or not e.get("exception"):
            continue
        found.group_exception.setdefault(gid, e["exception"])
        span_id, computation_id = owner.get(gid, (None, None))
        if span_id is not None:
            found.span_exception.setdefault(span_id, e["exception"])
        if computation_id is not None:
            found.computation_exception.setdefault(computation_id, e["exception"])
    return found


def _unstarted_times(
    view: ExportView,
    groups: list[Mapping[str, Any]],
    computations: Mapping[str, Mapping[str, Any]],
    errors: Iterable[Mapping[str, Any]],
) -> dict[str, tuple[float, float | None]]:
    """Where to place groups that ran tasks but have no start (all their tasks failed):
    from their executions' first start to their last stop in the task log, else from
    their first failure to their stop. Group id -> (start, stop)."""
    if not groups:
        return {}
    wanted = {(g["computation_id"], g["name"]): g["id"] for g in groups}
    starts = [
        computations[g["computation_id"]]["started_at"]
        for g in groups
        if g["computation_id"] in computations
    ]
    stops = [g["stopped_at"] for g in groups if g["stopped_at"] is not None]
    # the task log around them (clocks of workers and scheduler differ a little)
    lo = min(starts) - 60.0 if len(starts) == len(groups) else None
    hi = max(stops) + 60.0 if len(stops) == len(groups) else None
    placed: dict[str, tuple[float, float | None]] = dict(view.group_log_times(wanted, lo, hi))
    failed_at: dict[str, float] = {}
    for e in errors:
        gid = e.get("group_id")
        if gid is not None:
            failed_at[gid] = min(failed_at.get(gid, e["at"]), e["at"])
    for g in groups:
        if g["id"] in placed:
            continue
        start = failed_at.get(g["id"], g["stopped_at"])
        if start is not None:
            placed[g["id"]] = (start, g["stopped_at"])
    return placed


def otlp_trace(view: ExportView) -> ExportTraceServiceRequest:
    """The cluster as one OTLP trace; a span per task group too when the view read
    them (``groups``)."""
    from daskscope import __version__

    detail, cluster_id = view.detail, view.cluster_id
    cluster = detail["cluster"]
    end = cluster["stopped_at"] or cluster["last_seen_at"]
    trace = _Trace(cluster_id, end)
    failures = _failures(view, detail["errors"])
    root = trace.add(
        "cluster",
        cluster_id,
        f"dask cluster {cluster['name'] or cluster_id}",
        cluster["started_at"],
        end,
        None,
        {
            "daskscope.cluster.id": cluster_id,
            "dask.cluster.name": cluster["name"],
            "dask.scheduler.address": cluster["scheduler_address"],
            "dask.cluster.duration": elapsed(
                cluster["started_at"], cluster["stopped_at"], cluster["last_seen_at"]
            ),
            "dask.cluster.workers.peak": cluster["workers_peak"],
            "dask.cluster.threads.peak": cluster["threads_peak"],
            "dask.cluster.tasks.executed": cluster["tasks_executed"],
            "dask.cluster.tasks.erred": cluster["tasks_erred"],
            "dask.cluster.compute_time": float(cluster["compute_seconds"]),
            "dask.cluster.bytes": cluster["bytes_processed"],
        },
        error=_tasks_failed(
            cluster["tasks_erred"],
            min(detail["errors"], key=lambda e: e["at"])["exception"] if detail["errors"] else None,
        ),
    )
    computation_spans: dict[str, bytes] = {}
    for comp in detail["computations"]:
        line = call_line(comp)
        computation_spans[comp["id"]] = trace.add(
            "computation",
            comp["id"],
            f"computation: {line[:120]}" if line else "computation",
            comp["started_at"],
            comp["stopped_at"],
            root,
            {
                "dask.computation.id": comp["id"],
                "dask.computation.code.call": line,
                "dask.computation.tasks.executed": comp["tasks_executed"],
                "dask.computation.tasks.erred": comp["tasks_erred"],
                "dask.computation.group_count": comp["task_groups_total"],
                "dask.computation.groups": list(comp["task_groups"]),
            },
            error=_tasks_failed(
                comp["tasks_erred"], failures.computation_exception.get(comp["id"])
            ),
        )
    dask_spans = _span_tree(trace, detail["spans"], root, failures)
    if view.groups:
        unstarted = _unstarted_times(
            view,
            [g for g in detail["task_groups"] if g["started_at"] is None and g["tasks_erred"]],
            {c["id"]: c for c in detail["computations"]},
            detail["errors"],
        )
        for group in detail["task_groups"]:
            parent = dask_spans.get(group["span_id"]) or computation_spans.get(
                group["computation_id"]
            )
            start, stop = group["started_at"], group["stopped_at"]
            if start is None:
                if group["id"] not in unstarted:
                    continue  # never ran: nothing to place in time
                start, stop = unstarted[group["id"]]
            trace.add(
                "group",
                group["id"],
                f"task group {group['name']}",
                start,
                stop,
                parent or root,
                {
                    "dask.task_group.name": group["name"],
                    "dask.task_group.prefix": group["prefix"],
                    "dask.task_group.tasks.total": group["tasks_total"],
                    "dask.task_group.tasks.executed": group["tasks_executed"],
                    "dask.task_group.tasks.erred": group["tasks_erred"],
                    "dask.task_group.bytes": group["nbytes_total"],
                    "dask.task_group.duration": float(group["duration_s"]),
                    **_activities("dask.task_group", group["durations"]),
                },
                error=_tasks_failed(
                    group["tasks_erred"], failures.group_exception.get(group["id"])
                ),
            )
    return ExportTraceServiceRequest(
        resource_spans=[
            ResourceSpans(
                resource=Resource(
                    attributes=_attributes(
                        {
                            "service.name": "dask",
                            "service.instance.id": cluster_id,
                            "daskscope.cluster.id": cluster_id,
                            "dask.version": cluster["dask_version"],
                            "dask.distributed.version": cluster["distributed_version"],
                            "process.runtime.version": cluster["python_version"],
                        }
                    )
                ),
                scope_spans=[
                    ScopeSpans(
                        scope=InstrumentationScope(name="daskscope", version=__version__),
                        spans=trace.spans,
                    )
                ],
            )
        ]
    )


def _activities(prefix: str, durations: Mapping[str, float] | None) -> dict[str, _ATTRIBUTE | None]:
    """Seconds by activity as ``<prefix>.activity.<activity>.duration`` attributes."""
    return {
        f"{prefix}.activity.{_word(activity)}.duration": float(seconds)
        for activity, seconds in sorted((durations or {}).items())
    }


def _span_tree(
    trace: _Trace, spans: Iterable[Mapping[str, Any]], root: bytes, failures: _Failures
) -> dict[str, bytes]:
    """Dask's spans, parents before children; returns Dask span id -> OTLP span id. A
    span's failed tasks are those of its subtree's groups (``failures``)."""
    spans = list(spans)
    by_id = {row["span_id"]: row for row in spans}
    erred, exception = _subtree_failures(spans, failures)
    placed: dict[str, bytes] = {}

    def place(span: Mapping[str, Any]) -> bytes:
        found = placed.get(span["span_id"])
        if found is not None:
            return found
        parent_row = by_id.get(span["parent_span_id"] or "")
        parent = place(parent_row) if parent_row is not None else root
        tags = [str(t) for t in span["name"]]
        start = span["started_at"] if span["started_at"] is not None else span["enqueued_at"]
        sid = span["span_id"]
        placed[span["span_id"]] = trace.add(
            "span",
            span["span_id"],
            " / ".join(tags) or "span",
            start,
            span["stopped_at"],
            parent,
            {
                "dask.span.id": span["span_id"],
                "dask.span.name": tags,
                "dask.span.done": bool(span["done"]),
                "dask.span.duration": float(span["duration_s"]),
                "dask.span.active_cpu_time": float(span["active_cpu_seconds"]),
                "dask.span.bytes": int(span["nbytes_total"]),
                "dask.span.group_count": int(span["group_count"]),
                **{
                    f"dask.span.tasks.{_word(state)}": int(n)
                    for state, n in sorted((span["states"] or {}).items())
                },
                **_activities("dask.span", span["durations"]),
            },
            error=_tasks_failed(erred.get(sid, 0), exception.get(sid)),
        )
        return placed[span["span_id"]]

    for span in spans:
        place(span)
    return placed


def _subtree_failures(
    spans: list[Mapping[str, Any]], failures: _Failures
) -> tuple[dict[str, int], dict[str, str]]:
    """Each span's failed tasks over its subtree, and the first exception found in it
    (its own, else its first child's in order)."""
    children: dict[str, list[str]] = {}
    known = {row["span_id"] for row in spans}
    for row in spans:
        parent = row["parent_span_id"]
        if parent in known:
            children.setdefault(parent, []).append(row["span_id"])
    erred: dict[str, int] = {}
    exception: dict[str, str] = {}
    for top in known:
        if top in erred:
            continue
        pending = [(top, False)]
        while pending:  # children first, without recursion (a tree may be deep)
            sid, expanded = pending.pop()
            if not expanded:
                pending.append((sid, True))
                pending.extend((c, False) for c in children.get(sid, ()) if c not in erred)
                continue
            below = children.get(sid, ())
            erred[sid] = failures.by_span.get(sid, 0) + sum(erred[c] for c in below)
            found = failures.span_exception.get(sid) or next(
                (exception[c] for c in below if c in exception), None
            )
            if found is not None:
                exception[sid] = found
    return erred, exception


def otlp_json(request: ExportTraceServiceRequest) -> dict[str, Any]:
    """OTLP/JSON: protobuf's JSON mapping, ids as hex strings and enums as numbers."""
    data: dict[str, Any] = json_format.MessageToDict(request, use_integers_for_enums=True)
    for span in _spans_of(data):
        for field in ID_FIELDS:
            if span.get(field):
                span[field] = base64.b64decode(span[field]).hex()
    return data


def request_from_json(data: Mapping[str, Any]) -> ExportTraceServiceRequest:
    """Parse OTLP/JSON (hex ids) back into the protobuf message."""
    import copy

    data = copy.deepcopy(dict(data))
    for span in _spans_of(data):
        for field in ID_FIELDS:
            if span.get(field):
                span[field] = base64.b64encode(bytes.fromhex(span[field])).decode()
    parsed: ExportTraceServiceRequest = json_format.ParseDict(data, ExportTraceServiceRequest())
    return parsed


def _spans_of(data: Mapping[str, Any]) -> Iterable[dict[str, Any]]:
    for resource in data.get("resourceSpans", ()):
        for scope in resource.get("scopeSpans", ()):
            yield from scope.get("spans", ())


def post_traces(request: ExportTraceServiceRequest, endpoint: str, *, timeout: float = 30) -> int:
    """POST the trace to an OTLP/HTTP collector as protobuf; returns the HTTP status.

    ``endpoint`` is the collector's base URL (``http://host:4318``, to which
    ``/v1/traces`` is added) or the full traces URL. Raises ExportError with what went
    wrong when the collector refuses or cannot be reached."""
    url = (
        endpoint
        if endpoint.rstrip("/").endswith("/v1/traces")
        else endpoint.rstrip("/") + "/v1/traces"
    )
    if not url.startswith(("http://", "https://")):
        raise ExportError(f"--endpoint must be an http:// or https:// URL, got {endpoint!r}")
    body = request.SerializeToString()
    sent = urllib.request.Request(
        url, data=body, method="POST", headers={"Content-Type": "application/x-protobuf"}
    )
    try:
        with urllib.request.urlopen(sent, timeout=timeout) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as exc:
        detail = exc.read(500).decode("utf-8", "replace").strip()
        raise ExportError(
            f"the collector at {url} answered HTTP {exc.code}" + (f": {detail}" if detail else "")
        ) from exc
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise ExportError(
            f"cannot reach the collector at {url} ({reason}); check --endpoint "
            "(an OTLP/HTTP receiver, usually port 4318)"
        ) from exc


class _Otlp:
    """What both OTLP encodings share: the command, its options, the file's name."""

    name = "otlp"
    help = (
        "The cluster, its computations and Dask spans as an OpenTelemetry trace (OTLP), "
        "for Jaeger, Tempo or Grafana."
    )
    subject = "trace"
    streamed = False
    options: tuple[str, ...] = ("groups",)


class OtlpProtobuf(_Otlp):
    """OTLP protobuf (``ExportTraceServiceRequest``), the file or sent to a collector."""

    format = "protobuf"
    description = "OTLP protobuf (ExportTraceServiceRequest)"
    media_type = "application/x-protobuf"
    extension = "otlp.pb"
    binary = True
    endpoint_help = (
        "POST the trace to this OTLP/HTTP collector instead of writing a file "
        "(e.g. http://localhost:4318; /v1/traces is added)."
    )

    def render(self, view: ExportView) -> Iterator[bytes]:
        return iter([otlp_trace(view).SerializeToString()])

    def send(self, view: ExportView, endpoint: str) -> str:
        """POST the trace to an OTLP/HTTP collector (:func:`post_traces`)."""
        request = otlp_trace(view)
        status = post_traces(request, endpoint)
        spans = sum(len(s.spans) for r in request.resource_spans for s in r.scope_spans)
        return f"sent {spans} spans of cluster {view.cluster_id} to {endpoint} (HTTP {status})"


class OtlpJson(_Otlp):
    """OTLP/JSON (:func:`otlp_json`)."""

    format = "json"
    description = "OTLP/JSON"
    media_type = "application/json"
    extension = "otlp.json"
    binary = False

    def render(self, view: ExportView) -> Iterator[str]:
        return iter([json.dumps(otlp_json(otlp_trace(view)))])


def otlp_request(
    store: Store, cluster_id: str, *, groups: bool = False
) -> ExportTraceServiceRequest:
    """:func:`otlp_trace` of the cluster's view, in one call; with ``groups`` a span per
    task group too. Raises UnknownCluster."""
    return otlp_trace(export_view(store, cluster_id, groups=groups))
