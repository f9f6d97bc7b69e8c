"""`explain`: why a pending pod is pending, and what the scheduler would do about it now.

Two parts, both read-only:

- the **last attempt**, as the scheduling cycle recorded it (`AttemptLog.record`, called
  by the loop on a FitError): per node the status of the plugin that rejected it (the
  Diagnosis the cycle already built), the FailedScheduling message, the nomination;
- **now**, a dry run on a fresh snapshot of the cache: the scheduling algorithm for the
  pod (PreFilter, Filter, Score, with a search state of its own), and when no node fits,
  the preemption evaluator with the profile's DefaultPreemption args and the
  PreemptionPolicies in force, through rules that record nothing. It nominates nobody,
  assumes nothing, starts no task and makes no API call; the framework handle's
  snapshot and nominator are put back afterwards.

The sampling offset of the dry run is 0 where the scheduler's is random: when the
candidate nodes exceed the sample (minCandidateNodesPercentage/Absolute, 100 by
default) or candidates tie on every criterion, the scheduler may pick another node.
"""

from __future__ import annotations

import datetime as dt
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from scheduler.cache import Cache, Nominator
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.diagnosis import FitError
from scheduler.framework.runtime import Framework
from scheduler.framework.schedule import NodeDryRun, SchedulingError, schedule_pod
from scheduler.framework.search import SearchState
from scheduler.framework.status import Code, Status
from scheduler.model.pdb import PDBInfo
from scheduler.model.pod import PodInfo
from scheduler.preemption.default_preemption import DefaultPreemption
from scheduler.preemption.evaluator import DryRun, Evaluator, NodeLike
from scheduler.preemption.policy_evaluator import new_evaluator
from scheduler.preemption.victim_policy import VictimPolicy

__all__ = ["EXPLAIN_PATH", "AttemptLog", "Explainer", "NodeVerdict", "http_handler"]

EXPLAIN_PATH = "/explain/{namespace}/{name}"

MAX_REMEMBERED = 10_000  # pods whose last attempt is kept (oldest forgotten first)
# node statuses kept over all attempts: about 40 MB at most (a pointer pair per entry in
# the shared maps; the Status objects themselves are shared by many nodes)
MAX_NODE_ENTRIES = 1_000_000


@dataclass(frozen=True, slots=True)
class NodeVerdict:
    node: str
    code: str
    plugin: str
    reason: str

    def as_dict(self) -> dict[str, str]:
        return {"node": self.node, "code": self.code, "plugin": self.plugin, "reason": self.reason}


def _verdicts(statuses: Mapping[str, Status]) -> list[NodeVerdict]:
    return [
        NodeVerdict(name, st.code.name, st.plugin, st.message())
        for name, st in sorted(statuses.items())
    ]


def _rfc3339(moment: float) -> str:
    return dt.datetime.fromtimestamp(moment, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True, slots=True)
class Attempt:
    uid: str
    time: float
    message: str
    # the cycle's own node -> Status map, kept as it is: turning it into verdicts costs a
    # pass over every node, paid only when someone asks (explain), not per failed cycle
    statuses: Mapping[str, Status]
    nominated_node: str | None

    @property
    def nodes(self) -> list[NodeVerdict]:
        return _verdicts(self.statuses)

    def as_dict(self) -> dict[str, Any]:
        return {
            "time": _rfc3339(self.time),
            "message": self.message,
            "nominatedNode": self.nominated_node,
            "nodes": [v.as_dict() for v in self.nodes],
        }


class AttemptLog:
    """The last failed attempt of each pod, by uid, oldest forgotten first.

    Bounded twice: at most `max_pods` pods, and at most `max_node_entries` node statuses
    over all kept attempts (each attempt holds one per node of the cluster, so on a
    5000-node cluster the pod bound alone would allow 50 million). A forgotten attempt
    only loses the `lastAttempt` part of explain; its `now` dry run does not need it."""

    def __init__(
        self,
        wall: Callable[[], float] = time.time,
        *,
        max_pods: int = MAX_REMEMBERED,
        max_node_entries: int = MAX_NODE_ENTRIES,
    ) -> None:
        self._wall = wall
        self._max_pods = max_pods
        self._max_entries = max_node_entries
        self._entries = 0
        self._attempts: OrderedDict[str, Attempt] = OrderedDict()

    def record(self, pod: PodInfo, fit: FitError, nominated: str | None) -> None:
        # built (and cached) for PostFilter and the event already; never mutated after
        statuses = fit.diagnosis.node_to_status()
        attempt = Attempt(pod.uid, self._wall(), fit.message(), statuses, nominated)
        self.forget(pod.uid)
        self._attempts[pod.uid] = attempt
        self._entries += len(statuses)
        while len(self._attempts) > 1 and (
            len(self._attempts) > self._max_pods or self._entries > self._max_entries
        ):
            _, oldest = self._attempts.popitem(last=False)
            self._entries -= len(oldest.statuses)

    def get(self, uid: str) -> Attempt | None:
        return self._attempts.get(uid)

    def forget(self, uid: str) -> None:
        old = self._attempts.pop(uid, None)
        if old is not None:
            self._entries -= len(old.statuses)


