"""KubeSchedulerConfiguration (kubescheduler.config.k8s.io/v1): types, defaults, validation,
loading and dumping.

    cfg = load_config("/etc/kube-async-scheduler/config.yaml")   # raises ConfigError
    cfg = default_config()                                      # no --config
    write_config(cfg, path)                                     # --write-config-to

Defaults are upstream's except the secondary-scheduler names: profile
``kube-async-scheduler`` and Lease ``kube-system/kube-async-scheduler``.
"""

from scheduler.config.dump import config_to_dict, dump_config, write_config
from scheduler.config.duration import format_duration, parse_duration
from scheduler.config.errors import ConfigError
from scheduler.config.load import (
    config_from_bytes,
    config_from_dict,
    config_from_yaml,
    default_config,
    load_config,
)
from scheduler.config.names import PluginRef
from scheduler.config.plugins import (
    default_implements,
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
    "config_from_bytes",
    "config_from_dict",
    "config_from_yaml",
    "config_to_dict",
    "default_config",
    "default_implements",
    "dump_config",
    "expand_extension_points",
    "format_duration",
    "load_config",
    "merge_plugin_set",
    "merge_with_defaults",
    "parse_duration",
    "write_config",
]
