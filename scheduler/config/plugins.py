"""Merging a profile's plugins with the defaults, and multiPoint expansion, as upstream.

Two steps, mirroring where upstream does them:

1. ``merge_plugin_set`` (upstream v1 defaulting, mergePluginSet): per extension point,
   start from the defaults (only multiPoint has any), drop what is disabled (``*`` drops all),
   replace a default re-enabled by the user *in place* (its weight overrides), and append
   the user's other enabled plugins in their order.
2. ``expand_extension_points`` (upstream framework, expandMultiPointPlugins): every
   multiPoint plugin is registered at each extension point it implements, unless disabled
   there; a plugin also enabled at that specific point is an explicit override (the
   specific entry wins, e.g. its weight). Order at each point: overridden multiPoint
   plugins, then the other multiPoint plugins, then the point's own enabled plugins.
   ``*`` disabled at a point skips multiPoint for that point entirely.

Which extension points a plugin implements is the caller's ``implements``: the plugin
classes answer it (their Protocol bases), and this layer sits below them, so
``scheduler.catalog`` passes this scheduler's (a test may pass its own).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from types import MappingProxyType

from scheduler.config import names
from scheduler.config.errors import ConfigError
from scheduler.config.names import PluginRef
from scheduler.config.types import PLUGIN_SET_FIELDS, Plugins, PluginSet

ImplementsFn = Callable[[str], Collection[str]]

def merge_plugin_set(default: PluginSet, custom: PluginSet) -> PluginSet:
    disabled = tuple(dict.fromkeys((*custom.disabled, *default.disabled)))
    custom_index = {ref.name: i for i, ref in enumerate(custom.enabled)}
    replaced: set[int] = set()
    enabled: list[PluginRef] = []
    if "*" not in disabled:
        for ref in default.enabled:
            if ref.name in disabled:
                continue
            i = custom_index.get(ref.name)
            if i is not None:
                ref = custom.enabled[i]
                replaced.add(i)
            enabled.append(ref)
    enabled += [ref for i, ref in enumerate(custom.enabled) if i not in replaced]
    return PluginSet(tuple(enabled), disabled)


def merge_with_defaults(custom: Plugins, default_multi_point: tuple[PluginRef, ...]) -> Plugins:
    merged: dict[str, PluginSet] = {}
    for key, attr in PLUGIN_SET_FIELDS.items():
        default = PluginSet(default_multi_point) if key == names.MULTI_POINT else PluginSet()
        merged[attr] = merge_plugin_set(default, custom.point(key))
    return Plugins(**merged)


def expand_extension_points(
    plugins: Plugins,
    path: str,
    implements: ImplementsFn,
) -> Mapping[str, tuple[PluginRef, ...]]:
    """The effective plugins per extension point. ``path`` is the profile's plugins field
    (for errors, e.g. "profiles[0].plugins"). Score weights: unset (0) becomes 1; at other
    points weights are dropped."""
    multi = plugins.multi_point.enabled
    seen_multi: set[str] = set()
    for i, ref in enumerate(multi):
        if ref.name in seen_multi:
            raise ConfigError(
                f"{path}.multiPoint.enabled[{i}].name", f"{ref.name} is enabled twice"
            )
        seen_multi.add(ref.name)

    out: dict[str, tuple[PluginRef, ...]] = {}
    for point in names.EXTENSION_POINTS:
        specific = plugins.point(point)
        for i, ref in enumerate(specific.enabled):
            if point not in implements(ref.name):
                raise ConfigError(
                    f"{path}.{point}.enabled[{i}].name",
                    f"plugin {ref.name} does not implement the {point} extension point",
                )
        specific_by_name: dict[str, PluginRef] = {}
        for i, ref in enumerate(specific.enabled):
            if ref.name in specific_by_name:
                raise ConfigError(
                    f"{path}.{point}.enabled[{i}].name", f"{ref.name} is enabled twice"
                )
            specific_by_name[ref.name] = ref
        disabled = set(specific.disabled)
        overrides: list[PluginRef] = []
        from_multi: list[PluginRef] = []
        if "*" not in disabled:
            for ref in multi:
                if point not in implements(ref.name) or ref.name in disabled:
                    continue
                if ref.name in specific_by_name:
                    overrides.append(specific_by_name[ref.name])
                else:
                    from_multi.append(ref)
        taken = {r.name for r in overrides} | {r.name for r in from_multi}
        rest = [r for r in specific.enabled if r.name not in taken]
        refs = [*overrides, *from_multi, *rest]
        if point == names.SCORE:
            refs = [r if r.weight else PluginRef(r.name, 1) for r in refs]
        else:  # weights mean something only at score
            refs = [PluginRef(r.name) for r in refs]
        out[point] = tuple(refs)
    return MappingProxyType(out)
