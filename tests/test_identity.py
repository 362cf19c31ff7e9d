"""Accounts, members and tokens on both databases, and their command line."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
import sqlalchemy as sa
from click.testing import CliRunner

from daskscope.cli.main import cli
from daskscope.store import Store
from daskscope.store.identity import (
    Identity,
    IdentityError,
    add_user,
    create_account,
    create_token,
    identity_for_token,
    list_members,
    revoke_token,
    tokens,
)


def test_tokens_resolve_to_their_member_until_revoked(store: Store) -> None:
    create_account(store, "atlas")
    add_user(store, "alice", account="atlas", admin=True)
    add_user(store, "bob", account="atlas")
    alice, bob = create_token(store, "alice"), create_token(store, "bob")
    assert alice != bob and alice.startswith("dsk_") and len(alice) > 40
    assert identity_for_token(store, alice) == Identity("alice", "atlas", True)
    assert identity_for_token(store, bob) == Identity("bob", "atlas", False)
    assert identity_for_token(store, bob + "x") is None
    # only the hash is kept
    with store.engine.connect() as conn:
        kept = {r.token_hash for r in conn.execute(sa.select(tokens.c.token_hash))}
    assert hashlib.sha256(bob.encode()).hexdigest() in kept and bob not in kept
    assert revoke_token(store, token=bob) == 1
    assert identity_for_token(store, bob) is None
    assert identity_for_token(store, alice) is not None
    hint = list_members(store, "atlas")[0]["tokens"][0]["hint"]
    assert alice.startswith(hint)
    assert revoke_token(store, token=hint) == 1
    assert identity_for_token(store, alice) is None


def test_mistakes_say_what_to_do(store: Store) -> None:
    with pytest.raises(IdentityError, match="daskscope account create physics"):
        add_user(store, "carol", account="physics")
    create_account(store, "physics")
    with pytest.raises(IdentityError, match="exists already"):
        create_account(store, "physics")
    with pytest.raises(IdentityError, match="daskscope user add dave"):
        create_token(store, "dave")
    with pytest.raises(IdentityError, match="no such active token"):
        revoke_token(store, token="dsk_nothing")
    with pytest.raises(IdentityError, match="1 to 100 characters"):
        create_account(store, " ")


def test_command_line(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'server.db'}"
    runner = CliRunner()

    def run(*args: str) -> tuple[int, str, str]:
        result = runner.invoke(cli, ["--database", url, *args])
        return result.exit_code, result.stdout, result.stderr

    assert run("account", "create", "atlas")[0] == 0
    assert run("user", "add", "alice", "--account", "atlas", "--admin")[0] == 0
    code, out, err = run("token", "create", "--user", "alice")
    token = out.strip()
    assert code == 0 and token.startswith("dsk_") and "only time" in err
    code, out, _ = run("user", "list", "--json")
    assert code == 0 and '"is_admin": true' in out and token not in out
    assert run("token", "revoke", token) == (0, "revoked 1 token\n", "")
    code, _, err = run("token", "revoke", token)
    assert code == 2 and err.startswith("error: no such active token")
    code, _, err = run("user", "add", "eve", "--account", "nope")
    assert code == 2 and "daskscope account create nope" in err
