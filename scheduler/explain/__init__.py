"""`explain`: why a pending pod is pending, and what the scheduler would do about it now.

Two parts, both read-only:

- the **last attempt**, as the scheduling cycle recorded it (attempts.py);
- **now**, a dry run on explain's own snapshot (evaluation.py): the scheduling algorithm
  for the pod and, when no node fits, DefaultPreemption's `what_if` (PostFilter's own
  evaluator, recording nothing). It nominates nobody, assumes nothing, starts no task,
  makes no API call and writes nothing the scheduling loop reads.

A member of a PodGroup (GenericWorkload) is explained as its group: group_facts.py (the
PodGroup, its members, GangScheduling's PreEnqueue verdict) and group_evaluation.py (the
group tried as the pod-group cycle would, by the cycle's own group_algorithm.py),
answered as the `podGroup` section (group_answer.py).

Its cost is bounded (gate.py: one evaluation at a time, a small queue, 429 beyond it,
answers kept a few seconds per pod, a share of the event loop's time); per-node lists
come only on request, a page at a time (pages.py); with the server's access check,
other tenants' victims are counted, not named (access.py). handler.py is the HTTP side.

The sampling offset of the dry run is 0 where the scheduler's is random: when the
candidate nodes exceed the sample (minCandidateNodesPercentage/Absolute, 100 by
default) or candidates tie on every criterion, the scheduler may pick another node.
"""

from __future__ import annotations

from scheduler.explain.attempts import Attempt, AttemptLog
from scheduler.explain.evaluation import DryRunner, Now, Plan
from scheduler.explain.explainer import Explainer, Refusal
from scheduler.explain.gate import Busy, EvaluationGate
from scheduler.explain.handler import EXPLAIN_PATH, http_handler

__all__ = [
    "EXPLAIN_PATH",
    "Attempt",
    "AttemptLog",
    "Busy",
    "DryRunner",
    "EvaluationGate",
    "Explainer",
    "Now",
    "Plan",
    "Refusal",
    "http_handler",
]
