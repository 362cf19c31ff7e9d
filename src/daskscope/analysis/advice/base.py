"""Advice: what a rule found, the facts every rule reads, and the registry of rules.

A rule is a pure function of :class:`AdviceFacts` (rows as the store returns them)
yielding :class:`Advice`. Rules register themselves with :func:`rule`; the view layer
gathers the facts from the store and calls :func:`advise`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = [
    "SCOPES",
    "SEVERITIES",
    "Advice",
    "AdviceFacts",
    "Evidence",
    "RuleSpec",
    "Scope",
    "Severity",
    "advise",
    "registered_rules",
    "rule",
]

logger = logging.getLogger("daskscope")

Severity = Literal["info", "warning", "critical"]
SEVERITIES: tuple[Severity, ...] = ("critical", "warning", "info")
#: what advice is given for: a whole cluster, one computation of it, or a workflow run
Scope = Literal["cluster", "computation", "run"]
SCOPES: tuple[Scope, ...] = ("cluster", "computation", "run")

Row = Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Evidence:
    """One figure a rule based its advice on, with the threshold it compared it to."""

    label: str
    value: float | int | str | None
    #: a unit :mod:`daskscope.format` knows ("seconds", "bytes", "count", "fraction", ...)
    unit: str
    threshold: float | int | None = None


@dataclass(frozen=True, slots=True)
class Advice:
    rule: str
    title: str
    severity: Severity
    #: what the advice is about: a task group or prefix, a worker, a computation id
    subject: str | None
    evidence: tuple[Evidence, ...]
    #: what to do about it, in one or two sentences
    action: str


@dataclass(frozen=True, slots=True)
class AdviceFacts:
    """Everything rules read, as the store returns it (see ``views/advice.py``).

    For a computation, ``detail`` holds that computation's groups, prefixes and spans
    only; for a run, ``run`` is :func:`daskscope.store.runs.run_detail` and the cluster
    parts are those of the run's cluster when it was recorded (else empty)."""

    scope: Scope
    #: :func:`daskscope.store.queries.cluster_detail`, its ``task_groups`` every task
    #: group as a brief row (id, name, prefix, computation_id, tasks_total,
    #: tasks_executed, tasks_erred, nbytes_total, duration_s, started_at, stopped_at:
    #: no JSON columns, so that 40,000 groups read fast; ``views.advice.read_detail``)
    detail: Row
    #: :func:`daskscope.store.queries.worker_samples`: every worker sample, oldest first
    worker_samples: Sequence[Row] = ()
    computation_id: str | None = None
    run: Row | None = None
    #: anything else a rule needs that the view gathered, by name
    extra: Mapping[str, Any] = field(default_factory=dict)
    #: what several rules derive from these facts, derived once (by the first to ask)
    derived: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class RuleSpec:
    id: str
    title: str
    scopes: tuple[Scope, ...]
    check: Callable[[AdviceFacts], Iterable[Advice]]
    #: what the rule looks at and when it fires, for the docs
    explanation: str


_RULES: dict[str, RuleSpec] = {}


def rule(
    id: str, *, title: str, scopes: tuple[Scope, ...], explanation: str
) -> Callable[
    [Callable[[AdviceFacts], Iterable[Advice]]], Callable[[AdviceFacts], Iterable[Advice]]
]:
    """Register ``check`` as the rule ``id`` (ids are unique)."""

    def register(
        check: Callable[[AdviceFacts], Iterable[Advice]],
    ) -> Callable[[AdviceFacts], Iterable[Advice]]:
        if id in _RULES:
            raise ValueError(f"advice rule {id!r} is registered twice")
        _RULES[id] = RuleSpec(id, title, scopes, check, explanation)
        return check

    return register


def registered_rules() -> list[RuleSpec]:
    return sorted(_RULES.values(), key=lambda r: r.id)


def advise(facts: AdviceFacts) -> list[Advice]:
    """Every registered rule's advice for ``facts``, most severe first. A rule that fails
    is logged and skipped: one broken rule never hides the others."""
    found: list[Advice] = []
    for spec in registered_rules():
        if facts.scope not in spec.scopes:
            continue
        try:
            found.extend(spec.check(facts))
        except Exception:
            logger.exception("daskscope: advice rule %s failed", spec.id)
    return sorted(found, key=lambda a: (SEVERITIES.index(a.severity), a.rule, a.subject or ""))
