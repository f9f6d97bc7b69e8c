"""The bounds the configuration's validation enforces, in one place, for the validation
itself and for the Helm chart.

The chart renders a KubeSchedulerConfiguration from its values; a value the scheduler
refuses must be refused by `helm install` too, not by a crash-looping pod. What a JSON
Schema can say (a pattern, a range) goes into charts/kube-async-scheduler/values.schema.json;
what it cannot (durations, and durations compared with each other) goes into
charts/kube-async-scheduler/files/config-bounds.json, which the chart's templates read.
Both are generated from this module by `python -m kas_dev.chart_bounds`
(tests/chart/test_chart_bounds.py fails when they are out of step).
"""

from __future__ import annotations

from typing import Any

from scheduler.config.k8s_names import (
    DNS1123_SUBDOMAIN_MAX,
    DNS1123_SUBDOMAIN_PATTERN,
    QUALIFIED_NAME_MAX,
)

__all__ = [
    "INT32_MAX",
    "JITTER_FACTOR",
    "MAX_LEASE_DURATION",
    "MIN_LEASE_DURATION",
    "chart_bounds",
    "schema_bounds",
]

INT32_MAX = (1 << 31) - 1
# client-go's leader election jitter: renewDeadline must exceed retryPeriod * 1.2
JITTER_FACTOR = 1.2
# The Lease stores the duration as whole seconds in an int32 (coordination/v1
# LeaseSpec.leaseDurationSeconds) that the API server requires to be > 0
# (pkg/apis/coordination/validation ValidateLeaseSpec). client-go converts with
# int32(seconds): below 1s every write is refused with 422, above 2^31-1 s the value wraps;
# either way no replica ever leads. So the lease must be within [1s, 2^31-1 s].
MIN_LEASE_DURATION = 1.0
MAX_LEASE_DURATION = float(INT32_MAX)


def _percentage() -> dict[str, Any]:
    return {"type": "integer", "minimum": 0, "maximum": 100}


# where the chart takes DefaultPreemption's args: config.preemption, a profile's
# preemption, a profile's DefaultPreemption pluginConfig entry
PREEMPTION_ARGS = (
    "/config/preemption",
    "/config/profiles/items/preemption",
    "/config/profiles/items/pluginConfig/items/then/args",
)


def schema_bounds() -> dict[str, dict[str, Any]]:
    """JSON pointer of a values.schema.json value ("items" for an array's items, "then"
    for a conditional's) -> the keywords that bound it, as validation.py and the plugin
    args parser (config/plugin_args.py) bound the config field the chart renders it into."""
    preemption: dict[str, dict[str, Any]] = {}
    for where in PREEMPTION_ARGS:
        preemption[f"{where}/minCandidateNodesPercentage"] = _percentage()
        preemption[f"{where}/minCandidateNodesAbsolute"] = {
            "type": "integer",
            "minimum": 0,
            "maximum": INT32_MAX,
        }
    return {
        **preemption,
        "/config/percentageOfNodesToScore": _percentage(),
        "/config/profiles/items/percentageOfNodesToScore": _percentage(),
        "/config/profiles/items/schedulerName": {
            # the scheduler needs a qualified name (it reports the profile's events:
            # validation.py), a pod can only name a DNS-1123 subdomain (the API server's
            # pod validation): both hold for a subdomain of at most 63 characters
            "type": "string",
            "minLength": 1,
            "maxLength": QUALIFIED_NAME_MAX,
            "pattern": f"^{DNS1123_SUBDOMAIN_PATTERN}$",
        },
        "/config/podInitialBackoffSeconds": {"type": "integer", "minimum": 1},
        "/leaderElection/resourceName": {
            "type": "string",
            "maxLength": DNS1123_SUBDOMAIN_MAX,
            # empty: the release's full name
            "pattern": f"^({DNS1123_SUBDOMAIN_PATTERN})?$",
        },
    }


def chart_bounds() -> dict[str, Any]:
    """What the chart's templates check beyond the schema (files/config-bounds.json)."""
    return {
        "minLeaseSeconds": MIN_LEASE_DURATION,
        "maxLeaseSeconds": MAX_LEASE_DURATION,
        "renewJitterFactor": JITTER_FACTOR,
    }
