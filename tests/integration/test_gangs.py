"""Gangs end to end (GenericWorkload): a real API server serving scheduling.k8s.io/v1beta1
PodGroups, kwok nodes, the scheduler run with --feature-gates=GenericWorkload=true.

- a gang that fits is bound whole;
- a gang that cannot reach minCount binds nothing, and each member says why in
  upstream's words (schedule_one_podgroup.go): the one that fitted on its own gets the
  group's reason, the one that fitted nowhere its own, the one never tried the group's
  verdict as it stood when the cycle stopped;
- members wait silently (PreEnqueue, no condition) until minCount of them exist, and
  until their PodGroup exists; then they are placed;
- a gang preempts lower-priority pods and binds whole;
- a single pod preempting one member of an all-members group deletes every member;
- an all-members victim group one of whose members' DELETE an admission webhook refuses
  loses no member while the refusal holds (the scheduler dry-runs every member's DELETE
  first), and goes whole once it is allowed, for a gang and for a single pod preempting;
- a member whose DELETE is refused only after its sibling's went (the verdict changed
  after the dry runs) is retried in the background until it is gone too.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kas_dev.cluster.nodes import NodeGroup
from tests.kube import ClusterHandle, pod_manifest, wait_for
from tests.preemption_helpers import PodWatch, disruption_target
from tests.scheduler_process import SchedulerProcess, write_config
from tests.webhook import KWOK_USER, DeleteWebhook

pytestmark = pytest.mark.cluster

GATE = "--feature-gates=GenericWorkload=true"


def _pod_group(cluster: ClusterHandle, ns: str, name: str, policy: dict[str, Any]) -> None:
    cluster.api(
        "POST",
        f"/apis/scheduling.k8s.io/v1beta1/namespaces/{ns}/podgroups",
        {
            "apiVersion": "scheduling.k8s.io/v1beta1",
            "kind": "PodGroup",
            "metadata": {"name": name},
            "spec": {"schedulingPolicy": policy},
        },
    )


def _with_classes(
    make_cluster: Callable[..., ClusterHandle],
    tmp_path: Path,
    namespace: str,
    classes: dict[str, int],
) -> tuple[ClusterHandle, str, SchedulerProcess]:
    """Two 4-cpu nodes with the gate, a namespace, these PriorityClasses, and the
    scheduler started with the gate."""
    cluster = make_cluster([NodeGroup(2, cpu="4")], generic_workload=True)
    ns = cluster.create_namespace(namespace)
    for name, value in classes.items():
        cluster.api(
            "POST",
            "/apis/scheduling.k8s.io/v1/priorityclasses",
            {"metadata": {"name": name}, "value": value},
        )
    sched = SchedulerProcess(
        cluster.kubeconfig,
        write_config(tmp_path / "config.yaml"),
        tmp_path / "scheduler.log",
        extra_args=[GATE],
    )
    sched.start()
    return cluster, ns, sched


def _gang_of(
    cluster: ClusterHandle, ns: str, group: str, spec: dict[str, Any], members: int, cpu: str
) -> None:
    """A PodGroup with `spec` and its members, each of `cpu` and of the group's class."""
    cluster.api(
        "POST",
        f"/apis/scheduling.k8s.io/v1beta1/namespaces/{ns}/podgroups",
        {
            "apiVersion": "scheduling.k8s.io/v1beta1",
            "kind": "PodGroup",
            "metadata": {"name": group},
            "spec": spec,
        },
    )
    for i in range(members):
        pod = pod_manifest(f"{group}-{i}", cpu=cpu, priority_class=spec["priorityClassName"])
        pod["spec"]["schedulingGroup"] = {"podGroupName": group}
        cluster.create_pod(ns, pod)


def _pair_bound_one_a_node(
    cluster: ClusterHandle, ns: str, group: str, sched: SchedulerProcess, why: str
) -> None:
    """Members 0 and 1 of `group` are bound, one on each kwok node."""
    for i in range(2):
        wait_for(
            lambda i=i: _node(cluster, ns, f"{group}-{i}"), timeout=90,
            what=f"{group}-{i} bound{why}\n{sched.tail()}",
        )  # fmt: skip
    assert {_node(cluster, ns, f"{group}-0"), _node(cluster, ns, f"{group}-1")} == {
        "kwok-node-0", "kwok-node-1",
    }  # fmt: skip


