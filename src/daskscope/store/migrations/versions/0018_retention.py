"""Retention of the task log: per-account policies and a mark on pruned clusters.

Revision ID: 0018
Revises: 0017
Create Date: 2026-11-27

``retention_policies`` holds an account's own number of days its clusters' task log is
kept (NULL: for ever); an account without a row follows the ``retention.task-log-days``
setting. ``task_log_prunes`` marks each cluster whose task log ``daskscope prune``
removed (when, under which policy, how much), so that its timeline says "pruned" rather
than "nothing recorded". Aggregates are never pruned (docs/server.md, Retention).

On PostgreSQL the task log becomes a table partitioned by range of ``first_start``, a
partition a UTC month in the schema ``daskscope_task_log`` (kept apart so that they are
not taken for daskscope tables) plus a default partition, so that expiry drops a month
instead of deleting its rows. Its primary key becomes ``(id, first_start)``: a
partitioned table's keys must hold the partition key. The rows are copied over in this
migration's transaction (minutes for a large task log). SQLite is unchanged.
"""

from __future__ import annotations

import datetime as dt

import sqlalchemy as sa
from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "retention_policies",
        sa.Column("account", sa.String(), primary_key=True),
        sa.Column("task_log_days", sa.Double(), nullable=True),
        sa.Column("set_by", sa.String(), nullable=False),
        sa.Column("set_at", sa.Double(), nullable=False),
    )
    op.create_table(
        "task_log_prunes",
        sa.Column("cluster_id", sa.String(), primary_key=True),
        sa.Column("pruned_at", sa.Double(), nullable=False),
        sa.Column("task_log_days", sa.Double(), nullable=False),
        sa.Column("segments", sa.BigInteger(), nullable=False),
        sa.Column("executions", sa.BigInteger(), nullable=False),
        sa.Column("bytes", sa.BigInteger(), nullable=False),
    )
    if op.get_bind().dialect.name == "postgresql":
        _partition_task_log()


SCHEMA = "daskscope_task_log"
#: Months after the current one that get a partition now (later ones: daskscope prune)
AHEAD = 3
#: first_start beyond this is no real time (year 3000): such rows go to the default
LATEST = 32503680000.0


def _month(year: int, month: int) -> tuple[str, float, float]:
    start = dt.datetime(year, month, 1, tzinfo=dt.UTC)
    stop = dt.datetime(year + month // 12, month % 12 + 1, 1, tzinfo=dt.UTC)
    return f"task_segments_{year:04d}_{month:02d}", start.timestamp(), stop.timestamp()


def _partition_task_log() -> None:
    run = op.get_bind().exec_driver_sql
    run(f'CREATE SCHEMA IF NOT EXISTS "{SCHEMA}"')
    run("ALTER TABLE task_segments RENAME TO task_segments_unpartitioned")
    run(
        "ALTER TABLE task_segments_unpartitioned RENAME CONSTRAINT task_segments_pkey "
        "TO task_segments_unpartitioned_pkey"
    )
    run(
        "ALTER INDEX ix_task_segments_cluster_id_first_start "
        "RENAME TO ix_task_segments_unpartitioned"
    )
    run(
        "CREATE TABLE task_segments (LIKE task_segments_unpartitioned INCLUDING DEFAULTS) "
        "PARTITION BY RANGE (first_start)"
    )
    run("ALTER TABLE task_segments ADD CONSTRAINT task_segments_pkey PRIMARY KEY (id, first_start)")
    run(
        "CREATE INDEX ix_task_segments_cluster_id_first_start "
        "ON task_segments (cluster_id, first_start)"
    )
    run(f'CREATE TABLE "{SCHEMA}".task_segments_default PARTITION OF task_segments DEFAULT')
    months = {
        (int(y), int(m))
        for y, m in run(
            "SELECT DISTINCT extract(year FROM to_timestamp(first_start) AT TIME ZONE 'UTC'), "
            "extract(month FROM to_timestamp(first_start) AT TIME ZONE 'UTC') "
            "FROM task_segments_unpartitioned WHERE first_start >= 0 AND first_start < %s",
            (LATEST,),
        )
    }
    now = dt.datetime.now(dt.UTC)
    for ahead in range(AHEAD + 1):
        index = now.year * 12 + now.month - 1 + ahead
        months.add((index // 12, index % 12 + 1))
    for year, month in sorted(months):
        name, start, stop = _month(year, month)
        run(
            f'CREATE TABLE "{SCHEMA}"."{name}" PARTITION OF task_segments '
            f"FOR VALUES FROM ({start!r}) TO ({stop!r})"
        )
    run("INSERT INTO task_segments SELECT * FROM task_segments_unpartitioned")
    run("DROP TABLE task_segments_unpartitioned")


def _unpartition_task_log() -> None:
    run = op.get_bind().exec_driver_sql
    run("ALTER TABLE task_segments RENAME TO task_segments_partitioned")
    run(
        "ALTER INDEX ix_task_segments_cluster_id_first_start RENAME TO ix_task_segments_partitioned"
    )
    run(
        "ALTER TABLE task_segments_partitioned RENAME CONSTRAINT task_segments_pkey "
        "TO task_segments_partitioned_pkey"
    )
    run("CREATE TABLE task_segments (LIKE task_segments_partitioned INCLUDING DEFAULTS)")
    run("ALTER TABLE task_segments ADD CONSTRAINT task_segments_pkey PRIMARY KEY (id)")
    run(
        "CREATE INDEX ix_task_segments_cluster_id_first_start "
        "ON task_segments (cluster_id, first_start)"
    )
    run("INSERT INTO task_segments SELECT * FROM task_segments_partitioned")
    run("DROP TABLE task_segments_partitioned")
    run(f'DROP SCHEMA "{SCHEMA}" CASCADE')


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        _unpartition_task_log()
    op.drop_table("task_log_prunes")
    op.drop_table("retention_policies")
