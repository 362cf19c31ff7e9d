"""The database schema: a table per record kind built from the record's fields (their
declared :class:`~daskscope.shape.Column`), and the identity tables of a shared server.

This module describes the *current* schema; the migrations under ``migrations/``
create it step by step and a test checks that both agree (Alembic's autogenerate
comparison finds no difference).
"""

from __future__ import annotations

import base64
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

from daskscope import model
from daskscope.shape import Column, record_fields

__all__ = [
    "LONG_PREFIX",
    "PREFIX_CHARS",
    "SHORT_PREFIX",
    "TABLES",
    "TABLE_FOR",
    "accounts",
    "audit_events",
    "clusters",
    "conflict_columns",
    "login_attempts",
    "metadata",
    "retention_policies",
    "sessions",
    "span_tags",
    "task_log_prunes",
    "token_addresses",
    "tokens",
    "users",
    "workflow_runs",
]

# JSONB on PostgreSQL (smaller, indexable); JSON text elsewhere.
JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


class Blob(sa.TypeDecorator[bytes]):
    """BLOB (bytea on PostgreSQL) that also takes the base64 text JSON gives bytes: the
    recorder's store process writes wire batches without decoding them into records."""

    impl = sa.LargeBinary
    cache_ok = True

    def process_bind_param(self, value: Any, dialect: sa.Dialect) -> Any:
        return base64.b64decode(value) if isinstance(value, str) else value


# Epoch seconds need double precision: REAL/FLOAT(24) would lose sub-second detail.
Time = sa.Double

_TYPES: dict[Column, sa.types.TypeEngine[Any] | type[sa.types.TypeEngine[Any]]] = {
    Column.STRING: sa.String,
    Column.TEXT: sa.Text,
    Column.INTEGER: sa.Integer,
    Column.BIGINT: sa.BigInteger,
    Column.DOUBLE: sa.Double,
    Column.TIME: Time,
    Column.BOOLEAN: sa.Boolean,
    Column.JSON: JSON,
    Column.BYTES: Blob,
}

metadata = sa.MetaData()


def _record_table(cls: type, name: str, *indexes: tuple[str, ...]) -> sa.Table:
    """The table of record kind ``cls``: a column per field, in order, then an index
    ``ix_<table>_<columns>`` per tuple of column names. No foreign keys: a cluster's
    records may arrive before the cluster row."""
    columns = [
        sa.Column(
            f.name,
            _TYPES[f.shape.column],
            primary_key=f.shape.primary_key,
            nullable=f.nullable,
        )
        for f in record_fields(cls)
    ]
    return sa.Table(
        name,
        metadata,
        *columns,
        *(sa.Index(f"ix_{name}_{'_'.join(cols)}", *cols) for cols in indexes),
    )


