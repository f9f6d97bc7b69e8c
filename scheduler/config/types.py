"""The typed KubeSchedulerConfiguration (kubescheduler.config.k8s.io/v1), after defaulting.

Field names are the YAML names in snake_case; each states its unit and default. Defaults
are upstream's, except where this project is a *secondary* scheduler:

- the default profile's schedulerName is ``kube-async-scheduler`` (upstream:
  ``default-scheduler``), so pods opt in and the default scheduler is left alone;
- the default Lease is ``kube-system/kube-async-scheduler`` (upstream: ``kube-scheduler``):
  two schedulers sharing a lease would block each other's election.

The objects are frozen; ``load_config``/``default_config`` build them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from scheduler.config.names import PluginRef
from scheduler.config.plugin_args import PluginArgs

API_VERSION = "kubescheduler.config.k8s.io/v1"
KIND = "KubeSchedulerConfiguration"

DEFAULT_SCHEDULER_NAME = "kube-async-scheduler"
DEFAULT_LEASE_NAME = "kube-async-scheduler"
DEFAULT_LEASE_NAMESPACE = "kube-system"
RESOURCE_LOCK_LEASES = "leases"

DEFAULT_PARALLELISM = 16
DEFAULT_PERCENTAGE_OF_NODES_TO_SCORE = 0  # 0 = adaptive
DEFAULT_POD_INITIAL_BACKOFF_SECONDS = 1
DEFAULT_POD_MAX_BACKOFF_SECONDS = 10


@dataclass(frozen=True, slots=True)
class LeaderElectionConfig:
    leader_elect: bool = True
    lease_duration: float = 15.0  # seconds ("15s")
    renew_deadline: float = 10.0  # seconds ("10s"); must be < lease_duration
    retry_period: float = 2.0  # seconds ("2s")
    resource_lock: str = RESOURCE_LOCK_LEASES  # only "leases" is supported
    resource_name: str = DEFAULT_LEASE_NAME
    resource_namespace: str = DEFAULT_LEASE_NAMESPACE


@dataclass(frozen=True, slots=True)
class ClientConnectionConfig:
    kubeconfig: str = ""  # path; "" = in-cluster, or the --kubeconfig flag
    qps: float = 50.0  # client-side requests per second
    burst: int = 100  # client-side burst above qps
    content_type: str = ""  # accepted, ignored: we always speak JSON
    accept_content_types: str = ""  # accepted, ignored


@dataclass(frozen=True, slots=True)
class PluginSet:
    """One extension point's enabled and disabled lists (disabled "*" = all defaults)."""

    enabled: tuple[PluginRef, ...] = ()
    disabled: tuple[str, ...] = ()


# YAML key -> Plugins attribute, in the order upstream lists them
PLUGIN_SET_FIELDS: Mapping[str, str] = MappingProxyType(
    {
        "preEnqueue": "pre_enqueue",
        "queueSort": "queue_sort",
        "preFilter": "pre_filter",
        "filter": "filter",
        "postFilter": "post_filter",
        "preScore": "pre_score",
        "score": "score",
        "reserve": "reserve",
        "permit": "permit",
        "preBind": "pre_bind",
        "bind": "bind",
        "postBind": "post_bind",
        "multiPoint": "multi_point",
    }
)


@dataclass(frozen=True, slots=True)
class Plugins:
    """A profile's plugins as configured, merged with the defaults as upstream's
    defaulting does (the defaults live in multiPoint)."""

    pre_enqueue: PluginSet = PluginSet()
    queue_sort: PluginSet = PluginSet()
    pre_filter: PluginSet = PluginSet()
    filter: PluginSet = PluginSet()
    post_filter: PluginSet = PluginSet()
    pre_score: PluginSet = PluginSet()
    score: PluginSet = PluginSet()
    reserve: PluginSet = PluginSet()
    permit: PluginSet = PluginSet()
    pre_bind: PluginSet = PluginSet()
    bind: PluginSet = PluginSet()
    post_bind: PluginSet = PluginSet()
    multi_point: PluginSet = PluginSet()

    def point(self, key: str) -> PluginSet:
        """The set for a YAML key such as "score" or "multiPoint"."""
        result: PluginSet = getattr(self, PLUGIN_SET_FIELDS[key])
        return result


@dataclass(frozen=True, slots=True)
class PluginConfig:
    name: str
    args: PluginArgs | None  # typed, defaulted (scheduler.config.plugin_args)
    # as written (for the dump); not part of equality: the typed args are what counts
    raw: Mapping[str, object] = field(default_factory=dict, compare=False)


@dataclass(frozen=True, slots=True)
class Profile:
    scheduler_name: str = DEFAULT_SCHEDULER_NAME
    percentage_of_nodes_to_score: int | None = None  # None: the global value
    plugins: Plugins = Plugins()
    plugin_config: tuple[PluginConfig, ...] = ()
    # the effective plugins per extension point (YAML key -> ordered refs) after multiPoint
    # expansion; score weights resolved (unset -> 1). What the framework instantiates.
    extension_points: Mapping[str, tuple[PluginRef, ...]] = field(
        default_factory=lambda: MappingProxyType({})
    )

    def args_for(self, plugin: str) -> PluginArgs | None:
        """The plugin's args: from pluginConfig, else its defaults (None: takes none)."""
        for pc in self.plugin_config:
            if pc.name == plugin:
                return pc.args
        return None

    def enabled(self, point: str) -> tuple[PluginRef, ...]:
        return self.extension_points.get(point, ())


@dataclass(frozen=True, slots=True)
class SchedulerConfiguration:
    parallelism: int = DEFAULT_PARALLELISM
    percentage_of_nodes_to_score: int = DEFAULT_PERCENTAGE_OF_NODES_TO_SCORE  # 0 = adaptive
    pod_initial_backoff_seconds: int = DEFAULT_POD_INITIAL_BACKOFF_SECONDS
    pod_max_backoff_seconds: int = DEFAULT_POD_MAX_BACKOFF_SECONDS
    enable_profiling: bool = True  # accepted; this project serves no pprof
    enable_contention_profiling: bool = True  # accepted; ignored
    delay_cache_until_active: bool = False  # accepted; caches are always warmed
    leader_election: LeaderElectionConfig = LeaderElectionConfig()
    client_connection: ClientConnectionConfig = ClientConnectionConfig()
    profiles: tuple[Profile, ...] = ()

    def profile(self, scheduler_name: str) -> Profile | None:
        for p in self.profiles:
            if p.scheduler_name == scheduler_name:
                return p
        return None

    @property
    def scheduler_names(self) -> frozenset[str]:
        return frozenset(p.scheduler_name for p in self.profiles)
