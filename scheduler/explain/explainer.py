"""The Explainer: finds the pod, runs (or reuses) the dry run through the gate, and
builds the answer. The HTTP side (handler.py) adds access checks and paging."""

from __future__ import annotations

from collections.abc import Callable, Container, Mapping
from typing import Any

from scheduler.cache import Cache, Nominator, Snapshot
from scheduler.cache.gang_state import GangState
from scheduler.config.names import DYNAMIC_RESOURCES
from scheduler.explain.answer import NodeDetail, attempt_dict, now_dict
from scheduler.explain.attempts import AttemptLog
from scheduler.explain.evaluation import DryRunner, GroupRunFactory, Now
from scheduler.explain.gate import EvaluationGate
from scheduler.explain.group_answer import group_dict
from scheduler.explain.group_evaluation import GroupDryRun, cycle_members
from scheduler.explain.group_facts import group_facts
from scheduler.explain.pages import PageRequest, cut_page
from scheduler.framework.runtime import Framework
from scheduler.framework.status import Status
from scheduler.model.pod import PodInfo
from scheduler.plugins.dynamic_resources import DynamicResources
from scheduler.queue import QueuedPodInfo

__all__ = ["Explainer", "Refusal"]


class Refusal(Exception):
    """The pod cannot be explained: `code` 404 (unknown) or 409 (not a pending pod of
    this scheduler's profiles)."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


class Explainer:
    def __init__(
        self,
        *,
        pod_lookup: Callable[[str], PodInfo | None],  # "ns/name" -> the informer's pod
        frameworks: Mapping[str, Framework],
        cache: Cache,
        nominator: Nominator,
        attempts: AttemptLog,
        queue_of: Callable[[str], str | None],
        is_leader: Callable[[], bool] = lambda: True,
        gate: EvaluationGate[Now] | None = None,
        runner: DryRunner | None = None,
        gangs: bool = False,
        queued: Callable[[str], QueuedPodInfo[PodInfo] | None] = lambda uid: None,
    ) -> None:
        """`gangs`: GenericWorkload is on (a member of a PodGroup is explained as its
        group); `queued`: the queue's record of a pending pod (read only)."""
        self._pod_lookup = pod_lookup
        self._frameworks = frameworks
        self._nominator = nominator
        self._attempts = attempts
        self._queue_of = queue_of
        self._cache = cache
        self._gangs = gangs
        self._queued = queued
        self._is_leader = is_leader
        self.gate: EvaluationGate[Now] = gate if gate is not None else EvaluationGate()
        self.runner = runner if runner is not None else DryRunner(cache, nominator)

    def find(self, namespace: str, name: str) -> PodInfo:
        """The pending pod of one of this scheduler's profiles; raises Refusal."""
        key = f"{namespace}/{name}"
        pod = self._pod_lookup(key)
        if pod is None:
            raise Refusal(404, f"pod {key} not found in the scheduler's cache")
        if pod.scheduler_name not in self._frameworks:
            raise Refusal(
                409,
                f"pod {key} has schedulerName {pod.scheduler_name!r},"
                f" not one of this scheduler's profiles ({', '.join(sorted(self._frameworks))})",
            )
        if pod.node_name:
            raise Refusal(409, f"pod {key} is not pending: bound to node {pod.node_name}")
        return pod

    async def now(self, pod: PodInfo) -> Now:
        """The dry run for `pod`, kept or joined by the gate; raises gate.Busy."""
        fwk = self._frameworks[pod.scheduler_name]
        group = self._group_run(fwk, pod) if self._gangs and pod.pod_group else None
        return await self.gate.run(
            (pod.uid, pod.resource_version), lambda: self.runner.evaluate(fwk, pod, group)
        )

    def _group_run(self, fwk: Framework, pod: PodInfo) -> GroupRunFactory:
        """The group's dry run, its facts read from the cache and the queue when it
        starts (after the snapshot's refresh)."""

        def make(snapshot: Snapshot) -> GroupDryRun:
            gang = self._cache.gang(pod.namespace, pod.pod_group) or GangState()
            facts = group_facts(pod, gang, fwk, self._queue_of)
            members = cycle_members(pod, gang, self._queue_of, self._queued)
            return GroupDryRun(
                fwk, pod, facts, gang, members, snapshot, self._nominator, self._cache.gang
            )

        return make

    def _node_detail(self, pod: PodInfo) -> NodeDetail:
        """DynamicResources' account of a node it rejected: the pod's requests and the
        node's devices (`devices` in the node's entry)."""
        fwk = self._frameworks.get(pod.scheduler_name)
        plugin = (
            fwk.plugin(DYNAMIC_RESOURCES) if fwk and fwk.has_plugin(DYNAMIC_RESOURCES) else None
        )
        if not isinstance(plugin, DynamicResources) or not pod.resource_claims:
            return lambda node, status: None

        def detail(node: str, status: Status) -> dict[str, Any] | None:
            info = self._cache.node(node)
            if status.plugin != DYNAMIC_RESOURCES or info is None:
                return None
            return {"devices": plugin.explain_node(pod, node, info.labels)}

        return detail

    def answer(
        self,
        pod: PodInfo,
        now: Now,
        page: PageRequest | None,
        readable: Container[str] | None = None,
    ) -> dict[str, Any]:
        """The JSON body. `page`: the per-node lists' page (None: no lists);
        `readable`: the namespaces whose victims may be named (None: all)."""
        attempt = self._attempts.get(pod.uid)
        nominated = self._nominator.nominated_node(pod) or pod.nominated_node_name or None
        node_page = None
        if page is not None:
            lists = [attempt.statuses if attempt is not None else None, now.statuses]
            node_page = cut_page(pod.uid, page, lists)
        body: dict[str, Any] = {
            "pod": pod.key,
            "uid": pod.uid,
            # a follower schedules nothing: it has no attempts to show (through the
            # Service the answer may come from one)
            "leader": self._is_leader(),
            "schedulerName": pod.scheduler_name,
            "priority": pod.priority,
            "queue": self._queue_of(pod.uid),
            "schedulingGates": list(pod.scheduling_gates),
            "nominatedNode": nominated,
            "lastAttempt": attempt_dict(attempt, node_page) if attempt is not None else None,
            "now": now_dict(now, node_page, readable, self._node_detail(pod)),
        }
        if now.group is not None:
            body["podGroup"] = group_dict(now.group, readable)
        if node_page is not None:
            body["metadata"] = {
                "continue": node_page.next_token,
                "remainingNodes": node_page.remaining,
            }
        return body
