"""Settings live in dask's config: defaults from the package, overrides from the usual places."""

from __future__ import annotations

import copy
import pickle
from pathlib import Path
from typing import Any

import dask
import pytest
import yaml

from daskscope import config
from daskscope.analysis import cluster_statistics
from daskscope.collector.plugin import DaskscopePlugin
from daskscope.config import CollectorSettings
from daskscope.pricing import cost_rates


def test_defaults_come_from_the_packaged_yaml() -> None:
    settings = CollectorSettings.from_config()
    assert settings.flush_interval == 5
    assert settings.progress_interval == 10
    assert settings.worker_sampling_interval == 2
    assert settings.profile_enabled is True
    assert settings.account == "default"
    assert settings.user  # the operating-system user when none is configured
    assert settings.database.startswith("sqlite:///") and settings.database.endswith("daskscope.db")


def test_environment_variables_override(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DASK_DASKSCOPE__ACCOUNT", "physics")
    monkeypatch.setenv("DASK_DASKSCOPE__FLUSH_INTERVAL", "750ms")
    monkeypatch.setenv("DASK_DASKSCOPE__DATABASE", "sqlite:////tmp/elsewhere.db")
    # refresh() clears and refills dask's one config dict in place: restore its contents
    saved = copy.deepcopy(dask.config.config)
    try:
        dask.config.refresh()
        settings = CollectorSettings.from_config()
    finally:
        dask.config.config.clear()
        dask.config.config.update(saved)
    assert settings.account == "physics"
    assert settings.flush_interval == pytest.approx(0.75)
    assert settings.database == "sqlite:////tmp/elsewhere.db"


def test_dask_config_set_and_keywords_override() -> None:
    with dask.config.set({"daskscope.user": "ana", "daskscope.profile.enabled": False}):
        settings = CollectorSettings.from_config(cluster_name="nightly", flush_interval="2s")
    assert settings.user == "ana" and settings.profile_enabled is False
    assert settings.cluster_name == "nightly" and settings.flush_interval == 2
    with dask.config.set({"daskscope.progress-interval": "1m"}):
        assert CollectorSettings.from_config().progress_interval == 60
    assert CollectorSettings.from_config(progress_interval=0).progress_interval == 0
    plugin = DaskscopePlugin(CollectorSettings.from_config(progress_interval="2500ms"))
    assert plugin.tracker.progress_seconds == 2.5  # what the flushes pace by


def test_bad_settings_say_what_is_wrong() -> None:
    with pytest.raises(TypeError, match=r"unknown daskscope settings.*flush_intervall"):
        CollectorSettings.from_config(flush_intervall="1s")
    with pytest.raises(ValueError, match="flush_interval must be positive"):
        CollectorSettings.from_config(flush_interval=0)
    for bad in (-1, "-1s", "soon"):
        with pytest.raises(ValueError, match=rf"progress_interval must be a duration.*{bad!r}"):
            CollectorSettings.from_config(progress_interval=bad)
    with (  # the same from dask's config (a YAML file, an environment variable)
        dask.config.set({"daskscope.progress-interval": "soon"}),
        pytest.raises(ValueError, match=r"progress_interval must be a duration.*'soon'"),
    ):
        CollectorSettings.from_config()


def test_default_database_is_under_the_user_data_directory() -> None:
    import platformdirs

    assert platformdirs.user_data_dir("daskscope") in config.default_database_url()


def test_plugin_pickles_with_its_settings_only() -> None:
    plugin = DaskscopePlugin(CollectorSettings.from_config(account="team"))
    copy = pickle.loads(pickle.dumps(plugin))
    assert copy.settings == plugin.settings and copy.cluster_id == plugin.cluster_id


@pytest.fixture
def cleared_config() -> Any:
    """dask's live config emptied, as a harness that resets it does (restored after)."""
    saved = copy.deepcopy(dask.config.config)
    dask.config.config.clear()
    yield dask.config.config
    dask.config.config.clear()
    dask.config.config.update(saved)


def test_settings_fall_back_to_the_shipped_defaults_when_the_config_lost_them(
    cleared_config: dict[str, Any],
) -> None:
    shipped = yaml.safe_load(Path(config.__file__).with_name("daskscope.yaml").read_text())
    assert "daskscope" not in dask.config.config
    settings = CollectorSettings.from_config()
    assert (
        settings.flush_interval == 5 and settings.max_errors == shipped["daskscope"]["max-errors"]
    )
    assert (
        config.get("ingest.max-batch-records")
        == shipped["daskscope"]["ingest"]["max-batch-records"]
    )
    assert config.get("cost") == shipped["daskscope"]["cost"]
    assert config.get("no-such-key", "fallback") == "fallback"


def test_live_values_win_and_sections_merge_over_the_shipped_ones(
    cleared_config: dict[str, Any],
) -> None:
    dask.config.set(
        {
            "daskscope.flush-interval": "250ms",
            "daskscope.profile.enabled": False,
            "daskscope.cost.physics.per-core-hour": 0.1,
            "daskscope.worker-sampling-interval": None,  # null: the shipped default
        }
    )
    settings = CollectorSettings.from_config()
    assert settings.flush_interval == pytest.approx(0.25)
    assert settings.profile_enabled is False
    assert settings.profile_interval == 10  # the rest of the section is the shipped one
    assert settings.worker_sampling_interval == 2
    cost = config.get("cost")
    assert cost["physics"] == {"per-core-hour": 0.1} and cost["default"]["per-core-hour"] == 0.04


# -- prices (daskscope.pricing reads them; the analyses get them as data)


def test_cost_rates_per_account_with_default_fallback() -> None:
    table = {
        "default": {"currency": "USD", "per-core-hour": 0.04, "per-gib-hour": 0.005},
        "team.a": {"currency": "CHF", "per-core-hour": 0.1},
    }
    with dask.config.set({"daskscope.cost": table}):
        assert cost_rates("team.a") == {
            "account": "team.a",
            "currency": "CHF",
            "per_core_hour": 0.1,
        }
        assert cost_rates("nobody") == {
            "account": "default",
            "currency": "USD",
            "per_core_hour": 0.04,
            "per_gib_hour": 0.005,
        }
        # memory is not priced for team.a: only the core part counts
        stats = cluster_statistics(
            {"core_seconds": 7200.0, "memory_limit_byte_seconds": 4 * 2**30 * 3600.0},
            cost_rates("team.a"),
        )
        assert stats["cost"]["total"] == pytest.approx(0.2)
        assert stats["cost"]["per_gib_hour"] is None


def test_cost_rates_shipped_default() -> None:
    rates = cost_rates(None)
    assert rates["account"] == "default"
    assert rates["per_core_hour"] == 0.04
