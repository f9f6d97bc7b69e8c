"""scheduler.catalog: the plugin classes are the one answer to "which plugin serves which
extension point", and the configuration loader expands multiPoint with it."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest

from scheduler import catalog
from scheduler.cache.node_view import NodeView
from scheduler.config import API_VERSION, KIND, ConfigError, names
from scheduler.config import load as config_load
from scheduler.framework import CycleState, Framework, Handle, Status
from scheduler.framework.interfaces import FilterPlugin, PreFilterPlugin, ScorePlugin
from scheduler.framework.registry import Registration, Registry
from scheduler.model.pod import PodInfo
from scheduler.plugins.registry import in_tree_registry


class _NewFilterScore(FilterPlugin, ScorePlugin):
    """A plugin added the way an in-tree one is: a class naming its Protocols, a factory."""

    name = "NewFilterScore"

    def filter(self, state: CycleState, pod: PodInfo, view: NodeView) -> Status:
        return Status.success()

    def score(self, state: CycleState, pod: PodInfo, view: NodeView) -> tuple[int, Status]:
        return 0, Status.success()


def _new(args: object, handle: Handle) -> _NewFilterScore:
    return _NewFilterScore()


def _config(**profile: Any) -> dict[str, Any]:
    return {"apiVersion": API_VERSION, "kind": KIND, "profiles": [profile]}


def test_every_catalog_plugin_is_placed_where_its_class_says() -> None:
    profile = catalog.default_config().profiles[0]
    for point in names.EXTENSION_POINTS:
        for ref in profile.enabled(point):
            assert point in catalog.implements(ref.name), (ref.name, point)
    # and nowhere else: a multiPoint plugin lands at every point its class serves
    for ref in names.DEFAULT_MULTI_POINT:
        placed = {p for p in names.EXTENSION_POINTS if ref.name in _plain(profile.enabled(p))}
        assert placed == set(catalog.implements(ref.name)), ref.name


def test_a_plugin_added_to_the_registry_is_expanded_from_its_class() -> None:
    # the module (the class) and its registry line are all it takes: no table in config
    registry = in_tree_registry().merge(
        Registry({"NewFilterScore": Registration(_NewFilterScore, _new)})
    )
    raw = _config(plugins={"multiPoint": {"enabled": [{"name": "NewFilterScore", "weight": 4}]}})
    cfg = config_load.config_from_dict(raw, implements=registry.implements)
    profile = cfg.profiles[0]
    assert "NewFilterScore" in _plain(profile.enabled(names.FILTER))
    assert names.PluginRef("NewFilterScore", 4) in profile.enabled(names.SCORE)
    placed = {p for p in names.EXTENSION_POINTS if "NewFilterScore" in _plain(profile.enabled(p))}
    assert placed == {names.FILTER, names.SCORE}
    fw = Framework(profile, registry)
    assert isinstance(fw.plugin("NewFilterScore"), _NewFilterScore)


def _plain(refs: tuple[names.PluginRef, ...]) -> list[str]:
    return [r.name for r in refs]


def test_a_plugin_at_a_point_its_class_does_not_serve_names_the_field() -> None:
    registry = in_tree_registry().merge(
        Registry({"NewFilterScore": Registration(_NewFilterScore, _new)})
    )
    raw = _config(plugins={"preFilter": {"enabled": [{"name": "NewFilterScore"}]}})
    with pytest.raises(ConfigError) as info:
        config_load.config_from_dict(raw, implements=registry.implements)
    assert info.value.field == "profiles[0].plugins.preFilter.enabled[0].name"
    assert "does not implement the preFilter extension point" in info.value.detail


def test_an_unregistered_plugin_is_unknown() -> None:
    raw = _config(plugins={"filter": {"enabled": [{"name": "NewFilterScore"}]}})
    with pytest.raises(ConfigError) as info:
        catalog.config_from_dict(raw)
    assert info.value.field == "profiles[0].plugins.filter.enabled[0].name"
    assert info.value.detail == "unknown plugin 'NewFilterScore'"
    # the registry that knows it accepts it
    registry = in_tree_registry().merge(
        Registry({"NewFilterScore": Registration(_NewFilterScore, _new)})
    )
    config_load.config_from_dict(raw, implements=registry.implements)


def test_declaring_a_protocol_is_what_places_a_plugin() -> None:
    # the same plugin with PreFilter among its bases now also lands at preFilter
    class _WithPreFilter(_NewFilterScore, PreFilterPlugin):
        def pre_filter(self, state: CycleState, pod: PodInfo, snapshot: Any) -> Any:
            return None, Status.success()

    registry = in_tree_registry().merge(
        Registry({"NewFilterScore": Registration(_WithPreFilter, lambda a, h: _WithPreFilter())})
    )
    raw = _config(plugins={"multiPoint": {"enabled": [{"name": "NewFilterScore"}]}})
    profile = config_load.config_from_dict(raw, implements=registry.implements).profiles[0]
    assert "NewFilterScore" in _plain(profile.enabled(names.PRE_FILTER))


def test_the_catalog_knows_every_in_tree_plugin_and_default_preemption() -> None:
    known = {n for n in in_tree_registry()} | {names.DEFAULT_PREEMPTION}
    # every plugin is a default one, GangScheduling only under GenericWorkload,
    # DynamicResources only under DynamicResourceAllocation
    gated = {names.GANG_SCHEDULING, names.DYNAMIC_RESOURCES}
    assert {r.name for r in names.DEFAULT_MULTI_POINT} == known - gated
    assert {r.name for r in names.DEFAULT_MULTI_POINT_GENERIC_WORKLOAD} == known - {
        names.DYNAMIC_RESOURCES
    }
    assert all(catalog.implements(n) for n in known)
    assert catalog.implements("NoSuchPlugin") == frozenset()


def test_generic_workload_appends_gang_scheduling_to_the_default_profile() -> None:
    # upstream default_plugins.go: GangScheduling last, at PreEnqueue and Permit
    from scheduler.features import FeatureGates

    plain = catalog.default_config().profiles[0]
    gated = catalog.default_config(FeatureGates(generic_workload=True)).profiles[0]
    assert names.GANG_SCHEDULING not in _plain(plain.enabled(names.PRE_ENQUEUE))
    assert _plain(gated.enabled(names.PRE_ENQUEUE))[-1] == names.GANG_SCHEDULING
    assert _plain(gated.enabled(names.PERMIT)) == [names.GANG_SCHEDULING]
    assert _plain(gated.enabled(names.FILTER)) == _plain(plain.enabled(names.FILTER))


def test_dynamic_resource_allocation_puts_dynamic_resources_before_default_preemption() -> None:
    # upstream default_plugins.go applyDynamicResources: weight 2, before DefaultPreemption
    from scheduler.features import FeatureGates

    both = catalog.default_multi_point(
        FeatureGates(generic_workload=True, dynamic_resource_allocation=True)
    )
    order = [r.name for r in both]
    at = order.index(names.DYNAMIC_RESOURCES)
    assert order[at + 1] == names.DEFAULT_PREEMPTION
    assert both[at].weight == 2
    assert order[-1] == names.GANG_SCHEDULING
    profile = catalog.default_config(FeatureGates(dynamic_resource_allocation=True)).profiles[0]
    for point in (names.PRE_ENQUEUE, names.PRE_FILTER, names.FILTER, names.POST_FILTER,
                  names.SCORE, names.RESERVE, names.PRE_BIND):  # fmt: skip
        assert names.DYNAMIC_RESOURCES in _plain(profile.enabled(point)), point
    assert _plain(profile.enabled(names.POST_FILTER)) == [
        names.DYNAMIC_RESOURCES,
        names.DEFAULT_PREEMPTION,
    ]


def test_loading_a_configuration_does_not_load_the_transport() -> None:
    # `run --config` checks the file before anything else and must stay quick (the corpus
    # holds it to a CPU budget): the plugin classes it imports catch the client's errors,
    # which must not pull in aiohttp and kubernetes_asyncio
    code = (
        "import sys; from scheduler import catalog; catalog.default_config(); "
        "print(sorted(m for m in ('aiohttp', 'kubernetes_asyncio', 'scheduler.app') "
        "if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.strip() == "[]"