class Explainer:
    def __init__(
        self,
        *,
        pod_lookup: Callable[[str], PodInfo | None],  # "ns/name" -> the informer's pod
        frameworks: Mapping[str, Framework],
        cache: Cache,
        nominator: Nominator,
        attempts: AttemptLog,
        pdbs: Callable[[], Sequence[PDBInfo]],
        queue_of: Callable[[str], str | None],
        policy: VictimPolicy | None = None,
        is_leader: Callable[[], bool] = lambda: True,
    ) -> None:
        self._pod_lookup = pod_lookup
        self._frameworks = frameworks
        self._cache = cache
        self._nominator = nominator
        self._attempts = attempts
        self._pdbs = pdbs
        self._queue_of = queue_of
        self._policy = policy
        self._is_leader = is_leader

    def explain(self, namespace: str, name: str) -> tuple[int, dict[str, Any]]:
        """(HTTP status, body). 404 for an unknown pod, 409 when it is not a pending pod
        of this scheduler's profiles."""
        key = f"{namespace}/{name}"
        pod = self._pod_lookup(key)
        if pod is None:
            return 404, {"error": f"pod {key} not found in the scheduler's cache"}
        fwk = self._frameworks.get(pod.scheduler_name)
        if fwk is None:
            return 409, {
                "error": f"pod {key} has schedulerName {pod.scheduler_name!r},"
                f" not one of this scheduler's profiles ({', '.join(sorted(self._frameworks))})"
            }
        if pod.node_name:
            return 409, {"error": f"pod {key} is not pending: bound to node {pod.node_name}"}
        attempt = self._attempts.get(pod.uid)
        nominated = self._nominator.nominated_node(pod) or pod.nominated_node_name or None
        body: dict[str, Any] = {
            "pod": key,
            "uid": pod.uid,
            # a follower schedules nothing: it has no attempts to show (through the
            # Service the answer may come from one)
            "leader": self._is_leader(),
            "schedulerName": pod.scheduler_name,
            "priority": pod.priority,
            "queue": self._queue_of(pod.uid),
            "schedulingGates": list(pod.scheduling_gates),
            "nominatedNode": nominated,
            "lastAttempt": attempt.as_dict() if attempt is not None else None,
            "now": self._dry_run(fwk, pod, nominated or ""),
        }
        return 200, body

    def _dry_run(self, fwk: Framework, pod: PodInfo, nominated: str) -> dict[str, Any]:
        snapshot = self._cache.new_snapshot()
        self._cache.update_snapshot(snapshot)
        state = CycleState()
        try:
            result = schedule_pod(fwk, state, pod, snapshot, self._nominator, search=SearchState())
        except SchedulingError as exc:
            return {"result": "Error", "message": str(exc)}
        if not isinstance(result, FitError):
            return {"result": "Schedulable", "node": result.node, "preemption": None}
        return {
            "result": "Unschedulable",
            "message": result.message(),
            "nodes": [v.as_dict() for v in _verdicts(result.diagnosis.node_to_status())],
            "preemption": self._preemption(fwk, state, pod, result, snapshot, nominated),
        }

    def _preemption(
        self,
        fwk: Framework,
        state: CycleState,
        pod: PodInfo,
        fit: FitError,
        snapshot: Any,
        nominated: str,
    ) -> dict[str, Any] | None:
        plugin = next(
            (p for p in fwk.post_filter_plugins if isinstance(p, DefaultPreemption)), None
        )
        if plugin is None:
            return None
        real: Evaluator = plugin.evaluator
        evaluator = new_evaluator(
            real.args, real.own_schedulers, rand=lambda n: 0, policy=self._policy
        )
        nominator = self._nominator

        def fit_check(p: PodInfo, node: NodeLike, /) -> DryRun:
            return NodeDryRun(fwk, state, p, node, nominator)  # type: ignore[arg-type]

        evaluation = evaluator.evaluate(
            pod,
            fit.diagnosis.node_to_status(),
            snapshot,
            nominator,
            self._pdbs(),
            fit_check,
            nominated_node=nominated,
            num_all_nodes=snapshot.num_nodes,
        )
        rules = self._policy.rules_for(pod) if self._policy is not None else None
        policies = list(rules.policies) if rules is not None else []
        decision = evaluation.decision
        if decision is None:
            return {
                "node": None,
                "victims": [],
                "policies": policies,
                "message": evaluation.status.message(),
                "code": evaluation.status.code.name
                if evaluation.status.code != Code.SUCCESS
                else "Success",
            }
        return {
            "node": decision.node,
            "victims": [
                {"pod": v.key, "uid": v.uid, "priority": v.priority} for v in decision.victims
            ],
            "pdbViolations": decision.num_pdb_violations,
            "policies": policies,
            "message": "",
            "code": "Success",
        }


def http_handler(explainer: Explainer) -> Callable[[web.Request], Awaitable[web.Response]]:
    """GET /explain/{namespace}/{name} -> JSON (the server's port, read-only)."""

    async def handle(request: web.Request) -> web.Response:
        code, body = explainer.explain(request.match_info["namespace"], request.match_info["name"])
        return web.json_response(body, status=code)

    return handle
