"""Semantic validation of a decoded, defaulted configuration.

Upstream's rules: pkg/scheduler/apis/config/validation/validation.go (profiles, parallelism,
percentages, backoff), k8s.io/component-base/config/validation/validation.go (leader election,
client connection) and client-go's leaderelection.NewLeaderElector (renewDeadline against
retryPeriod's jitter). Beyond upstream, values that upstream accepts but that break the
process at run time are refused here, each with the reason in a comment.
"""

from __future__ import annotations

from scheduler.config import names
from scheduler.config.bounds import JITTER_FACTOR, MAX_LEASE_DURATION, MIN_LEASE_DURATION
from scheduler.config.duration import format_duration
from scheduler.config.errors import ConfigError, brief
from scheduler.config.k8s_names import dns1123_label, dns1123_subdomain, qualified_name
from scheduler.config.types import RESOURCE_LOCK_LEASES, Profile, SchedulerConfiguration

# the bounds (lease, jitter) live in config/bounds.py, shared with the Helm chart

def validate(cfg: SchedulerConfiguration) -> None:
    if cfg.parallelism <= 0:
        raise ConfigError(
            "parallelism", f"should be an integer value greater than 0, got {cfg.parallelism}"
        )
    _percentage("percentageOfNodesToScore", cfg.percentage_of_nodes_to_score)
    if cfg.pod_initial_backoff_seconds <= 0:
        raise ConfigError(
            "podInitialBackoffSeconds",
            f"must be greater than 0, got {brief(cfg.pod_initial_backoff_seconds)}",
        )
    if cfg.pod_max_backoff_seconds < cfg.pod_initial_backoff_seconds:
        raise ConfigError(
            "podMaxBackoffSeconds",
            f"must be greater than or equal to podInitialBackoffSeconds "
            f"({brief(cfg.pod_initial_backoff_seconds)}), got {brief(cfg.pod_max_backoff_seconds)}",
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
    if le.lease_duration <= le.renew_deadline:
        raise ConfigError(
            "leaderElection.leaseDuration",
            f"must be greater than renewDeadline ({format_duration(le.renew_deadline)}), "
            f"got {format_duration(le.lease_duration)}",
        )
    if not MIN_LEASE_DURATION <= le.lease_duration <= MAX_LEASE_DURATION:
        raise ConfigError(
            "leaderElection.leaseDuration",
            f"must be between 1s and {int(MAX_LEASE_DURATION)}s (the Lease keeps it as whole"
            f" seconds in an int32), got {format_duration(le.lease_duration)}",
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
            f'resourceLock value must be "{RESOURCE_LOCK_LEASES}", got {brief(le.resource_lock)}',
        )
    if not le.resource_name:
        raise ConfigError("leaderElection.resourceName", "required when leaderElect is true")
    if not le.resource_namespace:
        raise ConfigError("leaderElection.resourceNamespace", "required when leaderElect is true")
    # Upstream does not check these names, but the API server refuses a Lease whose name
    # is not a DNS-1123 subdomain or whose namespace is not a DNS-1123 label, and the
    # elector would retry that forever without ever leading.
    problem = dns1123_subdomain(le.resource_name)
    if problem is not None:
        raise ConfigError(
            "leaderElection.resourceName",
            f"{brief(le.resource_name)} is not a Lease name: {problem}",
        )
    problem = dns1123_label(le.resource_namespace)
    if problem is not None:
        raise ConfigError(
            "leaderElection.resourceNamespace",
            f"{brief(le.resource_namespace)} is not a namespace name: {problem}",
        )


def _client_connection(cfg: SchedulerConfiguration) -> None:
    # qps: upstream does not validate it; client-go treats qps <= 0 as "no client-side
    # limit" (rest/config.go), as our dispatcher does. qps 0 was defaulted to 50.
    cc = cfg.client_connection
    if cc.burst < 0:
        raise ConfigError("clientConnection.burst", f"must be non-negative, got {cc.burst}")


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
        # Upstream only requires a name. But the name is the reportingController of every
        # Event the profile writes, which the API server requires to be a qualified name
        # (pkg/apis/core/validation/events.go, ValidateQualifiedName): with any other name
        # every FailedScheduling/Scheduled event would be refused, so it is refused here.
        problem = qualified_name(profile.scheduler_name)
        if problem is not None:
            raise ConfigError(
                f"{path}.schedulerName",
                f"{brief(profile.scheduler_name)} is not a qualified name (it reports the"
                f" profile's events): {problem}",
            )
        if profile.scheduler_name in seen:
            raise ConfigError(
                f"{path}.schedulerName",
                f"duplicate schedulerName {brief(profile.scheduler_name)} "
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