def _all_members_pair(cluster: ClusterHandle, ns: str, sched: SchedulerProcess) -> None:
    """The PodGroup `pair` (disruptionMode all, class unit-low) and its two 3-cpu
    members, bound one on each kwok node."""
    spec = {
        "schedulingPolicy": {"gang": {"minCount": 2}},
        "disruptionMode": {"all": {}},
        "priorityClassName": "unit-low",
    }
    _gang_of(cluster, ns, "pair", spec, 2, "3")
    _pair_bound_one_a_node(cluster, ns, "pair", sched, "")


def _pair_gone(cluster: ClusterHandle, ns: str, sched: SchedulerProcess) -> None:
    wait_for(
        lambda: all(cluster.get_pod(ns, f"pair-{i}") is None for i in range(2)),
        timeout=60,
        what=f"both members of pair deleted\n{sched.tail()}",
    )


def _member(cluster: ClusterHandle, ns: str, name: str, group: str, cpu: str) -> None:
    pod = pod_manifest(name, cpu=cpu)
    pod["spec"]["schedulingGroup"] = {"podGroupName": group}
    cluster.create_pod(ns, pod)


def _node(cluster: ClusterHandle, ns: str, name: str) -> str:
    return str((cluster.get_pod(ns, name) or {}).get("spec", {}).get("nodeName") or "")


def _condition(cluster: ClusterHandle, ns: str, name: str) -> dict[str, Any] | None:
    pod = cluster.get_pod(ns, name) or {}
    for c in pod.get("status", {}).get("conditions") or []:
        if c.get("type") == "PodScheduled":
            return dict(c)
    return None


def _group_condition(cluster: ClusterHandle, ns: str, name: str) -> dict[str, Any] | None:
    body = cluster.api("GET", f"/apis/scheduling.k8s.io/v1beta1/namespaces/{ns}/podgroups/{name}")
    for c in (body or {}).get("status", {}).get("conditions") or []:
        if c.get("type") == "PodGroupInitiallyScheduled":
            return dict(c)
    return None


