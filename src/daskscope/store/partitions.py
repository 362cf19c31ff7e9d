"""The task log's monthly partitions on PostgreSQL.

There ``task_segments`` is partitioned by range of ``first_start``, a partition a UTC
month (``daskscope_task_log.task_segments_YYYY_MM``) and a default partition for rows of
any month without one, so that a write never fails for want of a partition. Expiry then
drops a month whole instead of deleting its rows (store/retention.py). Partitions are
made for the months that hold rows when the table is converted (migration 0018) and,
ahead of time, by ``ensure_partitions`` (``daskscope prune`` calls it: run it daily). A
month whose rows already went to the default partition gets no partition of its own
(PostgreSQL refuses one that rows of the default would belong to): its rows stay there
and are deleted row by row when they expire. SQLite keeps one table.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass

import sqlalchemy as sa

from daskscope.store.schema import PARTITION_SCHEMA

__all__ = ["MONTHS_AHEAD", "Partition", "ensure_partitions", "is_partitioned", "partitions"]

#: Months ahead of now that ``ensure_partitions`` makes
MONTHS_AHEAD = 3
_NAME = re.compile(r"^task_segments_(\d{4})_(\d{2})$")
DEFAULT = "task_segments_default"


@dataclass(frozen=True, slots=True)
class Partition:
    """One month of the task log: its table's name (in ``PARTITION_SCHEMA``) and bounds
    (UTC epoch seconds, ``[start, stop)``)."""

    name: str
    start: float
    stop: float

    @property
    def qualified(self) -> str:
        return f'"{PARTITION_SCHEMA}"."{self.name}"'


def month_partition(year: int, month: int) -> Partition:
    start = dt.datetime(year, month, 1, tzinfo=dt.UTC)
    stop = dt.datetime(year + month // 12, month % 12 + 1, 1, tzinfo=dt.UTC)
    return Partition(f"task_segments_{year:04d}_{month:02d}", start.timestamp(), stop.timestamp())


def month_of(epoch: float) -> tuple[int, int]:
    moment = dt.datetime.fromtimestamp(epoch, dt.UTC)
    return moment.year, moment.month


def is_partitioned(conn: sa.Connection) -> bool:
    """Whether this database's task log is partitioned (PostgreSQL after 0018)."""
    if conn.dialect.name != "postgresql":
        return False
    kind = conn.exec_driver_sql(
        "SELECT relkind FROM pg_class WHERE oid = to_regclass('task_segments')"
    ).scalar()
    return kind == "p"


def partitions(conn: sa.Connection) -> list[Partition]:
    """The month partitions of the task log, oldest first (not the default one)."""
    names = conn.exec_driver_sql(
        "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
        "WHERE i.inhparent = to_regclass('task_segments')"
    ).scalars()
    out = []
    for name in names:
        match = _NAME.match(name)
        if match:
            out.append(month_partition(int(match[1]), int(match[2])))
    return sorted(out, key=lambda p: p.start)


def create_partition(conn: sa.Connection, part: Partition) -> bool:
    """Make ``part`` unless it exists or rows of its month are in the default partition
    already (they stay there); True when made."""
    exists = conn.exec_driver_sql(
        "SELECT 1 FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE n.nspname = %s AND c.relname = %s",
        (PARTITION_SCHEMA, part.name),
    ).first()
    if exists:
        return False
    stranded = conn.exec_driver_sql(
        f'SELECT 1 FROM "{PARTITION_SCHEMA}"."{DEFAULT}" '
        "WHERE first_start >= %s AND first_start < %s LIMIT 1",
        (part.start, part.stop),
    ).first()
    if stranded:
        return False
    conn.exec_driver_sql(
        f"CREATE TABLE {part.qualified} PARTITION OF task_segments "
        f"FOR VALUES FROM ({part.start!r}) TO ({part.stop!r})"
    )
    return True


def ensure_partitions(conn: sa.Connection, now: float, months_ahead: int = MONTHS_AHEAD) -> int:
    """Make the partitions of this month and ``months_ahead`` more; returns how many
    were made. Does nothing where the task log is not partitioned."""
    if not is_partitioned(conn):
        return 0
    year, month = month_of(now)
    made = 0
    for ahead in range(months_ahead + 1):
        index = year * 12 + month - 1 + ahead
        made += create_partition(conn, month_partition(index // 12, index % 12 + 1))
    return made
