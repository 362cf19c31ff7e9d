"""What an import made of a file: the records, and what the file could not hold."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from daskscope.model import ClusterRecord, Record, TaskGroupRecord, TaskPrefixRecord, stable_id

__all__ = ["Imported", "mark_imported", "prefixes_of"]


@dataclass
class Imported:
    """The records made of one file, the cluster's first."""

    cluster: ClusterRecord
    records: list[Record] = field(default_factory=list)

    @property
    def missing(self) -> list[str]:
        return list((self.cluster.imported or {}).get("missing", []))

    def all_records(self) -> list[Record]:
        return [self.cluster, *self.records]

    def counts(self) -> dict[str, int]:
        """Records by kind (the cluster's own included)."""
        found: dict[str, int] = {}
        for record in self.all_records():
            found[record.KIND] = found.get(record.KIND, 0) + 1
        return found


def mark_imported(
    cluster: ClusterRecord,
    *,
    file: str,
    format: str,
    imported_at: float,
    missing: Sequence[str],
    held: Mapping[str, Any] | None = None,
) -> None:
    """Mark the cluster as imported from ``file`` (its name only: the path is the
    importer's machine's business), with what the file could not hold."""
    cluster.imported = {
        "file": file,
        "format": format,
        "imported_at": imported_at,
        "missing": list(missing),
        **({"held": dict(held)} if held else {}),
    }


def prefixes_of(cluster_id: str, groups: Iterable[TaskGroupRecord]) -> list[TaskPrefixRecord]:
    """The task prefixes of imported groups: each group's figures summed by prefix
    (the recorder reads Dask's prefixes; a file holds only the groups)."""
    by_name: dict[str, TaskPrefixRecord] = {}
    for g in groups:
        p = by_name.setdefault(
            g.prefix,
            TaskPrefixRecord(
                id=stable_id(cluster_id, "task-prefix", g.prefix),
                cluster_id=cluster_id,
                name=g.prefix,
            ),
        )
        p.group_count += 1
        p.tasks_executed += g.tasks_executed
        p.tasks_erred += g.tasks_erred
        p.nbytes_total += g.nbytes_total
        p.duration_s += g.duration_s
        for activity, seconds in g.durations.items():
            p.durations[activity] = p.durations.get(activity, 0.0) + seconds
    return list(by_name.values())