def test_gangs_are_placed_all_or_nothing(
    make_cluster: Callable[..., ClusterHandle], tmp_path: Path
) -> None:
    cluster = make_cluster([NodeGroup(2, cpu="4")], generic_workload=True)
    ns = cluster.create_namespace("gangs")
    sched = SchedulerProcess(
        cluster.kubeconfig,
        write_config(tmp_path / "config.yaml"),
        tmp_path / "scheduler.log",
        extra_args=[GATE],
    )
    sched.start()
    try:
        # a gang that fits: all three bound
        _pod_group(cluster, ns, "fits", {"gang": {"minCount": 3}})
        for i in range(3):
            _member(cluster, ns, f"fits-{i}", "fits", "1")
        for i in range(3):
            wait_for(
                lambda i=i: _node(cluster, ns, f"fits-{i}"), timeout=60,
                what=f"fits-{i} bound\n{sched.tail()}",
            )  # fmt: skip

        # 5 cpu left on two nodes (2 + 3): one 3-cpu member fits, three do not
        _pod_group(cluster, ns, "big", {"gang": {"minCount": 3}})
        for i in range(3):
            _member(cluster, ns, f"big-{i}", "big", "3")
        conds: dict[str, dict[str, Any]] = {}
        for i in range(3):
            conds[f"big-{i}"] = wait_for(
                lambda i=i: _condition(cluster, ns, f"big-{i}"), timeout=60,
                what=f"big-{i} told\n{sched.tail()}",
            )  # fmt: skip
        assert all(c["status"] == "False" and c["reason"] == "Unschedulable" for c in conds.values())
        group_reason = (
            "minCount (3) cannot be satisfied: 1 scheduled, 1 remaining, "
            "pod group preemption: No preemption victims found for incoming preemptor"
        )
        assert conds["big-0"]["message"] == f"pod group is unschedulable, {group_reason}"
        assert conds["big-1"]["message"] == "0/2 nodes are available: 2 Insufficient cpu."
        untried = "minCount (3) cannot be satisfied: 1 scheduled, 1 remaining"
        assert conds["big-2"]["message"] == untried
        assert not any(_node(cluster, ns, f"big-{i}") for i in range(3))
        # the PodGroups say it too (PodGroupInitiallyScheduled, upstream's words)
        placed = wait_for(
            lambda: _group_condition(cluster, ns, "fits"), timeout=30, what="fits' condition"
        )
        assert (placed["status"], placed["reason"], placed["message"]) == ("True", "Scheduled", "")
        pending = wait_for(
            lambda: _group_condition(cluster, ns, "big"), timeout=30, what="big's condition"
        )
        assert (pending["status"], pending["reason"]) == ("False", "Unschedulable")
        assert pending["message"] == (
            "minCount (3) cannot be satisfied: 1 scheduled, 1 remaining, "
            "pod group preemption: No preemption victims found for incoming preemptor"
        )

        # one member of a gang of two waits, silent, until the second exists
        _pod_group(cluster, ns, "pair", {"gang": {"minCount": 2}})
        _member(cluster, ns, "pair-0", "pair", "100m")
        # a basic group's member waits for its PodGroup
        _member(cluster, ns, "solo-0", "later", "100m")
        # a plain pod created after them is bound: the waiting members were looked at
        cluster.create_pod(ns, pod_manifest("marker"))
        wait_for(
            lambda: _node(cluster, ns, "marker"), timeout=60, what=f"marker bound\n{sched.tail()}"
        )
        for name in ("pair-0", "solo-0"):
            assert _node(cluster, ns, name) == ""
            assert _condition(cluster, ns, name) is None
        _member(cluster, ns, "pair-1", "pair", "100m")
        _pod_group(cluster, ns, "later", {"basic": {}})
        for name in ("pair-0", "pair-1", "solo-0"):
            wait_for(
                lambda name=name: _node(cluster, ns, name), timeout=60,
                what=f"{name} bound\n{sched.tail()}",
            )  # fmt: skip
        # the failed gang is still whole-or-nothing after its retries
        assert not any(_node(cluster, ns, f"big-{i}") for i in range(3))
    finally:
        sched.stop()


def test_a_gang_preempts_lower_priority_pods_and_binds_whole(
    make_cluster: Callable[..., ClusterHandle], tmp_path: Path
) -> None:
    # two 4-cpu nodes full of 2-cpu low-priority pods; a high-priority gang of two 3-cpu
    # members fits only once both pods of each node are gone: one pod-group preemption
    # decides all four victims, a background task deletes them, the gang binds whole
    cluster, ns, sched = _with_classes(
        make_cluster, tmp_path, "gang-preempts", {"gang-low": 10, "gang-high": 1000}
    )
    try:
        for i in range(4):
            cluster.create_pod(ns, pod_manifest(f"filler-{i}", cpu="2", priority_class="gang-low"))
        for i in range(4):
            wait_for(
                lambda i=i: _node(cluster, ns, f"filler-{i}"), timeout=60,
                what=f"filler-{i} bound\n{sched.tail()}",
            )  # fmt: skip
        spec = {"schedulingPolicy": {"gang": {"minCount": 2}}, "priorityClassName": "gang-high"}
        _gang_of(cluster, ns, "urgent", spec, 2, "3")
        _pair_bound_one_a_node(cluster, ns, "urgent", sched, " after the preemption")
        # every filler was a victim, and the first verdict named them all
        assert all(cluster.get_pod(ns, f"filler-{i}") is None for i in range(4))
        preempted = [e for e in cluster.events(ns) if e.get("reason") == "Preempted"]
        assert len({e["regarding"]["name"] for e in preempted}) == 4
        assert all(e["note"].startswith("Preempted by podgroup ") for e in preempted)
        assert all(e["note"].endswith(" on node cluster") for e in preempted)
        placed = wait_for(
            lambda: _group_condition(cluster, ns, "urgent"), timeout=30, what="urgent's condition"
        )
        assert placed["status"] == "True"
    finally:
        sched.stop()


