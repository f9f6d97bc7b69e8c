"""Feature gates, as kube-scheduler's `--feature-gates` flag spells them.

Only the gates this scheduler acts on are known; any other name is refused (exit 2 with
the flag and the name), as kube-scheduler refuses an unrecognized gate. Defaults are
v1.37.2's (k8s.io/kubernetes pkg/features/kube_features.go):

- `GenericWorkload` (beta, off by default): pods that name a PodGroup
  (`spec.schedulingGroup`) are scheduled as a group by the pod-group cycle, and the
  default profile gains the GangScheduling plugin (pkg/scheduler/apis/config/v1/
  default_plugins.go). Off, such a pod is refused with an event, since placing members
  one by one could bind part of a gang.
- `DynamicResourceAllocation` (GA and locked on in v1.37.2; **off by default here** until
  this scheduler's DynamicResources plugin is complete, docs/plans/dra.md): pods with
  `spec.resourceClaims` get devices as kube-scheduler allocates them, the default profile
  gains DynamicResources (Score weight 2, right before DefaultPreemption, as
  default_plugins.go applyDynamicResources), and the scheduler watches ResourceSlices,
  DeviceClasses and ResourceClaims. Off, such a pod is refused with an event. The flag
  `--feature-gates=DynamicResourceAllocation=true` is one kube-scheduler accepts too
  (setting a locked gate to its default), so both can run with the same flags.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["FeatureGateError", "FeatureGates", "parse_feature_gates"]

GENERIC_WORKLOAD = "GenericWorkload"
DYNAMIC_RESOURCE_ALLOCATION = "DynamicResourceAllocation"
_KNOWN = (GENERIC_WORKLOAD, DYNAMIC_RESOURCE_ALLOCATION)


class FeatureGateError(ValueError):
    """A --feature-gates value that cannot be read; the message names the problem."""


@dataclass(frozen=True, slots=True)
class FeatureGates:
    generic_workload: bool = False
    dynamic_resource_allocation: bool = False

    def args(self) -> list[str]:
        """The flag that gives these gates to a kube-scheduler-like process (or none)."""
        on = [
            name
            for name, enabled in (
                (GENERIC_WORKLOAD, self.generic_workload),
                (DYNAMIC_RESOURCE_ALLOCATION, self.dynamic_resource_allocation),
            )
            if enabled
        ]
        return ["--feature-gates=" + ",".join(f"{n}=true" for n in on)] if on else []


def parse_feature_gates(value: str) -> FeatureGates:
    """`A=true,B=false` as component-base's flag reads it: pairs separated by commas,
    spaces around them ignored, values true/false (any case)."""
    enabled: dict[str, bool] = {}
    for item in value.split(","):
        item = item.strip()
        if not item:
            continue
        name, sep, raw = item.partition("=")
        name = name.strip()
        if not sep:
            raise FeatureGateError(f"missing bool value for {name}")
        flag = raw.strip().lower()
        if flag not in ("true", "false"):
            raise FeatureGateError(f"invalid value of {name}={raw.strip()}, err: not a bool")
        if name not in _KNOWN:
            raise FeatureGateError(f"unrecognized feature gate: {name}")
        enabled[name] = flag == "true"
    return FeatureGates(
        generic_workload=enabled.get(GENERIC_WORKLOAD, False),
        dynamic_resource_allocation=enabled.get(DYNAMIC_RESOURCE_ALLOCATION, False),
    )
