"""The advice of a cluster, of one computation of it, or of a workflow run (issue 14):
the facts gathered from the store, the registered rules run over them
(:mod:`daskscope.analysis.advice`), each finding's evidence written by :mod:`daskscope.format`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from daskscope.analysis.advice import Advice, AdviceFacts, Evidence, advise, registered_rules
from daskscope.analysis.advice.base import Scope
from daskscope.format import value_text
from daskscope.store import Store
from daskscope.tasklog.forms import COMPUTE
from daskscope.views.advice_resources import resource_extra

__all__ = [
    "AdviceItem",
    "AdviceView",
    "EvidenceItem",
    "UnknownComputation",
    "cluster_advice",
    "gather_facts",
    "read_detail",
    "run_advice",
]

#: the timeline is read execution by execution up to this many (per group transfer and
#: compute time); beyond, as busy time per worker thread only
RAW_TIMELINE_TASKS = 20_000
#: longest executions read for the task-skew rule
SLOWEST_TASKS = 20

Row = Mapping[str, Any]


class UnknownComputation(LookupError):
    """The cluster has no computation of that id (or unique start of one)."""

    def __init__(self, cluster_id: str, computation: str, *, matches: int = 0) -> None:
        what = "matches several computations" if matches > 1 else "is not a computation"
        super().__init__(
            f"{computation!r} {what} of cluster {cluster_id}: give a computation's id "
            "(or a unique start of it) as listed on the cluster page's Computations tab"
        )


@dataclass(frozen=True)
class EvidenceItem:
    """One figure a rule looked at, as recorded and as written for people."""

    label: str
    value: float | int | str | None
    unit: str
    threshold: float | int | None
    value_text: str
    #: None when the figure is context, not compared with a threshold
    threshold_text: str | None


@dataclass(frozen=True)
class AdviceItem:
    rule: str
    title: str
    #: "critical", "warning" or "info"
    severity: str
    #: what it is about: a task prefix or group, a worker, a computation
    subject: str | None
    evidence: tuple[EvidenceItem, ...]
    action: str


@dataclass(frozen=True)
class AdviceView:
    """What the advice rules found, most severe first."""

    #: "cluster", "computation" or "run"
    scope: str
    cluster_id: str | None
    computation_id: str | None
    run_id: str | None
    #: how many rules apply to this scope (all of them ran)
    rules_checked: int
    advice: tuple[AdviceItem, ...]


def _text(value: float | int | str | None, unit: str) -> str:
    if isinstance(value, str):
        return value
    return value_text(value, unit)


def _evidence(e: Evidence) -> EvidenceItem:
    return EvidenceItem(
        label=e.label,
        value=e.value,
        unit=e.unit,
        threshold=e.threshold,
        value_text=_text(e.value, e.unit),
        threshold_text=None if e.threshold is None else _text(e.threshold, e.unit),
    )


def _item(a: Advice) -> AdviceItem:
    return AdviceItem(
        a.rule, a.title, a.severity, a.subject, tuple(map(_evidence, a.evidence)), a.action
    )


def _view(facts: AdviceFacts, cluster_id: str | None, run_id: str | None = None) -> AdviceView:
    return AdviceView(
        scope=facts.scope,
        cluster_id=cluster_id,
        computation_id=facts.computation_id,
        run_id=run_id,
        rules_checked=sum(facts.scope in r.scopes for r in registered_rules()),
        advice=tuple(_item(a) for a in advise(facts)),
    )


def _computation_id(detail: Row, cluster_id: str, asked: str) -> str:
    ids = [c["id"] for c in detail["computations"]]
    if asked in ids:
        return asked
    found = [i for i in ids if i.startswith(asked)] if asked else []
    if len(found) != 1:
        raise UnknownComputation(cluster_id, asked, matches=len(found))
    return str(found[0])


def _only(detail: Row, computation_ids: Sequence[str]) -> dict[str, Any]:
    """``detail`` cut to the groups, prefixes, errors and fine metrics of
    ``computation_ids`` (the computations stay all listed: which came before matters;
    spans are left out, brief group rows do not say theirs)."""
    wanted = set(computation_ids)
    groups = [g for g in detail["task_groups"] if g.get("computation_id") in wanted]
    prefixes: dict[str, dict[str, Any]] = {}
    for g in groups:
        p = prefixes.setdefault(
            g["prefix"],
            {"name": g["prefix"], "group_count": 0, "tasks_executed": 0, "tasks_erred": 0,
             "nbytes_total": 0, "duration_s": 0.0},
        )  # fmt: skip
        p["group_count"] += 1
        for key in ("tasks_executed", "tasks_erred", "nbytes_total", "duration_s"):
            p[key] += g.get(key) or 0
    group_ids = {g["id"] for g in groups}
    cut = dict(detail)
    cut.update(
        task_groups=groups,
        task_prefixes=sorted(prefixes.values(), key=lambda p: (-p["tasks_executed"], p["name"])),
        spans=[],
        errors=[e for e in detail["errors"] if e.get("group_id") in group_ids],
        fine_metrics=[m for m in detail["fine_metrics"] if m["prefix"] in prefixes],
    )
    return cut


def read_detail(store: Store, cluster_id: str) -> dict[str, Any]:
    """:func:`cluster_detail` with every task group as a brief row (no JSON columns: the
    rules read names, counts, seconds and times), which stays fast at 40,000 groups."""
    detail = dict(store.cluster_detail(cluster_id, max_groups=0))
    detail["task_groups"] = store.brief_groups(cluster_id)
    return detail


def _timeline_facts(
    store: Store, cluster_id: str, detail: Row, computation_ids: Sequence[str] | None
) -> dict[str, Any]:
    """Compute time per worker, transfer and compute time per group and the slowest
    executions, from the task timeline (of some computations, or all)."""
    busy: dict[str, float] = {w["worker"]: 0.0 for w in detail.get("workers") or ()}
    actions: dict[str, dict[str, float]] | None = {}
    windows: dict[str, tuple[float, float]] | None = {}
    slowest: list[dict[str, Any]] = []
    for computation_id in computation_ids if computation_ids is not None else [None]:
        window = store.timeline_window(
            cluster_id, computation_id=computation_id, max_tasks=RAW_TIMELINE_TASKS,
            bins=100,
        )  # fmt: skip
        if window.raw:
            for t in window.tasks:
                if windows is not None and t.computation_id is not None:
                    lo, hi = windows.get(t.computation_id, (t.start, t.stop))
                    windows[t.computation_id] = (min(lo, t.start), max(hi, t.stop))
                per_group = actions.setdefault(t.group, {}) if actions is not None else {}
                for a in t.actions:
                    seconds = a.stop - a.start
                    per_group[a.action] = per_group.get(a.action, 0.0) + seconds
                    if a.action == COMPUTE:
                        busy[t.worker] = busy.get(t.worker, 0.0) + seconds
        else:
            actions = windows = None
            for lane in window.lanes:
                computed = lane.columns.busy.get(COMPUTE) if lane.columns is not None else None
                seconds = sum(computed.tolist()) if computed is not None else 0
                busy[lane.worker] = busy.get(lane.worker, 0.0) + seconds
        slowest += [
            {
                "group": t.group,
                "key": t.key,
                "worker": t.worker,
                "duration_s": t.stop - t.start,
                "computation_id": t.computation_id,
            }
            for t in store.slowest_tasks(
                cluster_id, computation_id=computation_id, limit=SLOWEST_TASKS
            )
        ]
    return {
        "worker_busy_s": busy,
        "group_actions_s": actions,
        "slowest_tasks": slowest,
        "computation_windows": windows or {},
    }


def gather_facts(
    store: Store,
    cluster_id: str | None,
    *,
    scope: Scope,
    computation_id: str | None = None,
    run: Row | None = None,
    detail: Row | None = None,
) -> AdviceFacts:
    """Everything the rules read, from the store. ``computation_id`` must be a full id
    of the cluster's (see :func:`cluster_advice` for prefixes); ``detail``: the cluster's
    :func:`read_detail`, when the caller has read it already."""
    run_id = run["run"]["id"] if run is not None else None
    if cluster_id is None:
        only_run = resource_extra(store, None, None, run_id)
        return AdviceFacts(scope=scope, detail={}, run=run, extra=only_run)
    if detail is None:
        detail = read_detail(store, cluster_id)
    only: list[str] | None = None
    if computation_id is not None:
        only = [computation_id]
    elif run is not None:
        known = {c["id"] for c in detail["computations"]}
        only = [c for c in run["run"].get("computation_ids") or () if c in known] or None
    extra: dict[str, Any] = {"cluster_groups": detail["task_groups"]}
    if only is not None:
        detail = _only(detail, only)
    extra.update(_timeline_facts(store, cluster_id, detail, only))
    extra.update(resource_extra(store, cluster_id, computation_id, run_id))
    return AdviceFacts(
        scope=scope,
        detail=detail,
        worker_samples=store.worker_samples(cluster_id),
        computation_id=computation_id,
        run=run,
        extra=extra,
    )


def cluster_advice(store: Store, cluster_id: str, computation: str | None = None) -> AdviceView:
    """The advice of a cluster (a full id: resolve prefixes with
    :func:`daskscope.store.resolve_cluster_id`), or of one of its computations (an id or
    a unique start of one; :class:`UnknownComputation` otherwise)."""
    detail = read_detail(store, cluster_id)
    computation_id = None
    if computation is not None:
        computation_id = _computation_id(detail, cluster_id, computation)
    scope: Scope = "cluster" if computation_id is None else "computation"
    facts = gather_facts(
        store, cluster_id, scope=scope, computation_id=computation_id, detail=detail
    )
    return _view(facts, cluster_id)


def run_advice(store: Store, id_or_prefix: str, *, account: str | None = None) -> AdviceView:
    """The advice of a workflow run (an id or a unique start of one): its own facts and
    those of the computations it ran on its cluster, when that cluster was recorded."""
    from daskscope.store.errors import UnknownCluster

    run = store.run_detail(store.resolve_run_id(id_or_prefix, account=account))
    cluster_id = run["run"].get("cluster_id")
    try:
        facts = gather_facts(store, cluster_id, scope="run", run=run)
    except UnknownCluster:  # the run's cluster was not recorded in this store
        cluster_id = None
        facts = gather_facts(store, None, scope="run", run=run)
    return _view(facts, cluster_id, run["run"]["id"])
