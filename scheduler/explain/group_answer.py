"""The `podGroup` section of explain's answer (a gang member, GenericWorkload): the
PodGroup as the scheduler reads it, its members and where they wait, GangScheduling's
PreEnqueue verdict, and `now`, the group's dry run (group_evaluation.py): each member's
placement, whether minCount would be reached, the group's verdict and what pod-group
preemption would do, victims per node. Victims in namespaces the caller may not read are
counted, not named (access.py), as for a single pod's plan."""

from __future__ import annotations

from collections.abc import Container
from typing import Any

from scheduler.explain.answer import victims_dict
from scheduler.explain.group_evaluation import GroupNow, GroupPlan
from scheduler.model.pod import PodInfo

__all__ = ["group_dict", "group_plan_dict", "group_victims"]


def group_victims(now: GroupNow) -> tuple[PodInfo, ...]:
    return now.preemption.victims if now.preemption is not None else ()


def group_plan_dict(plan: GroupPlan, readable: Container[str] | None) -> dict[str, Any]:
    by_node: dict[str, list[PodInfo]] = {}
    for v in plan.victims:
        by_node.setdefault(v.node_name, []).append(v)
    return {
        "code": plan.code,
        "message": plan.message,
        "victimCount": len(plan.victims),
        "hiddenVictims": victims_dict(plan.victims, readable)["hiddenVictims"],
        "pdbViolations": plan.pdb_violations,
        "groupDisruptions": plan.group_disruptions,
        "nodes": [
            {"node": node, **victims_dict(victims, readable)}
            for node, victims in sorted(by_node.items())
        ],
        "nominations": [{"pod": pod.key, "node": node} for pod, node in plan.nominations],
    }


def group_dict(now: GroupNow, readable: Container[str] | None) -> dict[str, Any]:
    facts, group = now.facts, now.facts.pod_group
    return {
        "name": facts.name,
        "found": group is not None,
        "policy": group.policy if group is not None else None,
        "minCount": facts.min_count if group is not None else None,
        "disruptionMode": group.disruption_mode if group is not None else None,
        "priority": group.priority if group is not None else None,
        "membersKnown": facts.known,
        "membersScheduled": facts.scheduled,
        "preEnqueue": {"held": facts.held, "message": facts.held_message},
        "members": [{"pod": m.pod, "queue": m.queue} for m in facts.members],
        "now": {
            "result": now.result,
            "message": now.message,
            "reachesMinCount": now.reaches_min_count,
            "placements": [
                {"pod": p.pod.key, "node": p.node, "reason": p.reason} for p in now.placements
            ],
            "preemption": (
                group_plan_dict(now.preemption, readable) if now.preemption is not None else None
            ),
        },
    }
