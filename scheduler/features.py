"""Feature gates, as kube-scheduler's `--feature-gates` flag spells them.

Only the gates this scheduler acts on are known; any other name is refused (exit 2 with
the flag and the name), as kube-scheduler refuses an unrecognized gate. Defaults are
v1.37.2's (k8s.io/kubernetes pkg/features/kube_features.go):

- `GenericWorkload` (beta, off by default): pods that name a PodGroup
  (`spec.schedulingGroup`) are scheduled as a group by the pod-group cycle, and the
  default profile gains the GangScheduling plugin (pkg/scheduler/apis/config/v1/
  default_plugins.go). Off, such a pod is refused with an event, since placing members
  one by one could bind part of a gang.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["FeatureGateError", "FeatureGates", "parse_feature_gates"]

GENERIC_WORKLOAD = "GenericWorkload"


class FeatureGateError(ValueError):
    """A --feature-gates value that cannot be read; the message names the problem."""


@dataclass(frozen=True, slots=True)
class FeatureGates:
    generic_workload: bool = False

    def args(self) -> list[str]:
        """The flag that gives these gates to a kube-scheduler-like process (or none)."""
        return [f"--feature-gates={GENERIC_WORKLOAD}=true"] if self.generic_workload else []


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
        if name != GENERIC_WORKLOAD:
            raise FeatureGateError(f"unrecognized feature gate: {name}")
        enabled[name] = flag == "true"
    return FeatureGates(generic_workload=enabled.get(GENERIC_WORKLOAD, False))
