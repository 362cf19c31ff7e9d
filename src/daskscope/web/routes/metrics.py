"""``/metrics``: what the store holds, for Prometheus, in the OpenMetrics text format.

A :class:`StoreCollector` reads the store's totals (``store/totals.py``, and the costs
page's span-tag sums, ``store/span_cost.py``) and yields ``prometheus_client`` metric
families, which its OpenMetrics exposition writes; prices are the dashboard's
(``pricing.cost_rates``, ``analysis.cost.cost_parts``). Behind the same authentication
as every route: a member's token sees their account's series only.

Label cardinality is bounded: of each capped label (:data:`CAPPED`) at most
``daskscope.metrics.max-series-per-label`` values appear; beyond, the values that
account for the fewest seconds share one series, labelled :data:`OTHER`
(``docs/server.md``, Prometheus).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field

from fastapi import APIRouter, Request
from fastapi.responses import Response
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.openmetrics.exposition import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.registry import CollectorRegistry

from daskscope import config
from daskscope.analysis.cost import cost_parts
from daskscope.pricing import cost_rates
from daskscope.store import Store
from daskscope.store.totals import STATES
from daskscope.web.routes.common import account_scope, store_of

__all__ = [
    "CAPPED",
    "FAMILIES",
    "OTHER",
    "StoreCollector",
    "api",
    "exposition",
    "pages",
    "series_cap",
]

pages = APIRouter(include_in_schema=False)
#: no JSON twin: /metrics is its own format
api = APIRouter(tags=["metrics"])

#: The label value of the series that the values beyond the cap share
OTHER = "other"
#: The labels whose values are capped, each ranked by the seconds its values account
#: for: accounts and members by core seconds, tags and prefixes by task seconds (a
#: prefix's fine-metric seconds added), activities by fine-metric seconds. ``state`` (3
#: values) and ``currency`` (one per account) are not capped.
CAPPED = ("account", "member", "tag", "prefix", "activity")

Labels = tuple[str, ...]


def series_cap() -> int:
    """``daskscope.metrics.max-series-per-label`` (at least 1)."""
    return max(1, int(config.get("metrics.max-series-per-label", 50)))


@dataclass
class _Family:
    """One metric family being gathered: its values per tuple of label values."""

    name: str
    documentation: str
    labels: Labels
    counter: bool
    unit: str
    values: dict[Labels, float] = field(default_factory=dict)

    def add(self, labels: Labels, value: float) -> None:
        self.values[labels] = self.values.get(labels, 0.0) + value


def _kept(weights: Mapping[str, float], cap: int) -> set[str]:
    """The values shown of a label: all when they are at most ``cap``, else the
    ``cap - 1`` with the most seconds (ties by name), :data:`OTHER` being the last."""
    if len(weights) <= cap:
        return set(weights)
    ranked = sorted(weights, key=lambda v: (-weights[v], v))
    return set(ranked[: cap - 1])


def _folded(families: Iterable[_Family], weights: Mapping[str, Mapping[str, float]],
           cap: int) -> list[_Family]:  # fmt: skip
    """``families`` with each capped label's values beyond the cap (ranked by
    ``weights[label]``) renamed :data:`OTHER`, their series summed."""
    kept = {label: _kept(w, cap) for label, w in weights.items()}
    out = []
    for family in families:
        keep = [kept.get(label) for label in family.labels]
        merged = _Family(
            family.name, family.documentation, family.labels, family.counter, family.unit
        )
        for values, value in family.values.items():
            renamed = tuple(
                v if k is None or v in k else OTHER for v, k in zip(values, keep, strict=True)
            )
            merged.add(renamed, value)
        out.append(merged)
    return out


#: The families exposed: name (without ``_total`` and unit), help, labels, counter or
#: gauge, unit. Counters are totals over the clusters recorded, so they only grow while
#: no cluster is deleted (a value crossing the cap moves its total to or from "other").
FAMILIES: tuple[tuple[str, str, Labels, bool, str], ...] = (
    ("daskscope_clusters", f"Clusters recorded, by state: {', '.join(STATES)} (no stop "
     "recorded and not written for 2 minutes).", ("account", "member", "state"), False, ""),
    ("daskscope_core", "Core time of the clusters: sum of core_seconds (threads x the "
     "seconds they were there).", ("account", "member"), True, "seconds"),
    ("daskscope_memory_limit_byte", "Memory reserved by the clusters: sum of "
     "memory_limit_byte_seconds.", ("account", "member"), True, "seconds"),
    ("daskscope_compute", "Compute time of the clusters: sum of compute_seconds (their "
     "tasks' summed time).", ("account", "member"), True, "seconds"),
    ("daskscope_cost", "Cost of the clusters at their account's prices (daskscope.cost): "
     "core-hours x per-core-hour + GiB-hours x per-gib-hour; none for an unpriced account.",
     ("account", "member", "currency"), True, ""),
    ("daskscope_tasks_executed", "Tasks executed by the clusters.",
     ("account", "member"), True, ""),
    ("daskscope_tasks_erred", "Tasks that erred on the clusters.",
     ("account", "member"), True, ""),
    ("daskscope_prefix_tasks_executed", "Tasks executed, by task prefix.",
     ("account", "prefix"), True, ""),
    ("daskscope_prefix_tasks_erred", "Tasks that erred, by task prefix.",
     ("account", "prefix"), True, ""),
    ("daskscope_prefix_task", "Task time by task prefix: its task groups' durations "
     "summed over activities.", ("account", "prefix"), True, "seconds"),
    ("daskscope_fine_metric", "Dask's fine performance metrics in seconds, by task prefix "
     "and activity (each span's own metrics: every second once).",
     ("account", "prefix", "activity"), True, "seconds"),
    ("daskscope_fine_metric_activity", "Dask's fine performance metrics in seconds, by "
     "activity: the sum of what they gained flush interval by flush interval.",
     ("account", "activity"), True, "seconds"),
    ("daskscope_span_task", "Task time of the outermost spans of each tag (their "
     "subtrees; tags nest, so tags overlap).", ("account", "tag"), True, "seconds"),
    ("daskscope_span_core", "Core time attributed to the spans of each tag: their task "
     "time, at most their cluster's core time.", ("account", "tag"), True, "seconds"),
    # a gauge: a span's share of its cluster's core time shifts as later spans arrive,
    # so the attributed cost can go down (a counter would read that as a reset)
    ("daskscope_span_cost", "Cost attributed to the spans of each tag, as the costs page "
     "shows it: their cluster's cost x their share of its core time (can go down as "
     "later spans take their share).", ("account", "tag", "currency"), False, ""),
)  # fmt: skip


class StoreCollector:
    """A ``prometheus_client`` collector over the store: each :meth:`collect` reads the
    totals of ``account`` (None: every account) at that moment."""

    def __init__(self, store: Store, *, account: str | None = None, cap: int | None = None):
        self.store = store
        self.account = account
        self.cap = series_cap() if cap is None else max(1, cap)

    def collect(self) -> Iterator[Metric]:
        families, weights = self._gather()
        for family in _folded(families.values(), weights, self.cap):
            yield _metric(family)
        values = GaugeMetricFamily(
            "daskscope_label_values",
            "Distinct values of each capped label before the cap "
            f"(daskscope.metrics.max-series-per-label = {self.cap}); beyond it, "
            f"values share the series labelled {OTHER!r}.",
            labels=["label"],
        )
        for label in CAPPED:
            values.add_metric([label], len(weights[label]))
        yield values

    def _gather(self) -> tuple[dict[str, _Family], dict[str, dict[str, float]]]:
        """The families' series before the cap, and per capped label the seconds each
        of its values accounts for (what the cap ranks them by)."""
        store, account = self.store, self.account
        rates = functools.cache(cost_rates)
        f = {spec[0]: _Family(*spec) for spec in FAMILIES}
        weights: dict[str, dict[str, float]] = {label: {} for label in CAPPED}

        def weigh(label: str, value: str, seconds: float) -> None:
            weights[label][value] = weights[label].get(value, 0.0) + seconds

        for r in store.cluster_totals(now=time.time(), account=account):
            who = (r["account"], r["user"])
            for state in STATES:  # every state of a member, 0 too: alerts read them
                f["daskscope_clusters"].add((*who, state), 0.0)
            f["daskscope_clusters"].add((*who, r["state"]), r["clusters"])
            f["daskscope_core"].add(who, r["core_seconds"])
            f["daskscope_memory_limit_byte"].add(who, r["memory_limit_byte_seconds"])
            f["daskscope_compute"].add(who, r["compute_seconds"])
            f["daskscope_tasks_executed"].add(who, r["tasks_executed"])
            f["daskscope_tasks_erred"].add(who, r["tasks_erred"])
            weigh("account", r["account"], r["core_seconds"])
            weigh("member", r["user"], r["core_seconds"])
        # priced per account and member, summed first: the cost is linear in both
        memory = f["daskscope_memory_limit_byte"].values
        for (acct, member), seconds in f["daskscope_core"].values.items():
            parts = cost_parts(seconds, memory[(acct, member)], rates(acct))
            if parts is not None:
                f["daskscope_cost"].add((acct, member, str(parts["currency"])), parts["total"])

        for r in store.prefix_totals(account=account):
            key = (r["account"], r["prefix"])
            f["daskscope_prefix_tasks_executed"].add(key, r["tasks_executed"])
            f["daskscope_prefix_tasks_erred"].add(key, r["tasks_erred"])
            f["daskscope_prefix_task"].add(key, r["duration_s"])
            weigh("prefix", r["prefix"], r["duration_s"])

        for r in store.fine_metric_seconds(account=account):
            f["daskscope_fine_metric"].add((r["account"], r["prefix"], r["activity"]), r["value"])
            weigh("prefix", r["prefix"], r["value"])
            weigh("activity", r["activity"], r["value"])
        # the same seconds as above, by activity alone (not weighed twice)
        for r in store.fine_metric_interval_seconds(account=account):
            f["daskscope_fine_metric_activity"].add((r["account"], r["activity"]), r["value"])

        for r in store.span_cost_sums("tag", account=account):
            key = (r["account"], str(r["key"]))
            seconds, core = float(r["task_seconds"] or 0.0), float(r["core_seconds"] or 0.0)
            f["daskscope_span_task"].add(key, seconds)
            f["daskscope_span_core"].add(key, core)
            parts = cost_parts(core, float(r["memory_byte_seconds"] or 0.0), rates(key[0]))
            if parts is not None:
                f["daskscope_span_cost"].add((*key, str(parts["currency"])), parts["total"])
            weigh("tag", key[1], seconds)
        return f, weights


def _metric(family: _Family) -> Metric:
    kind = CounterMetricFamily if family.counter else GaugeMetricFamily
    metric = kind(family.name, family.documentation, labels=list(family.labels),
                  unit=family.unit)  # fmt: skip
    for labels, value in sorted(family.values.items()):
        metric.add_metric(list(labels), value)
    return metric


def exposition(store: Store, *, account: str | None = None, cap: int | None = None) -> bytes:
    """The store's series (of ``account``; None: all) in the OpenMetrics text format."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(StoreCollector(store, account=account, cap=cap))
    data: bytes = generate_latest(registry)
    return data


@pages.get("/metrics", summary="The store's totals for Prometheus (OpenMetrics text)")
def metrics(request: Request) -> Response:
    """Every series the viewer may see: with authentication on, a member's token sees
    its account's series only."""
    body = exposition(store_of(request), account=account_scope(request))
    return Response(body, media_type=CONTENT_TYPE_LATEST)
