"""``daskscope audit export [--account A] [--since DAY] [--until DAY] [--kind K]
[--output FILE]``: a server's audit log as JSON lines, oldest first (store/audit.py).

Read from the database itself, so it is the operator's view: without ``--account`` it
holds every event, those that belong to no account (a login with a token nobody holds)
included. An account's admins read their own account's log at ``/audit`` or
``/api/v1/audit?format=jsonl``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from daskscope.store.audit import KINDS

__all__ = ["audit_group"]


@click.group("audit")
def audit_group() -> None:
    """The audit log of a shared server: tokens created, used from a new address,
    revoked; failed logins."""


@audit_group.command("export")
@click.option("--account", help="Only this account's events (default: every event).")
@click.option("--since", metavar="DAY", help="Events on or after this UTC day or time.")
@click.option("--until", metavar="DAY", help="Events up to this UTC day (inclusive) or time.")
@click.option("--kind", type=click.Choice(KINDS), multiple=True, help="Only these kinds.")
@click.option(
    "--output",
    "-o",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write to this file instead of standard output.",
)
@click.pass_obj
def audit_export(
    state: Any,
    account: str | None,
    since: str | None,
    until: str | None,
    kind: tuple[str, ...],
    output: Path | None,
) -> None:
    """Write the audit log as JSON lines, one event a line, oldest first: id, time (ISO
    8601, UTC), at (epoch seconds), kind, account, user, address, token_hint, detail."""
    from daskscope.store import open_store
    from daskscope.views.run import time_bound

    try:
        start, end = time_bound(since), time_bound(until, end=True)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None
    count = 0
    with (
        open_store(state.database) as store,
        click.open_file(
            str(output or "-"), "w", encoding="utf-8", atomic=output is not None
        ) as out,
    ):
        for event in store.export_events(account=account, since=start, until=end, kinds=kind):
            out.write(json.dumps(event.to_data(), separators=(",", ":")) + "\n")
            count += 1
    if output is not None:
        click.echo(f"wrote {count:,} event{'s' if count != 1 else ''} to {output}", err=True)
