"""What an import made of a file: the records, and what the file could not hold."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from daskscope.model import ClusterRecord, Record

__all__ = ["Imported", "mark_imported"]


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