clusters = _record_table(
    model.ClusterRecord,
    "clusters",
    ("account", "started_at"),
    ("user", "started_at"),
    ("started_at",),
)
# Covers the account page's weekly usage per member (store.analytics.weekly_usage): every
# column it reads, so the grouping reads the index, not the wide rows (migration 0008)
sa.Index(
    "ix_clusters_usage",
    *(
        clusters.c[name]
        for name in (
            "user",
            "account",
            "started_at",
            "stopped_at",
            "last_seen_at",
            "core_seconds",
            "compute_seconds",
            "memory_limit_byte_seconds",
        )
    ),
)
computations = _record_table(model.ComputationRecord, "computations", ("cluster_id", "started_at"))
# Leads with cluster_id, so it also serves "all groups of a cluster". The second serves
# a cluster page of tens of thousands of groups: each computation's first groups by
# start (GROUP_ORDER) read from the index; ties by name are sorted after it (a name is
# not short enough for an index entry on PostgreSQL). (One by duration for the longest made the
# other reads of all groups slower on SQLite: they followed it in random row order.)
task_groups = _record_table(
    model.TaskGroupRecord,
    "task_groups",
    ("cluster_id", "computation_id"),
    ("cluster_id", "computation_id", "started_at"),
)
# The longest groups of a cluster without sorting them all (migration 0010). Partial, so
# that only a query that says ``duration_s IS NOT NULL`` (store.groups.LONGEST) can use
# it: no other read of a cluster's groups follows it in duration order.
sa.Index(
    "ix_task_groups_longest",
    task_groups.c.cluster_id,
    task_groups.c.duration_s,
    sqlite_where=task_groups.c.duration_s.is_not(None),
    postgresql_where=task_groups.c.duration_s.is_not(None),
)
#: Characters of a task prefix the span-prefix index holds (a PostgreSQL index entry has
#: a size limit): a group with a longer prefix is in ``ix_task_groups_span_long_prefix``
PREFIX_CHARS = 200
#: A group whose prefix fits the span-prefix index; the other groups, with the same
#: literal bound (a partial index serves only a query that states its condition)
SHORT_PREFIX = sa.func.length(task_groups.c.prefix) <= sa.literal_column(str(PREFIX_CHARS))
LONG_PREFIX = sa.func.length(task_groups.c.prefix) > sa.literal_column(str(PREFIX_CHARS))
# Covering: the task time by prefix of the spans a span tag's history reads (hundreds of
# clusters' groups: store.history), summed from the index, no table rows (migration
# 0014). Partial, so that only a query that states SHORT_PREFIX uses it, and so that an
# unbounded prefix never makes an entry too large; the few groups of longer prefixes are
# found through the second index, whose condition is the opposite.
sa.Index(
    "ix_task_groups_span_prefix",
    task_groups.c.cluster_id,
    task_groups.c.span_id,
    task_groups.c.prefix,
    task_groups.c.duration_s,
    sqlite_where=SHORT_PREFIX,
    postgresql_where=SHORT_PREFIX,
)
sa.Index(
    "ix_task_groups_span_long_prefix",
    task_groups.c.cluster_id,
    task_groups.c.span_id,
    sqlite_where=LONG_PREFIX,
    postgresql_where=LONG_PREFIX,
)
task_prefixes = _record_table(model.TaskPrefixRecord, "task_prefixes", ("cluster_id",))
spans = _record_table(model.SpanRecord, "spans", ("cluster_id", "enqueued_at"))
span_metrics = _record_table(model.SpanMetricRecord, "span_metrics", ("cluster_id", "span_id"))
fine_metric_intervals = _record_table(
    model.FineMetricIntervalRecord, "fine_metric_intervals", ("cluster_id", "started_at")
)
worker_samples = _record_table(
    model.WorkerSampleRecord, "worker_samples", ("cluster_id", "sampled_at")
)
events = _record_table(model.EventRecord, "events", ("cluster_id", "at"))
errors = _record_table(model.ErrorRecord, "errors", ("cluster_id", "at"))
profiles = _record_table(model.ProfileRecord, "profiles", ("cluster_id", "started_at"))
workflow_runs = _record_table(
    model.WorkflowRunRecord,
    "workflow_runs",
    ("started_at",),
    ("account", "started_at"),
    ("cluster_id", "started_at"),
)
workflow_chunks = _record_table(
    model.WorkflowChunkRecord,
    "workflow_chunks",
    ("run_id", "chunk_index"),
    ("cluster_id",),
)

# Segments are read by cluster and time range (tasklog/reads.py)
task_segments = _record_table(
    model.TaskSegmentRecord, "task_segments", ("cluster_id", "first_start")
)
#: The schema of the task log's monthly partitions on PostgreSQL (store/partitions.py;
#: migration 0018): a schema of their own, so that they are not taken for tables of ours
PARTITION_SCHEMA = "daskscope_task_log"


def conflict_columns(table: sa.Table, dialect: str) -> list[sa.Column[Any]]:
    """The columns a row's upsert finds its stored row by: its id, and on PostgreSQL, for
    the task log, its first start too. The task log is partitioned by ``first_start``
    there, and a partitioned table's keys must hold the partition key (a segment's
    ``first_start`` never changes: a segment is sealed before it is written)."""
    if table is task_segments and dialect == "postgresql":
        return [table.c.id, table.c.first_start]
    return [table.c.id]


