"""Loading a KubeSchedulerConfiguration file into the typed configuration.

Order, as kube-scheduler: strict decode (unknown/duplicate fields, types), defaulting
(including the default plugin set merged into each profile and the default args of every
enabled plugin that takes args), then validation (``validation.validate``). Every failure
is a ConfigError naming the field; nothing here touches the cluster.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from scheduler.config import names
from scheduler.config.args import default_plugin_args, parse_plugin_args, plugin_takes_args
from scheduler.config.errors import ConfigError, brief, type_name
from scheduler.config.names import PluginRef
from scheduler.config.plugins import ImplementsFn, expand_extension_points, merge_with_defaults
from scheduler.config.reader import INT64, Fields
from scheduler.config.safe_yaml import (
    MAX_FILE_BYTES,
    decode_text,
    parse_document,
    read_config_bytes,
)
from scheduler.config.types import (
    API_VERSION,
    DEFAULT_SCHEDULER_NAME,
    KIND,
    PLUGIN_SET_FIELDS,
    ClientConnectionConfig,
    LeaderElectionConfig,
    PluginConfig,
    Plugins,
    PluginSet,
    Profile,
    SchedulerConfiguration,
)
from scheduler.config.validation import validate


def load_config(
    path: str | os.PathLike[str],
    *,
    implements: ImplementsFn,
    default_multi_point: Sequence[PluginRef] = names.DEFAULT_MULTI_POINT,
) -> SchedulerConfiguration:
    """Read, default and validate the file. Raises ConfigError."""
    return config_from_bytes(
        read_config_bytes(path), implements=implements, default_multi_point=default_multi_point
    )


def config_from_bytes(
    data: bytes,
    *,
    implements: ImplementsFn,
    default_multi_point: Sequence[PluginRef] = names.DEFAULT_MULTI_POINT,
) -> SchedulerConfiguration:
    """A file's contents (at most 1 MiB, UTF-8) to the configuration. Raises ConfigError."""
    if len(data) > MAX_FILE_BYTES:
        raise ConfigError("", f"config file is larger than {MAX_FILE_BYTES} bytes")
    return config_from_yaml(
        decode_text(data), implements=implements, default_multi_point=default_multi_point
    )


def config_from_yaml(
    text: str,
    *,
    source: str = "",
    implements: ImplementsFn,
    default_multi_point: Sequence[PluginRef] = names.DEFAULT_MULTI_POINT,
) -> SchedulerConfiguration:
    """`source` is accepted for compatibility; errors name fields and lines instead."""
    raw = parse_document(text)
    if raw is None:
        raise ConfigError("", "empty configuration (apiVersion and kind are required)")
    if not isinstance(raw, Mapping):
        raise ConfigError(
            "", f"the document must be a {KIND} object, got {type_name(raw)} {brief(raw)}"
        )
    return config_from_dict(raw, implements=implements, default_multi_point=default_multi_point)


def default_config(
    *,
    implements: ImplementsFn,
    default_multi_point: Sequence[PluginRef] = names.DEFAULT_MULTI_POINT,
) -> SchedulerConfiguration:
    """The configuration used without --config: every default, one profile."""
    return config_from_dict(
        {"apiVersion": API_VERSION, "kind": KIND},
        implements=implements,
        default_multi_point=default_multi_point,
    )


