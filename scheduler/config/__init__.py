"""KubeSchedulerConfiguration (kubescheduler.config.k8s.io/v1): types, defaults, validation,
loading and dumping.

    cfg = catalog.load_config("/etc/kube-async-scheduler/config.yaml")  # raises ConfigError
    cfg = catalog.default_config()                                      # no --config
    write_config(cfg, path)                                             # --write-config-to

Loading expands multiPoint, which needs to know the extension points each plugin serves:
the plugin classes answer that, above this layer, so the loaders (config.load) take an
``implements``; scheduler.catalog binds this scheduler's plugins.

Defaults are upstream's except the secondary-scheduler names: profile
``kube-async-scheduler`` and Lease ``kube-system/kube-async-scheduler``.
"""

from scheduler.config.dump import config_to_dict, dump_config, write_config
from scheduler.config.duration import format_duration, parse_duration
from scheduler.config.errors import ConfigError
from scheduler.config.names import PluginRef
from scheduler.config.plugins import (
    expand_extension_points,
    merge_plugin_set,
    merge_with_defaults,
)
from scheduler.config.types import (
    API_VERSION,
    DEFAULT_LEASE_NAME,
    DEFAULT_LEASE_NAMESPACE,
    DEFAULT_SCHEDULER_NAME,
    KIND,
    ClientConnectionConfig,
    LeaderElectionConfig,
    PluginConfig,
    Plugins,
    PluginSet,
    Profile,
    SchedulerConfiguration,
)

__all__ = [
    "API_VERSION",
    "DEFAULT_LEASE_NAME",
    "DEFAULT_LEASE_NAMESPACE",
    "DEFAULT_SCHEDULER_NAME",
    "KIND",
    "ClientConnectionConfig",
    "ConfigError",
    "LeaderElectionConfig",
    "PluginConfig",
    "PluginRef",
    "PluginSet",
    "Plugins",
    "Profile",
    "SchedulerConfiguration",
    "config_to_dict",
    "dump_config",
    "expand_extension_points",
    "format_duration",
    "merge_plugin_set",
    "merge_with_defaults",
    "parse_duration",
    "write_config",
]
