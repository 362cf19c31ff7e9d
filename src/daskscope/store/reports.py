"""Uploaded Dask performance reports, kept as files beside the database.

Not a table: a report is one opaque HTML file. Where they live:

- config ``daskscope.reports-dir`` when set (needed to share them between the servers
  of one PostgreSQL database);
- else, for an SQLite store, ``reports/`` next to the database file;
- else (PostgreSQL, in-memory SQLite) ``reports/`` in the user's data directory.

Each report is ``<id>.html`` plus ``<id>.json`` (name, size, cluster, upload time).
"""

from __future__ import annotations

import json
import os
import re
import time
import uuid
from pathlib import Path
from typing import Any

from daskscope import config
from daskscope.store.database import Database

__all__ = [
    "NotAReport",
    "ReportQuotaExceeded",
    "ReportTooLarge",
    "check_report",
    "list_reports",
    "max_report_bytes",
    "read_report",
    "report_info",
    "reports_dir",
    "save_report",
]

_ID = re.compile(r"^[0-9a-f]{32}$")
DEFAULT_MAX_BYTES = 50 * 2**20


class ReportTooLarge(ValueError):
    """The upload exceeds ``daskscope.max-report-bytes``."""


class ReportQuotaExceeded(ReportTooLarge):
    """The upload would take its account past ``daskscope.max-report-bytes-per-account``."""


class NotAReport(ValueError):
    """The upload is not an HTML file saved by ``distributed.performance_report``."""


#: What ``distributed.performance_report`` writes: Bokeh's standalone HTML with this title
#: and the document as JSON in a script element.
_TITLE = re.compile(rb"<title>\s*Dask Performance Report\s*</title>", re.IGNORECASE)
_DOCUMENT = re.compile(rb"<script[^>]*type=[\"']application/json[\"']", re.IGNORECASE)
ACCEPTED = (
    "an HTML file saved by distributed.performance_report(filename=...) "
    "(titled 'Dask Performance Report', holding a Bokeh document)"
)


def check_report(content: bytes, name: str = "the upload") -> None:
    """Raise :class:`NotAReport` unless ``content`` looks like a Dask performance report.
    A guard against uploading the wrong file, not a security check: a report is sandboxed
    whatever it holds (web/routes/reports.py)."""
    if _TITLE.search(content) is None or _DOCUMENT.search(content) is None:
        raise NotAReport(f"{name} is not a Dask performance report: upload {ACCEPTED}")


def max_report_bytes() -> int:
    return int(config.get("max-report-bytes") or DEFAULT_MAX_BYTES)


def reports_dir(store: Database) -> Path:
    configured = config.get("reports-dir")
    if configured:
        return Path(configured).expanduser()
    database = store.url.database if store.dialect == "sqlite" else None
    if database and database != ":memory:":
        return Path(database).parent / "reports"
    import platformdirs

    return Path(platformdirs.user_data_dir("daskscope")) / "reports"


def save_report(
    store: Database,
    content: bytes,
    *,
    name: str,
    cluster_id: str | None = None,
    account: str | None = None,
) -> dict[str, Any]:
    """Store one report; returns its info. Raises ReportTooLarge past the limit.
    ``account`` is the uploader's on a server with authentication (None: embedded)."""
    limit = max_report_bytes()
    if len(content) > limit:
        raise ReportTooLarge(f"the report has {len(content)} bytes; the limit is {limit}")
    _check_quota(store, len(content), account)
    folder = reports_dir(store)
    folder.mkdir(parents=True, exist_ok=True)
    report_id = uuid.uuid4().hex
    info = {
        "id": report_id,
        "name": Path(name).name[:200] or "report.html",
        "size": len(content),
        "cluster_id": cluster_id or None,
        "uploaded_at": time.time(),
        "account": account,
    }
    # Write the HTML first and the metadata last (atomically): a report is listed only
    # once both exist.
    (folder / f"{report_id}.html").write_bytes(content)
    tmp = folder / f".{report_id}.json.tmp"
    tmp.write_text(json.dumps(info))
    os.replace(tmp, folder / f"{report_id}.json")
    return info


def _check_quota(store: Database, size: int, account: str | None) -> None:
    """Refuse a report that would take ``account`` past its share of the reports folder
    (``daskscope.max-report-bytes-per-account``): one member could fill the disk. Only
    on a server with accounts (``account`` given); the embedded single user has none."""
    quota = config.get("max-report-bytes-per-account", None)
    if not quota or account is None:
        return
    kept = sum(int(r.get("size") or 0) for r in list_reports(store, account=account))
    if kept + size > int(quota):
        raise ReportQuotaExceeded(
            f"this account keeps {kept} bytes of reports and the quota is {int(quota)}; "
            f"this one ({size} bytes) does not fit: ask the server's operator to raise "
            "daskscope.max-report-bytes-per-account or remove old reports"
        )


def report_info(
    store: Database, report_id: str, *, account: str | None = None
) -> dict[str, Any] | None:
    """The report's info, or None for an unknown (or malformed) id, or one that is not
    ``account``'s when an account is given."""
    if not _ID.match(report_id):
        return None
    path = reports_dir(store) / f"{report_id}.json"
    try:
        info = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(info, dict) or (account is not None and info.get("account") != account):
        return None
    return info


def read_report(store: Database, report_id: str, *, account: str | None = None) -> bytes | None:
    if report_info(store, report_id, account=account) is None:
        return None
    try:
        return (reports_dir(store) / f"{report_id}.html").read_bytes()
    except OSError:
        return None


def list_reports(store: Database, *, account: str | None = None) -> list[dict[str, Any]]:
    """All reports (or ``account``'s), newest first."""
    folder = reports_dir(store)
    if not folder.is_dir():
        return []
    found = []
    for path in folder.glob("*.json"):
        info = report_info(store, path.stem, account=account)
        if info is not None:
            found.append(info)
    return sorted(found, key=lambda r: r["uploaded_at"], reverse=True)