def config_from_dict(
    raw: Mapping[str, Any],
    *,
    implements: ImplementsFn,
    default_multi_point: Sequence[PluginRef] = names.DEFAULT_MULTI_POINT,
) -> SchedulerConfiguration:
    """`default_multi_point` is the default profile's multiPoint list, which feature gates
    change (upstream's default_plugins.go appends GangScheduling with GenericWorkload)."""
    top = Fields(raw, "")
    api_version = top.str_("apiVersion", "")
    if api_version != API_VERSION:
        raise ConfigError(
            "apiVersion", f"must be {API_VERSION}, got {brief(api_version or 'nothing')}"
        )
    kind = top.str_("kind", "")
    if kind != KIND:
        raise ConfigError("kind", f"must be {KIND}, got {brief(kind or 'nothing')}")

    d = SchedulerConfiguration()
    parallelism = top.int_("parallelism", d.parallelism)
    percentage = top.int_("percentageOfNodesToScore", d.percentage_of_nodes_to_score)
    initial = top.int_("podInitialBackoffSeconds", d.pod_initial_backoff_seconds, INT64)
    maximum = top.int_("podMaxBackoffSeconds", d.pod_max_backoff_seconds, INT64)
    profiling = top.bool_("enableProfiling", d.enable_profiling)
    contention = top.bool_("enableContentionProfiling", d.enable_contention_profiling)
    delay = top.bool_("delayCacheUntilActive", d.delay_cache_until_active)
    leader = _leader_election(top.obj("leaderElection"))
    client = _client_connection(top.obj("clientConnection"))
    if top.list_("extenders"):
        raise ConfigError("extenders", "scheduler extenders are not supported")

    raw_profiles = top.list_("profiles") or [{}]
    profiles = tuple(
        _profile(
            Fields(p, f"profiles[{i}]"),
            single=len(raw_profiles) == 1,
            implements=implements,
            default_multi_point=default_multi_point,
        )
        for i, p in enumerate(raw_profiles)
    )
    top.done()

    cfg = SchedulerConfiguration(
        parallelism=parallelism,
        percentage_of_nodes_to_score=percentage,
        pod_initial_backoff_seconds=initial,
        pod_max_backoff_seconds=maximum,
        enable_profiling=profiling,
        enable_contention_profiling=contention,
        delay_cache_until_active=delay,
        leader_election=leader,
        client_connection=client,
        profiles=profiles,
    )
    validate(cfg)
    return cfg


def _leader_election(f: Fields) -> LeaderElectionConfig:
    d = LeaderElectionConfig()
    # Upstream (component-base RecommendedDefaultLeaderElectionConfiguration) turns a
    # written "0s" into the default silently, since Go cannot tell it from "not set". We
    # can, and refuse it in validation ("must be greater than zero"), as the Helm chart
    # does: a zero lease is a mistake, not a request for 15s.
    out = LeaderElectionConfig(
        leader_elect=f.bool_("leaderElect", d.leader_elect),
        lease_duration=f.duration("leaseDuration", d.lease_duration),
        renew_deadline=f.duration("renewDeadline", d.renew_deadline),
        retry_period=f.duration("retryPeriod", d.retry_period),
        # an empty string is "not set" upstream too (SetDefaults_KubeSchedulerConfiguration)
        resource_lock=f.str_("resourceLock", d.resource_lock) or d.resource_lock,
        resource_name=f.str_("resourceName", d.resource_name) or d.resource_name,
        resource_namespace=f.str_("resourceNamespace", d.resource_namespace)
        or d.resource_namespace,
    )
    f.done()
    return out


def _client_connection(f: Fields) -> ClientConnectionConfig:
    d = ClientConnectionConfig()
    # kube-scheduler's own defaults: qps 0 means 50 and burst 0 means 100
    # (pkg/scheduler/apis/config/v1/defaults.go, SetDefaults_KubeSchedulerConfiguration)
    out = ClientConnectionConfig(
        kubeconfig=f.str_("kubeconfig", d.kubeconfig),
        qps=f.float32("qps", d.qps) or d.qps,
        burst=f.int_("burst", d.burst) or d.burst,
        content_type=f.str_("contentType", d.content_type),
        accept_content_types=f.str_("acceptContentTypes", d.accept_content_types),
    )
    f.done()
    return out


def _profile(
    f: Fields,
    *,
    single: bool,
    implements: ImplementsFn,
    default_multi_point: Sequence[PluginRef],
) -> Profile:
    # as upstream: only a lone profile gets the default name; with several, each must
    # name itself (validation reports the empty one)
    name = f.str_("schedulerName", DEFAULT_SCHEDULER_NAME if single else "")
    percentage = f.optional_int("percentageOfNodesToScore")
    custom = _plugins(f.obj("plugins"), implements)
    configs = _plugin_configs(f, "pluginConfig", implements)
    f.done()

    merged = merge_with_defaults(custom, tuple(default_multi_point))
    points = expand_extension_points(merged, f.sub("plugins"), implements)

    # upstream defaulting: every enabled plugin that takes args gets its default args
    configured = {pc.name for pc in configs}
    enabled = [r.name for refs in points.values() for r in refs]
    for plugin in dict.fromkeys(enabled):
        if plugin not in configured and plugin_takes_args(plugin):
            configs.append(PluginConfig(plugin, default_plugin_args(plugin), {}))
    return Profile(
        scheduler_name=name,
        percentage_of_nodes_to_score=percentage,
        plugins=merged,
        plugin_config=tuple(configs),
        extension_points=points,
    )