def test_a_single_pod_preempting_one_member_of_an_all_members_group_deletes_the_group(
    make_cluster: Callable[..., ClusterHandle], tmp_path: Path
) -> None:
    # two 4-cpu nodes, a PodGroup with disruptionMode all whose two 3-cpu members run one
    # a node; a high-priority single pod of 2 cpu needs one member's node: with the gate
    # its DefaultPreemption takes the group as one unit (upstream getCrossNodesVictims),
    # and both members are deleted, the one on the other node too
    cluster, ns, sched = _with_classes(
        make_cluster, tmp_path, "unit-victims", {"unit-low": 10, "unit-high": 1000}
    )
    try:
        _all_members_pair(cluster, ns, sched)
        cluster.create_pod(ns, pod_manifest("urgent", cpu="2", priority_class="unit-high"))
        node = wait_for(
            lambda: _node(cluster, ns, "urgent"), timeout=90,
            what=f"urgent bound after the preemption\n{sched.tail()}",
        )  # fmt: skip
        _pair_gone(cluster, ns, sched)
        preempted = [e for e in cluster.events(ns) if e.get("reason") == "Preempted"]
        assert {e["regarding"]["name"] for e in preempted} == {"pair-0", "pair-1"}
        assert all(e["note"].startswith("Preempted by pod ") for e in preempted)
        # one decision, for one candidate node, named in both events (the member on the
        # other node included); the preemptor binds where room appears first, which may
        # be that other node when its member leaves first
        assert len({e["note"] for e in preempted}) == 1
        assert preempted[0]["note"].rsplit(" ", 1)[-1] in ("kwok-node-0", "kwok-node-1")
        assert node in ("kwok-node-0", "kwok-node-1")
    finally:
        sched.stop()


@pytest.mark.parametrize("preemptor", ["gang", "pod"])
def test_an_all_members_group_whose_member_may_not_be_deleted_loses_no_member(
    make_cluster: Callable[..., ClusterHandle], tmp_path: Path, preemptor: str
) -> None:
    # two 4-cpu nodes, an all-members pair of 3-cpu members one a node; the preemptor (a
    # gang of two 3-cpu members, or one 2-cpu pod) needs the pair gone. A webhook refuses
    # the DELETE of pair-1 only: upstream would delete pair-0 and leave pair-1 running.
    # Here every member's DELETE is dry-run first, so neither member is touched (no
    # DisruptionTarget, no deletionTimestamp) while the refusal holds; allowed, both go
    # and the preemptor binds.
    cluster, ns, sched = _with_classes(
        make_cluster, tmp_path, f"torn-{preemptor}", {"unit-low": 10, "unit-high": 1000}
    )
    hook = DeleteWebhook(cluster, ns)
    watch: PodWatch | None = None
    try:
        _all_members_pair(cluster, ns, sched)
        hook.start()
        hook.refuse = {"pair-1"}
        watch = PodWatch(cluster, ns).start()
        if preemptor == "gang":
            high = {"schedulingPolicy": {"gang": {"minCount": 2}}, "priorityClassName": "unit-high"}
            _gang_of(cluster, ns, "urgent", high, 2, "3")
            bound = ["urgent-0", "urgent-1"]
        else:
            cluster.create_pod(ns, pod_manifest("urgent", cpu="2", priority_class="unit-high"))
            bound = ["urgent"]
        # refused, and refused again on a retry: two preemption attempts at least (a dry
        # run here; a scheduler that deleted at once would meet it with its real DELETE)
        wait_for(
            lambda: hook.dry_run_refused["pair-1"] + hook.refused["pair-1"] >= 2, timeout=90,
            what=f"pair-1's DELETE refused twice\n{sched.tail()}",
        )  # fmt: skip
        for name in ("pair-0", "pair-1"):
            versions = [obj for _, obj in watch.history(name)]
            assert versions and not watch.deleted(name), name
            assert not any(v["metadata"].get("deletionTimestamp") for v in versions), name
            assert not any(disruption_target(v) for v in versions), name
        assert hook.deletes["pair-0"] == 0 and hook.deletes["pair-1"] == 0  # no real DELETE
        assert hook.dry_runs["pair-0"] >= 1  # its sibling's dry run passed, and no more
        assert not any(_node(cluster, ns, name) for name in bound)
        assert sched.metric("scheduler_preemption_unit_preflights_total", result="refused") >= 2

        hook.refuse = set()
        for name in bound:
            wait_for(
                lambda name=name: _node(cluster, ns, name), timeout=120,
                what=f"{name} bound once the DELETEs are allowed\n{sched.tail()}",
            )  # fmt: skip
        _pair_gone(cluster, ns, sched)
        assert hook.deletes["pair-0"] >= 1 and hook.deletes["pair-1"] >= 1
        assert sched.metric("scheduler_preemption_unit_preflights_total", result="passed") >= 1
        # nothing was torn, so nothing was retried in the background
        assert sched.metric("scheduler_preemption_unit_member_retries_total") == 0
    finally:
        if watch is not None:
            watch.stop()
        hook.stop()
        sched.stop()


