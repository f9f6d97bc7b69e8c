"""The JSON answer of explain: the pod, its last attempt, the dry run's `now`.

Per-node lists appear only when asked for, one page at a time (pages.py). Victims in
namespaces the caller may not read are counted, not named (access.py).
"""

from __future__ import annotations

from collections.abc import Callable, Container, Mapping, Sequence
from typing import Any

from scheduler.explain.attempts import Attempt
from scheduler.explain.evaluation import Now, Plan
from scheduler.explain.pages import NodePage
from scheduler.framework.status import Status
from scheduler.model.pod import PodInfo
from scheduler.timestamps import rfc3339

__all__ = ["attempt_dict", "now_dict", "plan_dict", "verdicts", "victims_dict"]


# more about one node's verdict, from the plugin that gave it (None: nothing more)
NodeDetail = Callable[[str, Status], dict[str, Any] | None]


def _no_detail(node: str, status: Status) -> dict[str, Any] | None:
    return None


def verdicts(
    statuses: Mapping[str, Status], names: Container[str], detail: NodeDetail = _no_detail
) -> list[dict[str, Any]]:
    """The node -> status entries of the page's `names`, by node name, each with what
    `detail` adds (DynamicResources: its devices, request by request)."""
    out: list[dict[str, Any]] = []
    for name, st in sorted(statuses.items()):
        if name not in names:
            continue
        entry: dict[str, Any] = {
            "node": name, "code": st.code.name, "plugin": st.plugin, "reason": st.message()
        }  # fmt: skip
        entry.update(detail(name, st) or {})
        out.append(entry)
    return out


def attempt_dict(attempt: Attempt, page: NodePage | None) -> dict[str, Any]:
    out: dict[str, Any] = {
        "time": rfc3339(attempt.time),
        "message": attempt.message,
        "nominatedNode": attempt.nominated_node,
    }
    if page is not None:
        out["nodes"] = verdicts(attempt.statuses, page.names)
    return out


def victims_dict(victims: Sequence[PodInfo], readable: Container[str] | None) -> dict[str, Any]:
    """`victims`, `victimCount`, `hiddenVictims`: those in namespaces the caller may
    not read are counted, not named (`readable` None: all may be named)."""
    shown = [v for v in victims if readable is None or v.namespace in readable]
    return {
        "victims": [{"pod": v.key, "uid": v.uid, "priority": v.priority} for v in shown],
        "victimCount": len(victims),
        "hiddenVictims": len(victims) - len(shown),
    }


def plan_dict(plan: Plan, readable: Container[str] | None) -> dict[str, Any]:
    """`readable`: the namespaces whose victims may be named (None: all)."""
    return {
        "node": plan.node,
        **victims_dict(plan.victims, readable),
        "pdbViolations": plan.pdb_violations,
        "policies": list(plan.policies),
        "message": plan.message,
        "code": plan.code,
    }


def now_dict(
    now: Now,
    page: NodePage | None,
    readable: Container[str] | None,
    detail: NodeDetail = _no_detail,
) -> dict[str, Any]:
    out: dict[str, Any] = {"result": now.result, "evaluatedAt": rfc3339(now.time)}
    if now.result == "Schedulable":
        out["node"] = now.node
        out["preemption"] = None
        return out
    out["message"] = now.message
    if now.result == "Error":
        return out
    if page is not None and now.statuses is not None:
        out["nodes"] = verdicts(now.statuses, page.names, detail)
    out["preemption"] = plan_dict(now.preemption, readable) if now.preemption else None
    return out
