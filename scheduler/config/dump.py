"""The effective configuration as KubeSchedulerConfiguration YAML (``--write-config-to``).

Like kube-scheduler's dump: every default filled in, each profile's plugins merged with
the default set (the defaults appear under multiPoint), and pluginConfig carrying the args
of every enabled plugin that takes args, defaults included. Loading the dump gives back an
equal configuration.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from typing import Any

import yaml

from scheduler.config.args import default_plugin_args
from scheduler.config.duration import format_duration
from scheduler.config.names import PluginRef
from scheduler.config.types import (
    API_VERSION,
    KIND,
    PLUGIN_SET_FIELDS,
    PluginConfig,
    PluginSet,
    Profile,
    SchedulerConfiguration,
)

_ARGS_KIND_SUFFIX = "Args"


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p.capitalize() for p in rest)


def _plain(value: Any) -> Any:
    """Default args dataclasses as YAML values (empty and None fields left out)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        out: dict[str, Any] = {}
        for f in dataclasses.fields(value):
            v = _plain(getattr(value, f.name))
            if v is None or v == [] or v == {}:
                continue
            out[_camel(f.name)] = v
        return out
    if isinstance(value, frozenset | set):
        return sorted(_plain(v) for v in value)
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    return value


def _args(pc: PluginConfig) -> dict[str, Any]:
    """Defaults overlaid with what the file said (top-level fields)."""
    defaults = _plain(default_plugin_args(pc.name)) or {}
    given = {k: v for k, v in pc.raw.items() if k not in ("apiVersion", "kind")}
    return {
        "apiVersion": API_VERSION,
        "kind": pc.name + _ARGS_KIND_SUFFIX,
        **defaults,
        **given,
    }


def _ref(ref: PluginRef) -> dict[str, Any]:
    return {"name": ref.name, "weight": ref.weight} if ref.weight else {"name": ref.name}


def _plugin_set(ps: PluginSet) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if ps.enabled:
        out["enabled"] = [_ref(r) for r in ps.enabled]
    if ps.disabled:
        out["disabled"] = [{"name": n} for n in ps.disabled]
    return out


def _profile(p: Profile) -> dict[str, Any]:
    plugins: dict[str, Any] = {}
    for key in PLUGIN_SET_FIELDS:
        rendered = _plugin_set(p.plugins.point(key))
        if rendered:
            plugins[key] = rendered
    out: dict[str, Any] = {"schedulerName": p.scheduler_name}
    if p.percentage_of_nodes_to_score is not None:
        out["percentageOfNodesToScore"] = p.percentage_of_nodes_to_score
    out["plugins"] = plugins
    out["pluginConfig"] = [
        {"name": pc.name, "args": _args(pc)} if pc.args is not None or pc.raw else {"name": pc.name}
        for pc in p.plugin_config
    ]
    return out


def config_to_dict(cfg: SchedulerConfiguration) -> dict[str, Any]:
    le, cc = cfg.leader_election, cfg.client_connection
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "parallelism": cfg.parallelism,
        "percentageOfNodesToScore": cfg.percentage_of_nodes_to_score,
        "podInitialBackoffSeconds": cfg.pod_initial_backoff_seconds,
        "podMaxBackoffSeconds": cfg.pod_max_backoff_seconds,
        "enableProfiling": cfg.enable_profiling,
        "enableContentionProfiling": cfg.enable_contention_profiling,
        "delayCacheUntilActive": cfg.delay_cache_until_active,
        "leaderElection": {
            "leaderElect": le.leader_elect,
            "leaseDuration": format_duration(le.lease_duration),
            "renewDeadline": format_duration(le.renew_deadline),
            "retryPeriod": format_duration(le.retry_period),
            "resourceLock": le.resource_lock,
            "resourceName": le.resource_name,
            "resourceNamespace": le.resource_namespace,
        },
        "clientConnection": {
            "kubeconfig": cc.kubeconfig,
            "qps": cc.qps,
            "burst": cc.burst,
            "contentType": cc.content_type,
            "acceptContentTypes": cc.accept_content_types,
        },
        "profiles": [_profile(p) for p in cfg.profiles],
    }


def dump_config(cfg: SchedulerConfiguration) -> str:
    return yaml.safe_dump(config_to_dict(cfg), sort_keys=False, allow_unicode=True)


def write_config(cfg: SchedulerConfiguration, path: str | os.PathLike[str]) -> None:
    """Write the effective configuration (``--write-config-to``)."""
    with open(path, "w", encoding="utf-8") as f:
        f.write(dump_config(cfg))
