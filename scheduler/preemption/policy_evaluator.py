"""The evaluator under operator preemption policies (scheduler.policy feeds it).

A subclass of the pure Evaluator that changes nothing of its algorithm, only what it may
take: per evaluation it asks the `VictimPolicy` for the preemptor's rules, then

- `may_evict` also asks the rules (a refused pod is treated as not removable, like a pod
  of higher priority), so a protected pod is never a victim even when that leaves the
  preemptor pending;
- `node_refusal` refuses a node whose victims exceed the cap;
- afterwards the outcome goes back to the policy (counters, cooldown memory), and a
  preemption that found no node gets the refusals appended to its message, naming the
  policies (the FailedScheduling event and the PodScheduled condition carry it).

Before all of that, `refuse_all`: while the policies are not known to be current (a new
process or leader before its first listing, a broken watch, a missing CRD) the
evaluation stops at once, unschedulable with the reason and no victim; the nomination
is kept (the pod was not found unhelpable), and the pod is retried when the policies are
in sync again (the policy runtime requeues the waiting pods then).

Kept apart from evaluator.py so the upstream algorithm there stays as it is; the
evaluator only offers the `node_refusal` hook.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Collection, Sequence
from dataclasses import replace
from typing import Any

from scheduler.config.args import DefaultPreemptionArgs
from scheduler.framework.status import Status
from scheduler.model.pod import PodInfo
from scheduler.preemption.evaluator import Evaluation, Evaluator
from scheduler.preemption.victim_policy import VictimPolicy, VictimRules

__all__ = ["PolicyEvaluator", "new_evaluator"]


class PolicyEvaluator(Evaluator):
    def __init__(
        self,
        args: DefaultPreemptionArgs,
        own_schedulers: Collection[str],
        policy: VictimPolicy,
        *,
        rand: Callable[[int], int] = random.randrange,
    ) -> None:
        super().__init__(args, own_schedulers, rand=rand)
        self.policy = policy
        self._rules: VictimRules | None = None  # of the evaluation running now

    def may_evict(self, pod: PodInfo) -> bool:
        if not super().may_evict(pod):
            return False
        rules = self._rules
        return rules is None or rules.refusal(pod) is None

    def node_refusal(self, victims: Sequence[PodInfo]) -> Status | None:
        rules = self._rules
        over = rules.over_cap(len(victims)) if rules is not None else None
        return Status.unschedulable(over) if over is not None else None

    def evaluate(self, preemptor: PodInfo, *args: Any, **kwargs: Any) -> Evaluation:
        # evaluate() is synchronous and the loop runs one at a time: the rules can live
        # on the instance for its duration
        closed = self.policy.refuse_all(preemptor)
        if closed is not None:
            self.policy.note_refused_all(preemptor)
            return Evaluation(status=Status.unschedulable(closed))
        rules = self.policy.rules_for(preemptor)
        if rules is None:
            return super().evaluate(preemptor, *args, **kwargs)
        self._rules = rules
        try:
            evaluation = super().evaluate(preemptor, *args, **kwargs)
        finally:
            self._rules = None
        decision = evaluation.decision
        self.policy.record(preemptor, rules, decision.victims if decision is not None else None)
        summary = rules.refusal_summary()
        if decision is not None or not summary or evaluation.status.ok:
            return evaluation
        st = evaluation.status
        message = f"{st.message()}; {summary}" if st.message() else summary
        return replace(evaluation, status=Status(st.code, (message,), st.plugin, st.error))


def new_evaluator(
    args: DefaultPreemptionArgs,
    own_schedulers: Collection[str],
    *,
    rand: Callable[[int], int] = random.randrange,
    policy: VictimPolicy | None = None,
) -> Evaluator:
    """The plain Evaluator, or the PolicyEvaluator when policies are in use."""
    if policy is None:
        return Evaluator(args, own_schedulers, rand=rand)
    return PolicyEvaluator(args, own_schedulers, policy, rand=rand)
