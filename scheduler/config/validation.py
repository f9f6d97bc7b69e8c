"""Semantic validation of a decoded, defaulted configuration (upstream's validation.go and
component-base's leader-election and client-connection checks)."""

from __future__ import annotations

from scheduler.config import names
from scheduler.config.duration import format_duration
from scheduler.config.errors import ConfigError
from scheduler.config.types import RESOURCE_LOCK_LEASES, Profile, SchedulerConfiguration

# client-go's leader election jitter: renewDeadline must exceed retryPeriod * 1.2
JITTER_FACTOR = 1.2


def validate(cfg: SchedulerConfiguration) -> None:
    if cfg.parallelism <= 0:
        raise ConfigError("parallelism", f"must be greater than 0, got {cfg.parallelism}")
    _percentage("percentageOfNodesToScore", cfg.percentage_of_nodes_to_score)
    if cfg.pod_initial_backoff_seconds <= 0:
        raise ConfigError(
            "podInitialBackoffSeconds",
            f"must be greater than 0, got {cfg.pod_initial_backoff_seconds}",
        )
    if cfg.pod_max_backoff_seconds < cfg.pod_initial_backoff_seconds:
        raise ConfigError(
            "podMaxBackoffSeconds",
            f"must be greater than or equal to podInitialBackoffSeconds "
            f"({cfg.pod_initial_backoff_seconds}), got {cfg.pod_max_backoff_seconds}",
        )
    _leader_election(cfg)
    _client_connection(cfg)
    _profiles(cfg)


def _percentage(path: str, value: int) -> None:
    if not 0 <= value <= 100:
        raise ConfigError(path, f"must be in the range [0, 100], got {value}")


def _leader_election(cfg: SchedulerConfiguration) -> None:
    le = cfg.leader_election
    if not le.leader_elect:
        return
    for key, value in (
        ("leaseDuration", le.lease_duration),
        ("renewDeadline", le.renew_deadline),
        ("retryPeriod", le.retry_period),
    ):
        if value <= 0:
            raise ConfigError(
                f"leaderElection.{key}", f"must be greater than zero, got {format_duration(value)}"
            )
    if le.renew_deadline >= le.lease_duration:
        raise ConfigError(
            "leaderElection.renewDeadline",
            f"must be less than leaseDuration ({format_duration(le.lease_duration)}), "
            f"got {format_duration(le.renew_deadline)}",
        )
    if le.renew_deadline <= le.retry_period * JITTER_FACTOR:
        raise ConfigError(
            "leaderElection.renewDeadline",
            f"must be greater than retryPeriod*{JITTER_FACTOR} "
            f"({format_duration(le.retry_period * JITTER_FACTOR)}), "
            f"got {format_duration(le.renew_deadline)}",
        )
    if le.resource_lock != RESOURCE_LOCK_LEASES:
        raise ConfigError(
            "leaderElection.resourceLock",
            f"only {RESOURCE_LOCK_LEASES!r} is supported, got {le.resource_lock!r}",
        )
    if not le.resource_name:
        raise ConfigError("leaderElection.resourceName", "required when leaderElect is true")
    if not le.resource_namespace:
        raise ConfigError("leaderElection.resourceNamespace", "required when leaderElect is true")


def _client_connection(cfg: SchedulerConfiguration) -> None:
    cc = cfg.client_connection
    if cc.qps < 0:
        raise ConfigError("clientConnection.qps", f"must not be negative, got {cc.qps:g}")
    if cc.burst < 0:
        raise ConfigError("clientConnection.burst", f"must not be negative, got {cc.burst}")


def _queue_sort_signature(profile: Profile) -> tuple[tuple[str, object], ...]:
    """The queue sort plugins of a profile with their args (must match across profiles)."""
    return tuple(
        (ref.name, profile.args_for(ref.name)) for ref in profile.enabled(names.QUEUE_SORT)
    )


def _profiles(cfg: SchedulerConfiguration) -> None:
    if not cfg.profiles:
        raise ConfigError("profiles", "at least one profile is required")
    seen: dict[str, int] = {}
    for i, profile in enumerate(cfg.profiles):
        path = f"profiles[{i}]"
        if not profile.scheduler_name:
            raise ConfigError(f"{path}.schedulerName", "required")
        if profile.scheduler_name in seen:
            raise ConfigError(
                f"{path}.schedulerName",
                f"duplicate schedulerName {profile.scheduler_name!r} "
                f"(also profiles[{seen[profile.scheduler_name]}])",
            )
        seen[profile.scheduler_name] = i
        if profile.percentage_of_nodes_to_score is not None:
            _percentage(f"{path}.percentageOfNodesToScore", profile.percentage_of_nodes_to_score)
        queue_sort = profile.enabled(names.QUEUE_SORT)
        if len(queue_sort) != 1:
            found = ", ".join(r.name for r in queue_sort) or "none"
            raise ConfigError(
                f"{path}.plugins.{names.QUEUE_SORT}",
                f"exactly one queue sort plugin is required, found {found}",
            )
        if not profile.enabled(names.BIND):
            raise ConfigError(f"{path}.plugins.{names.BIND}", "at least one bind plugin is needed")
    first = _queue_sort_signature(cfg.profiles[0])
    for i, profile in enumerate(cfg.profiles[1:], start=1):
        if _queue_sort_signature(profile) != first:
            raise ConfigError(
                f"profiles[{i}].plugins.{names.QUEUE_SORT}",
                f"must be the same for all profiles (profiles[0] uses {first[0][0]} with its args)",
            )
