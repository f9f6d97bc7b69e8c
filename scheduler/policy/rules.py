"""How several PreemptionPolicies combine, for one preemptor (docs/preemption.md).

1. A policy *applies* to a preemptor when its `preemptors` clause matches (priority class
   listed or no list; namespace labels selected or no selector).
2. A pod may be a victim only if *every* applying policy allows it. The first refusing
   policy in name order is the one reported, so the outcome and its message do not
   depend on the order the policies were created or listed.
3. Numeric limits: each applying policy's own toleration and cooldown must hold, so in
   effect the largest wins; the cap on victims per preemption is the smallest.
4. No applying policy: no restriction beyond the victim scope (upstream's behaviour).

A `CombinedRules` lives for one evaluation: it notes what it refused, so the message of a
failed preemption and the counters can name the policy.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence

from scheduler.model.pod import PodInfo
from scheduler.policy.spec import PolicySpec

__all__ = [
    "REASON_COOLDOWN",
    "REASON_LABELS",
    "REASON_NAMESPACE",
    "REASON_PRIORITY",
    "REASON_PRIORITY_CLASS",
    "REASON_PROTECTED",
    "REASON_TOLERATION",
    "CombinedRules",
    "applies_to",
    "owner_key",
]

REASON_PROTECTED = "in a protected namespace"
REASON_NAMESPACE = "in a namespace not selected for victims"
REASON_LABELS = "not selected by the victims' labelSelector"
REASON_PRIORITY_CLASS = "of a priority class not listed for victims"
REASON_PRIORITY = "below minPreemptablePriority"
REASON_TOLERATION = "started less than tolerationSeconds ago"
REASON_COOLDOWN = "of an owner preempted less than cooldownSeconds ago"
REASON_CAP = "needed more victims than maxVictimsPerPreemption"

# namespace name -> its labels (None: the namespace is unknown to the cache)
NamespaceLabels = Callable[[str], Mapping[str, str] | None]
# owner key -> wall time its last pod was chosen as a victim (None: never)
LastPreempted = Callable[[str], float | None]


def owner_key(pod: PodInfo) -> str | None:
    """The controller owner's uid (else the first owner's), or None for a bare pod:
    cooldown groups pods by the object that makes them."""
    refs = pod.owner_refs
    if not refs:
        return None
    ref = next((r for r in refs if r.controller), refs[0])
    return ref.uid or f"{pod.namespace}/{ref.kind}/{ref.name}"


def applies_to(policy: PolicySpec, preemptor: PodInfo, ns_labels: NamespaceLabels) -> bool:
    classes = policy.preemptor_priority_classes
    if classes and preemptor.priority_class_name not in classes:
        return False
    sel = policy.preemptor_namespaces
    if sel.is_everything:
        return True
    return sel.matches(ns_labels(preemptor.namespace) or {})


class CombinedRules:
    """The VictimRules of one evaluation (scheduler.preemption.victim_policy)."""

    def __init__(
        self,
        policies: Sequence[PolicySpec],
        ns_labels: NamespaceLabels,
        last_preempted: LastPreempted,
        now: float,
    ) -> None:
        self._policies = sorted(policies, key=lambda p: p.name)
        self._ns_labels = ns_labels
        self._last_preempted = last_preempted
        self._now = now
        caps = [(p.max_victims, p.name) for p in self._policies if p.max_victims is not None]
        self.cap: tuple[int, str] | None = min(caps) if caps else None
        self.refused: Counter[tuple[str, str]] = Counter()  # (policy, reason) -> pods or nodes

    @property
    def policies(self) -> tuple[str, ...]:
        return tuple(p.name for p in self._policies)

    def _why_not(self, p: PolicySpec, pod: PodInfo) -> str | None:
        if pod.namespace in p.protected_namespaces:
            return REASON_PROTECTED
        if not p.victim_namespaces.is_everything and not p.victim_namespaces.matches(
            self._ns_labels(pod.namespace) or {}
        ):
            return REASON_NAMESPACE
        if not p.victim_labels.is_everything and not p.victim_labels.matches(pod.labels):
            return REASON_LABELS
        if p.victim_priority_classes and pod.priority_class_name not in p.victim_priority_classes:
            return REASON_PRIORITY_CLASS
        if p.min_preemptable_priority is not None and pod.priority < p.min_preemptable_priority:
            return REASON_PRIORITY
        if p.toleration_seconds:
            # a pod without a start time has not started: it is within any toleration
            started = pod.start_time if pod.start_time is not None else self._now
            if self._now - started < p.toleration_seconds:
                return REASON_TOLERATION
        if p.cooldown_seconds:
            key = owner_key(pod)
            last = self._last_preempted(key) if key is not None else None
            if last is not None and self._now - last < p.cooldown_seconds:
                return REASON_COOLDOWN
        return None

    def refusal(self, victim: PodInfo, /) -> str | None:
        for p in self._policies:
            why = self._why_not(p, victim)
            if why is not None:
                self.refused[(p.name, why)] += 1
                return p.name
        return None

    def over_cap(self, victims: int, /) -> str | None:
        if self.cap is None or victims <= self.cap[0]:
            return None
        limit, name = self.cap
        self.refused[(name, REASON_CAP)] += 1
        return (
            f"PreemptionPolicy {name}: {victims} victims needed, maxVictimsPerPreemption is {limit}"
        )

    def refusing_policies(self) -> tuple[str, ...]:
        return tuple(sorted({name for name, _ in self.refused}))

    def refusal_summary(self) -> str:
        """E.g. 'refused by PreemptionPolicy protect-system: 3 pod(s) in a protected
        namespace'; one clause per policy, in name order."""
        if not self.refused:
            return ""
        parts: list[str] = []
        for name in self.refusing_policies():
            reasons = sorted(
                (reason, n) for (policy, reason), n in self.refused.items() if policy == name
            )
            detail = ", ".join(
                f"{n} node(s) {reason}" if reason == REASON_CAP else f"{n} pod(s) {reason}"
                for reason, n in reasons
            )
            parts.append(f"refused by PreemptionPolicy {name}: {detail}")
        return "; ".join(parts)
