"""Building a configuration Profile in code (tests, benchmarks).

The framework takes the configuration's own Profile (scheduler.config.types.Profile);
this builds one without a YAML file, expanding multiPoint through the same
config.plugins.expand_extension_points the loader uses, so there is one Profile model
and one expansion. `implements` says which points a plugin serves: a Registry's
`implements`, or scheduler.catalog's (whose `profile_for` passes it for you).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from scheduler.config import names
from scheduler.config.args import PluginArgs
from scheduler.config.names import PluginRef
from scheduler.config.plugins import ImplementsFn, expand_extension_points
from scheduler.config.types import PLUGIN_SET_FIELDS, PluginConfig, Plugins, PluginSet, Profile


def build_profile(
    multi_point: Sequence[PluginRef] = names.DEFAULT_MULTI_POINT,
    *,
    implements: ImplementsFn,
    points: Mapping[str, Sequence[PluginRef]] | None = None,
    plugin_args: Mapping[str, PluginArgs | None] | None = None,
    scheduler_name: str = "default-scheduler",
    percentage_of_nodes_to_score: int | None = None,
) -> Profile:
    """A Profile with `multi_point` (default: upstream's default plugins) plus the
    plugins enabled at specific points (`points`: YAML key -> refs)."""
    sets = {PLUGIN_SET_FIELDS[names.MULTI_POINT]: PluginSet(tuple(multi_point))}
    for point, refs in (points or {}).items():
        sets[PLUGIN_SET_FIELDS[point]] = PluginSet(tuple(refs))
    plugins = Plugins(**sets)
    return Profile(
        scheduler_name=scheduler_name,
        percentage_of_nodes_to_score=percentage_of_nodes_to_score,
        plugins=plugins,
        plugin_config=tuple(
            PluginConfig(name, args) for name, args in (plugin_args or {}).items()
        ),
        extension_points=expand_extension_points(plugins, "profile", implements),
    )
