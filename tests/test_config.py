"""Settings live in dask's config: defaults from the package, overrides from the usual places."""

from __future__ import annotations

import pickle

import dask
import pytest

from daskscope import config
from daskscope.collector.plugin import DaskscopePlugin
from daskscope.config import CollectorSettings


def test_defaults_come_from_the_packaged_yaml() -> None:
    settings = CollectorSettings.from_config()
    assert settings.flush_interval == 5
    assert settings.worker_sampling_interval == 2
    assert settings.profile_enabled is True
    assert settings.account == "default"
    assert settings.user  # the operating-system user when none is configured
    assert settings.database.startswith("sqlite:///") and settings.database.endswith("daskscope.db")


def test_environment_variables_override(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DASK_DASKSCOPE__ACCOUNT", "physics")
    monkeypatch.setenv("DASK_DASKSCOPE__FLUSH_INTERVAL", "750ms")
    monkeypatch.setenv("DASK_DASKSCOPE__DATABASE", "sqlite:////tmp/elsewhere.db")
    original = dask.config.config
    try:
        dask.config.refresh()
        settings = CollectorSettings.from_config()
    finally:
        dask.config.config = original
    assert settings.account == "physics"
    assert settings.flush_interval == pytest.approx(0.75)
    assert settings.database == "sqlite:////tmp/elsewhere.db"


def test_dask_config_set_and_keywords_override() -> None:
    with dask.config.set({"daskscope.user": "ana", "daskscope.profile.enabled": False}):
        settings = CollectorSettings.from_config(cluster_name="nightly", flush_interval="2s")
    assert settings.user == "ana" and settings.profile_enabled is False
    assert settings.cluster_name == "nightly" and settings.flush_interval == 2


def test_bad_settings_say_what_is_wrong() -> None:
    with pytest.raises(TypeError, match=r"unknown daskscope settings.*flush_intervall"):
        CollectorSettings.from_config(flush_intervall="1s")
    with pytest.raises(ValueError, match="flush_interval must be positive"):
        CollectorSettings.from_config(flush_interval=0)


def test_default_database_is_under_the_user_data_directory() -> None:
    import platformdirs

    assert platformdirs.user_data_dir("daskscope") in config.default_database_url()


def test_plugin_pickles_with_its_settings_only() -> None:
    plugin = DaskscopePlugin(CollectorSettings.from_config(account="team"))
    copy = pickle.loads(pickle.dumps(plugin))
    assert copy.settings == plugin.settings and copy.cluster_id == plugin.cluster_id
