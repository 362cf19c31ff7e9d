"""Accounts, members and tokens of a shared daskscope server.

``daskscope account create NAME``, ``daskscope user add NAME --account A [--admin]``,
``daskscope token create --user NAME`` (shown once, kept only as a hash),
``daskscope token revoke TOKEN_OR_HINT`` / ``--user NAME``, and listings.
"""

from __future__ import annotations

import json
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from daskscope.format import MISSING, timestamp_text

__all__ = ["account_group", "token_group", "user_group"]


def _store(state: Any) -> Any:
    from daskscope.store import open_store

    return open_store(state.database)


@click.group("account")
def account_group() -> None:
    """Accounts: the unit that owns clusters and is billed for them."""


@account_group.command("create")
@click.argument("name")
@click.pass_obj
def account_create(state: Any, name: str) -> None:
    from daskscope.store.identity import create_account

    with _store(state) as store:
        create_account(store, name)
    click.echo(
        f"account {name!r} created; add members with: daskscope user add NAME --account {name}"
    )


@click.group("user")
def user_group() -> None:
    """Members of accounts."""


@user_group.command("add")
@click.argument("name")
@click.option("--account", required=True, help="The account the user belongs to.")
@click.option("--admin", is_flag=True, help="May see the usage of every member of the account.")
@click.pass_obj
def user_add(state: Any, name: str, account: str, admin: bool) -> None:
    from daskscope.store.identity import add_user

    with _store(state) as store:
        add_user(store, name, account=account, admin=admin)
    role = "admin" if admin else "member"
    click.echo(
        f"user {name!r} added to {account!r} as {role}; "
        f"make a token: daskscope token create --user {name}"
    )


@user_group.command("list")
@click.option("--account", help="Only this account's members.")
@click.option("--json", "as_json", is_flag=True)
@click.pass_obj
def user_list(state: Any, account: str | None, as_json: bool) -> None:

    with _store(state) as store:
        members = store.list_members(account)
    if as_json:
        click.echo(json.dumps(members, indent=2))
        return
    table = Table("user", "account", "role", "tokens (hint, created, revoked)")
    for m in members:
        hints = ", ".join(
            f"{t['hint']}… {timestamp_text(t['created_at'])}"
            + (f" revoked {timestamp_text(t['revoked_at'])}" if t["revoked_at"] else "")
            for t in m["tokens"]
        )
        role = "admin" if m["is_admin"] else "member"
        table.add_row(m["name"], m["account"], role, hints or MISSING)
    Console().print(table)


@click.group("token")
def token_group() -> None:
    """Tokens: how collectors and browsers prove who they are to a server."""


@token_group.command("create")
@click.option("--user", "user", required=True)
@click.pass_obj
def token_create(state: Any, user: str) -> None:
    from daskscope.store.identity import create_token

    with _store(state) as store:
        token = create_token(store, user)
    click.echo(token)
    click.echo(
        "This is the only time the token is shown: keep it in DASK_DASKSCOPE__TOKEN or in "
        "daskscope.token of your dask config.",
        err=True,
    )


@token_group.command("revoke")
@click.argument("token", required=False)
@click.option("--user", "user", help="Revoke every token of this user instead.")
@click.pass_obj
def token_revoke(state: Any, token: str | None, user: str | None) -> None:
    """Revoke TOKEN (the token itself or the hint `daskscope user list` shows)."""
    from daskscope.store.identity import revoke_token

    if (token is None) == (user is None):
        raise click.UsageError("give either a TOKEN or --user NAME")
    with _store(state) as store:
        count = revoke_token(store, token=token, user=user)
    click.echo(f"revoked {count} token{'s' if count != 1 else ''}")
