"""The evaluator's view of operator preemption policies (scheduler.policy implements it).

The evaluator stays pure and knows nothing of PreemptionPolicy objects: per preemption
it asks a `VictimPolicy` whether it may preempt at all (not while the policies are not
known), then for the `VictimRules` of that preemptor, consults them while it
collects victims and checks the count of each node's victims, and hands them back with
the outcome so the policy side can count (victims chosen, preemptions refused) and
remember what cooldowns need. A dry run (explain) uses rules that record nothing.
"""

from __future__ import annotations

from typing import Protocol

from scheduler.model.pod import PodInfo

__all__ = ["VictimPolicy", "VictimRules", "recording_nothing"]


class VictimRules(Protocol):
    """The combined policies applying to one preemptor, for one evaluation."""

    @property
    def policies(self) -> tuple[str, ...]:
        """Names of the policies that apply, sorted."""
        ...

    def refusal(self, victim: PodInfo, /) -> str | None:
        """None when `victim` may be evicted; else the name of the policy that forbids
        it. Notes the refusal for the outcome."""
        ...

    def over_cap(self, victims: int, /) -> str | None:
        """None when a node's `victims` are within the cap; else the message naming the
        policy whose maxVictimsPerPreemption is exceeded. Notes the refusal."""
        ...

    def refusing_policies(self) -> tuple[str, ...]:
        """Names of the policies that refused anything so far, sorted."""
        ...

    def refusal_summary(self) -> str:
        """What was refused in this evaluation, by policy ("" when nothing was)."""
        ...


class VictimPolicy(Protocol):
    def refuse_all(self, preemptor: PodInfo, /) -> str | None:
        """None when preemption may run under the rules; else why no pod may be a victim
        now (the policies are not known to be current: fail closed). Asked first; a
        question only (explain asks it too), it records nothing."""
        ...

    def note_refused_all(self, preemptor: PodInfo, /) -> None:
        """The evaluation ended at `refuse_all`: count it (the scheduler's own only)."""
        ...

    def rules_for(self, preemptor: PodInfo, /) -> VictimRules | None:
        """The rules for this preemptor, or None when no policy applies to it."""
        ...

    def record(
        self, preemptor: PodInfo, rules: VictimRules, victims: tuple[PodInfo, ...] | None, /
    ) -> None:
        """The evaluation ended: `victims` of the decision, or None when it found no node
        (a refusal, if the rules refused anything)."""
        ...


class _RecordingNothing:
    def __init__(self, policy: VictimPolicy) -> None:
        self._policy = policy

    def refuse_all(self, preemptor: PodInfo, /) -> str | None:
        # explain refuses while the scheduler would refuse
        return self._policy.refuse_all(preemptor)

    def note_refused_all(self, preemptor: PodInfo, /) -> None:
        return None

    def rules_for(self, preemptor: PodInfo, /) -> VictimRules | None:
        return self._policy.rules_for(preemptor)

    def record(
        self, preemptor: PodInfo, rules: VictimRules, victims: tuple[PodInfo, ...] | None, /
    ) -> None:
        return None


def recording_nothing(policy: VictimPolicy) -> VictimPolicy:
    """The same rules as `policy`, but outcomes are not recorded: a dry run (explain)
    leaves the counters and the cooldown memory as they are. (The rules object itself
    notes refusals for its own summary; it lives for one evaluation.)"""
    return _RecordingNothing(policy)