# Each span's own tag, indexed: a tag's spans without matching text in every span's
# JSON name (store/span_tags.py; migration 0009). Written beside the span rows.
span_tags = sa.Table(
    "span_tags",
    metadata,
    sa.Column("id", sa.String, primary_key=True),  # the span row's id
    sa.Column("cluster_id", sa.String, nullable=False),
    sa.Column("tag", sa.String, nullable=False),
    sa.Column("outermost", sa.Boolean, nullable=False),
    sa.Column("enqueued_at", Time, nullable=False),
    # the span's task seconds and whether it has no parent, as in its row (migration
    # 0011): what cost attribution sums, read without the wide span rows
    sa.Column("root", sa.Boolean, nullable=False, server_default=sa.false()),
    sa.Column("duration_s", sa.Double, nullable=True),
    # the span row's revision: a tag row moves forward with its span (migration 0012)
    sa.Column("revision", sa.BigInteger, nullable=True),
    # A tag's spans in a time range; covering what cost attribution reads, so that the
    # costs of one tag or of every tag read no table rows (migration 0011)
    sa.Index(
        "ix_span_tags_tag_costs",
        "tag",
        "outermost",
        "enqueued_at",
        "cluster_id",
        "root",
        "duration_s",
    ),
    # Covering: the recurring tags of an account's clusters, and the members' costs (root
    # spans of their clusters), read no table rows
    sa.Index(
        "ix_span_tags_cluster_id_outermost_tag",
        "cluster_id",
        "outermost",
        "tag",
        "root",
        "duration_s",
    ),
)

TABLE_FOR: dict[type, sa.Table] = {
    model.ClusterRecord: clusters,
    model.ComputationRecord: computations,
    model.TaskGroupRecord: task_groups,
    model.TaskPrefixRecord: task_prefixes,
    model.SpanRecord: spans,
    model.SpanMetricRecord: span_metrics,
    model.FineMetricIntervalRecord: fine_metric_intervals,
    model.WorkerSampleRecord: worker_samples,
    model.EventRecord: events,
    model.ErrorRecord: errors,
    model.ProfileRecord: profiles,
    model.WorkflowRunRecord: workflow_runs,
    model.WorkflowChunkRecord: workflow_chunks,
    model.TaskSegmentRecord: task_segments,
}

#: The record kinds' tables by name
TABLES: dict[str, sa.Table] = {t.name: t for t in TABLE_FOR.values()}

# A shared server's accounts, their members and the members' tokens (store.identity).
# Of a token only its SHA-256 is kept.
accounts = sa.Table(
    "accounts",
    metadata,
    sa.Column("id", sa.String, primary_key=True),
    sa.Column("name", sa.String, nullable=False, unique=True),
    sa.Column("created_at", Time, nullable=False),
)

users = sa.Table(
    "users",
    metadata,
    sa.Column("id", sa.String, primary_key=True),
    sa.Column("name", sa.String, nullable=False, unique=True),
    sa.Column("account", sa.String, nullable=False),
    sa.Column("is_admin", sa.Boolean, nullable=False),
    sa.Column("created_at", Time, nullable=False),
    sa.Index("ix_users_account", "account"),
)

tokens = sa.Table(
    "tokens",
    metadata,
    sa.Column("id", sa.String, primary_key=True),
    sa.Column("user", sa.String, nullable=False),
    sa.Column("token_hash", sa.String, nullable=False, unique=True),
    sa.Column("hint", sa.String, nullable=False),
    sa.Column("created_at", Time, nullable=False),
    sa.Column("revoked_at", Time, nullable=True),
    sa.Index("ix_tokens_user", "user"),
)

# Browser logins: only the SHA-256 of a session id is kept. A session ends at its
# expiry, at logout, or when the token that opened it is revoked (looked up each time).
sessions = sa.Table(
    "sessions",
    metadata,
    sa.Column("id_hash", sa.String, primary_key=True),
    sa.Column("token_id", sa.String, nullable=False),
    sa.Column("created_at", Time, nullable=False),
    sa.Column("expires_at", Time, nullable=False),
    sa.Index("ix_sessions_token_id", "token_id"),
    sa.Index("ix_sessions_expires_at", "expires_at"),
)

# A server's audit log (store/audit.py; migration 0013): tokens created, used from a new
# address, revoked; failed logins. ``account`` is None for what belongs to no account
# (a login with a token nobody holds): the server's operator sees it, no account does.
# Ids grow with each event: the order events were written, and the export's cursor.
audit_events = sa.Table(
    "audit_events",
    metadata,
    sa.Column("id", sa.BigInteger().with_variant(sa.Integer, "sqlite"), primary_key=True),
    sa.Column("at", Time, nullable=False),
    sa.Column("kind", sa.String, nullable=False),
    sa.Column("account", sa.String, nullable=True),
    sa.Column("user", sa.String, nullable=True),
    sa.Column("address", sa.String, nullable=True),
    sa.Column("token_hint", sa.String, nullable=True),
    sa.Column("detail", JSON, nullable=True),
    # an account's log, newest first; the whole log by time (export, retention)
    sa.Index("ix_audit_events_account_id", "account", "id"),
    sa.Index("ix_audit_events_at", "at"),
)

