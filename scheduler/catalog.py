"""The plugins this scheduler ships: the in-tree registry with DefaultPreemption on top.

The configuration layer sits below the plugins, so it cannot know which extension points a
plugin serves; it takes an ImplementsFn. This module is where the answer comes from the
plugin classes themselves (their Protocol bases, `framework.interfaces.extension_points_of`)
and where the configuration is loaded with it. Adding an in-tree plugin touches its module,
its line in the registry and, if it takes any, its args; a default-enabled plugin also gets
its line in `config.names.DEFAULT_MULTI_POINT`, as upstream's default_plugins.go.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any

from scheduler.config import load
from scheduler.config.args import PluginArgs
from scheduler.config.names import (
    DEFAULT_MULTI_POINT,
    DEFAULT_MULTI_POINT_GENERIC_WORKLOAD,
    DEFAULT_PREEMPTION,
    DYNAMIC_RESOURCES,
    PluginRef,
)
from scheduler.config.types import Profile as ConfigProfile
from scheduler.config.types import SchedulerConfiguration
from scheduler.features import FeatureGates
from scheduler.framework.interfaces import extension_points_of
from scheduler.framework.profile import build_profile
from scheduler.framework.registry import Registration, Registry
from scheduler.plugins.registry import in_tree_registry
from scheduler.preemption.default_preemption import DefaultPreemption, PreemptionServices, factory

_IN_TREE = in_tree_registry()
# the class of every plugin, DefaultPreemption's too (its factory needs the app's services)
_PLUGIN_TYPES: Mapping[str, type] = MappingProxyType(
    {
        **{name: _IN_TREE.plugin_type(name) for name in _IN_TREE},
        DEFAULT_PREEMPTION: DefaultPreemption,
    }
)


def implements(plugin: str) -> frozenset[str]:
    """The extension points (YAML keys) the named plugin's class serves; none if unknown."""
    plugin_type = _PLUGIN_TYPES.get(plugin)
    return extension_points_of(plugin_type) if plugin_type is not None else frozenset()


def registry(services: PreemptionServices) -> Registry:
    """Every plugin of this scheduler, DefaultPreemption sharing `services`."""
    return in_tree_registry().merge(
        Registry({DEFAULT_PREEMPTION: Registration(DefaultPreemption, factory(services))})
    )


def default_multi_point(features: FeatureGates) -> tuple[PluginRef, ...]:
    """The default profile's multiPoint plugins under these feature gates, in the order
    upstream's applyFeatureGates builds them (apis/config/v1/default_plugins.go):
    DynamicResources right before DefaultPreemption, then GangScheduling at the end."""
    plugins = (
        DEFAULT_MULTI_POINT_GENERIC_WORKLOAD if features.generic_workload else DEFAULT_MULTI_POINT
    )
    if features.dynamic_resource_allocation:
        at = next(i for i, p in enumerate(plugins) if p.name == DEFAULT_PREEMPTION)
        plugins = (*plugins[:at], PluginRef(DYNAMIC_RESOURCES, 2), *plugins[at:])
    return plugins


_NO_GATES = FeatureGates()


def load_config(
    path: str | os.PathLike[str], features: FeatureGates = _NO_GATES
) -> SchedulerConfiguration:
    """Read, default and validate a KubeSchedulerConfiguration file. Raises ConfigError."""
    return load.load_config(
        path, implements=implements, default_multi_point=default_multi_point(features)
    )


def config_from_bytes(data: bytes, features: FeatureGates = _NO_GATES) -> SchedulerConfiguration:
    return load.config_from_bytes(
        data, implements=implements, default_multi_point=default_multi_point(features)
    )


def config_from_yaml(
    text: str, *, source: str = "", features: FeatureGates = _NO_GATES
) -> SchedulerConfiguration:
    return load.config_from_yaml(
        text,
        source=source,
        implements=implements,
        default_multi_point=default_multi_point(features),
    )


def config_from_dict(
    raw: Mapping[str, Any], features: FeatureGates = _NO_GATES
) -> SchedulerConfiguration:
    return load.config_from_dict(
        raw, implements=implements, default_multi_point=default_multi_point(features)
    )


def default_config(features: FeatureGates = _NO_GATES) -> SchedulerConfiguration:
    """The configuration used without --config: every default, one profile."""
    return load.default_config(
        implements=implements, default_multi_point=default_multi_point(features)
    )


def profile_for(
    multi_point: Sequence[PluginRef] = DEFAULT_MULTI_POINT,
    *,
    points: Mapping[str, Sequence[PluginRef]] | None = None,
    plugin_args: Mapping[str, PluginArgs | None] | None = None,
    scheduler_name: str = "default-scheduler",
    percentage_of_nodes_to_score: int | None = None,
) -> ConfigProfile:
    """A configuration Profile built in code (tests, benchmarks) from this scheduler's
    plugins: `multi_point` (default: upstream's default plugins) plus the plugins enabled at
    specific points (`points`: YAML key -> refs)."""
    return build_profile(
        multi_point,
        implements=implements,
        points=points,
        plugin_args=plugin_args,
        scheduler_name=scheduler_name,
        percentage_of_nodes_to_score=percentage_of_nodes_to_score,
    )