def _plugins(f: Fields, implements: ImplementsFn) -> Plugins:
    sets = {attr: _plugin_set(f.obj(key), implements) for key, attr in PLUGIN_SET_FIELDS.items()}
    f.done()
    return Plugins(**sets)


def _plugin_name(
    f: Fields, implements: ImplementsFn, *, allow_star: bool, enabling: bool
) -> str:
    name = f.str_("name", "")
    if not name:
        raise ConfigError(f.sub("name"), "required")
    if name == "*":
        if not allow_star:
            raise ConfigError(f.sub("name"), '"*" is only allowed in disabled lists')
        return name
    if not _known(name, implements) and name not in names.NOT_IMPLEMENTED:
        raise ConfigError(f.sub("name"), f"unknown plugin {brief(name)}")
    if enabling and name in names.NOT_IMPLEMENTED:
        raise ConfigError(f.sub("name"), f"plugin {name} is not implemented by this scheduler")
    return name


def _known(name: str, implements: ImplementsFn) -> bool:
    # a registered plugin serves at least one extension point: the plugin classes (through
    # `implements`) are the one list of what this scheduler can run
    return bool(implements(name))


def _plugin_set(f: Fields, implements: ImplementsFn) -> PluginSet:
    enabled: list[PluginRef] = []
    for i, item in enumerate(f.list_("enabled")):
        pf = Fields(item, f"{f.sub('enabled')}[{i}]")
        name = _plugin_name(pf, implements, allow_star=False, enabling=True)
        # *int32 upstream, so at most 2^31-1: with our 7 score plugins the weighted total
        # stays below 7 * 100 * 2^31 (about 1.5e12), far inside the int64 the cycle sums
        # in (upstream's MaxTotalScore check, framework/runtime/framework.go
        # getValidScoreWeights, can never fire for int32 weights this few).
        weight = pf.int_("weight", 0)
        if weight < 0:
            # Upstream decodes a negative weight, but its overflow check then wraps
            # (MaxTotalScore minus a negative total overflows int64) and refuses the
            # profile at start-up ("total score of Score plugins could overflow") whenever
            # a positive weight follows it, i.e. nearly always; and a negative score runs
            # against "a higher score is better" everywhere else. Refused here, plainly.
            raise ConfigError(pf.sub("weight"), f"must not be negative, got {brief(weight)}")
        pf.done()
        if any(r.name == name for r in enabled):
            raise ConfigError(pf.sub("name"), f"{name} is enabled twice")
        enabled.append(PluginRef(name, weight))
    disabled: list[str] = []
    for i, item in enumerate(f.list_("disabled")):
        pf = Fields(item, f"{f.sub('disabled')}[{i}]")
        disabled.append(_plugin_name(pf, implements, allow_star=True, enabling=False))
        pf.int_("weight", 0)  # allowed (ignored) in disabled lists, but still an int32
        pf.done()
    f.done()
    return PluginSet(tuple(enabled), tuple(disabled))


def _plugin_configs(f: Fields, key: str, implements: ImplementsFn) -> list[PluginConfig]:
    out: list[PluginConfig] = []
    seen: dict[str, int] = {}
    for i, item in enumerate(f.list_(key)):
        pf = Fields(item, f"{f.sub(key)}[{i}]")
        name = pf.str_("name", "")
        if not name:
            raise ConfigError(pf.sub("name"), "required")
        if not _known(name, implements):
            raise ConfigError(pf.sub("name"), f"unknown plugin {brief(name)}")
        if name in seen:
            raise ConfigError(
                pf.sub("name"), f"duplicate pluginConfig for {name} (also at index {seen[name]})"
            )
        seen[name] = i
        raw_args = pf.get("args")
        if raw_args is not None and not isinstance(raw_args, Mapping):
            raise ConfigError(pf.sub("args"), "must be an object")
        args = parse_plugin_args(name, raw_args, pf.sub("args"))
        pf.done()
        out.append(PluginConfig(name, args, dict(raw_args or {})))
    return out
