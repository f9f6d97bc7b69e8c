"""The public surface of scheduler.config (and of scheduler.queue): exported names exist."""

from __future__ import annotations

import importlib

import pytest


@pytest.mark.parametrize("module", ["scheduler.config", "scheduler.queue"])
def test_every_exported_name_exists(module: str) -> None:
    mod = importlib.import_module(module)
    exported = mod.__all__
    assert sorted(exported) == sorted(set(exported))
    missing = [name for name in exported if not hasattr(mod, name)]
    assert missing == []


def test_config_surface_has_the_entry_points_the_app_uses() -> None:
    import scheduler.catalog as catalog
    import scheduler.config as config

    for name in ("write_config", "dump_config", "ConfigError"):
        assert name in config.__all__
    # loading expands multiPoint with the plugin classes' points: the catalog binds them
    for name in ("load_config", "default_config", "config_from_yaml", "profile_for"):
        assert callable(getattr(catalog, name))