# The addresses each token was used from (a session counts as its token): a use from an
# address not yet here is audited once, whichever server process sees it first.
token_addresses = sa.Table(
    "token_addresses",
    metadata,
    sa.Column("token_id", sa.String, primary_key=True),
    sa.Column("address", sa.String, primary_key=True),
    sa.Column("first_seen_at", Time, nullable=False),
)

# Login attempts of the last minute per client address (web/ratelimit.py), shared by
# every server process; older rows are pruned.
login_attempts = sa.Table(
    "login_attempts",
    metadata,
    sa.Column("id", sa.BigInteger().with_variant(sa.Integer, "sqlite"), primary_key=True),
    sa.Column("address", sa.String, nullable=False),
    sa.Column("at", Time, nullable=False),
    sa.Index("ix_login_attempts_address_at", "address", "at"),
    sa.Index("ix_login_attempts_at", "at"),
)

# Retention (store/retention.py; migration 0018). An account's own number of days its
# clusters' task log is kept (None: for ever), set by an admin of the account; an
# account without a row follows the ``retention.task-log-days`` setting.
retention_policies = sa.Table(
    "retention_policies",
    metadata,
    sa.Column("account", sa.String, primary_key=True),
    sa.Column("task_log_days", sa.Double, nullable=True),
    sa.Column("set_by", sa.String, nullable=False),
    sa.Column("set_at", Time, nullable=False),
)

# Clusters whose task log (task_segments) was removed by policy, so that a read of their
# timeline says so instead of showing nothing as if nothing ran. Their aggregates stay.
task_log_prunes = sa.Table(
    "task_log_prunes",
    metadata,
    sa.Column("cluster_id", sa.String, primary_key=True),
    sa.Column("pruned_at", Time, nullable=False),
    sa.Column("task_log_days", sa.Double, nullable=False),
    sa.Column("segments", sa.BigInteger, nullable=False),
    sa.Column("executions", sa.BigInteger, nullable=False),
    sa.Column("bytes", sa.BigInteger, nullable=False),
)

# Alerts (store/alerts.py; migration 0017): one row per time a rule's condition held, from
# when it fired until it cleared, with the delivery of its notification (an outbox: a
# restarted server goes on delivering what is pending). At most one open row per rule and
# condition (the partial unique index): one alert per condition until it clears, whichever
# server process evaluates first.
alerts = sa.Table(
    "alerts",
    metadata,
    sa.Column("id", sa.String, primary_key=True),
    sa.Column("rule", sa.String, nullable=False),
    sa.Column("account", sa.String, nullable=False),
    sa.Column("kind", sa.String, nullable=False),
    sa.Column("condition", sa.String, nullable=False),
    sa.Column("summary", sa.Text, nullable=False),
    sa.Column("detail", JSON, nullable=True),
    sa.Column("fired_at", Time, nullable=False),
    sa.Column("cleared_at", Time, nullable=True),
    sa.Column("webhook", sa.Text, nullable=False),
    sa.Column("body_format", sa.String, nullable=False),
    # pending, delivered, failed (gave up after the rule's attempts)
    sa.Column("delivery", sa.String, nullable=False),
    sa.Column("attempts", sa.Integer, nullable=False),
    sa.Column("next_attempt_at", Time, nullable=True),
    sa.Column("claimed_until", Time, nullable=True),
    sa.Column("delivered_at", Time, nullable=True),
    sa.Column("last_error", sa.Text, nullable=True),
    sa.Index(
        "ux_alerts_open",
        "rule",
        "condition",
        unique=True,
        sqlite_where=sa.text("cleared_at IS NULL"),
        postgresql_where=sa.text("cleared_at IS NULL"),
    ),
    sa.Index("ix_alerts_account_fired", "account", "fired_at"),
    sa.Index("ix_alerts_delivery", "delivery", "next_attempt_at"),
)

# Alert rules an account's admins set through the server (web/routes/alerts.py), beside
# those of the server's configuration; names are unique on the server.
alert_rules = sa.Table(
    "alert_rules",
    metadata,
    sa.Column("name", sa.String, primary_key=True),
    sa.Column("account", sa.String, nullable=False),
    # the rule as the configuration spells it (kind, webhook, format, idle-minutes, ...)
    sa.Column("rule", JSON, nullable=False),
    sa.Column("updated_by", sa.String, nullable=True),
    sa.Column("updated_at", Time, nullable=False),
)