class RefusedAfterTheFirst(DeleteWebhook):
    """Admits the first real DELETE of a member of `pair`, then refuses the others' (dry
    runs included) until `refuse` is emptied: a verdict that changed between the
    scheduler's dry runs and its DELETEs."""

    pair = frozenset({"pair-0", "pair-1"})
    first = ""

    def _review(self, body: dict[str, Any]) -> dict[str, Any]:
        req = body["request"]
        name = req.get("name", "")
        user = req.get("userInfo", {}).get("username", "")
        if name in self.pair and not req.get("dryRun") and user != KWOK_USER and not self.first:
            self.first = name
            self.refuse = set(self.pair - {name})
        return super()._review(body)


def test_a_member_refused_after_its_sibling_went_is_retried_until_it_is_gone(
    make_cluster: Callable[..., ClusterHandle], tmp_path: Path
) -> None:
    cluster, ns, sched = _with_classes(
        make_cluster, tmp_path, "torn-repair", {"unit-low": 10, "unit-high": 1000}
    )
    hook = RefusedAfterTheFirst(cluster, ns)
    try:
        _all_members_pair(cluster, ns, sched)
        hook.start()
        cluster.create_pod(ns, pod_manifest("urgent", cpu="2", priority_class="unit-high"))
        # the first member's DELETE went through; its sibling's is refused by the task
        # and at least once more by the background retries
        wait_for(
            lambda: hook.first and hook.refused[next(iter(hook.pair - {hook.first}))] >= 2,
            timeout=90, what=f"the survivor's DELETE refused twice\n{sched.tail()}",
        )  # fmt: skip
        survivor = next(iter(hook.pair - {hook.first}))
        pod = cluster.get_pod(ns, survivor)
        assert pod is not None and not pod["metadata"].get("deletionTimestamp")
        assert sched.metric("scheduler_preemption_unit_member_retries_total", result="failed") >= 1
        # the preemptor needed one node only: it may bind on the first member's node
        wait_for(
            lambda: _node(cluster, ns, "urgent"), timeout=90,
            what=f"urgent bound\n{sched.tail()}",
        )  # fmt: skip
        hook.refuse = set()
        _pair_gone(cluster, ns, sched)
        repaired = sum(
            sched.metric("scheduler_preemption_unit_member_retries_total", result=r)
            for r in ("deleted", "gone")
        )
        assert repaired == 1
        assert sched.metric("scheduler_preemption_unit_member_retries_total", result="abandoned") == 0
        torn = [line for line in sched.log_path.read_text().splitlines() if "group torn" in line]
        assert len(torn) == 1 and "WARNING" in torn[0].upper(), torn  # once per unit
    finally:
        hook.stop()
        sched.stop()
