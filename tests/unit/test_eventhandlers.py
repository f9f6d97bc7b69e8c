"""Informer events routed into the cache, queue and nominator (real objects, no cluster)."""

from __future__ import annotations

import pytest

from scheduler.cache import Cache, Nominator
from scheduler.eventhandlers import NodeEventHandler, PodEventHandler
from scheduler.model import PodInfo
from scheduler.queue import ACTIVE, UNSCHEDULABLE, SchedulingQueue
from tests.unit.helpers.builders import make_node, make_pod
from tests.unit.helpers.fake_clock import FakeClock

SCHED = "kube-async-scheduler"


def _setup() -> tuple[FakeClock, Cache, SchedulingQueue[PodInfo], Nominator, PodEventHandler]:
    clock = FakeClock()
    cache = Cache(clock)
    queue: SchedulingQueue[PodInfo] = SchedulingQueue(
        clock=clock, pod_initial_backoff=10, pod_max_backoff=10
    )
    nominator = Nominator()
    pods = PodEventHandler(cache, queue, nominator, [SCHED])
    NodeEventHandler(cache, queue).on_add(
        make_node("n1").capacity(cpu="4", memory="8Gi", pods=110).obj()
    )
    return clock, cache, queue, nominator, pods


async def _fail_once(queue: SchedulingQueue[PodInfo], uid: str) -> None:
    info = await queue.pop()
    assert info is not None and info.pod.uid == uid
    queue.add_unschedulable_if_not_present(info, ["NodeResourcesFit"], queue.scheduling_cycle)
    queue.done(uid)


@pytest.mark.parametrize(
    ("victim_priority", "preemptor_scheduler", "expect"),
    [
        (0, SCHED, ACTIVE),  # the room it waits for: tried at once, no backoff
        (200, SCHED, UNSCHEDULABLE),  # a pod of higher priority left: nothing special
        (0, "other-scheduler", None),  # not ours: never in our queue
    ],
)
async def test_a_nominee_is_activated_when_a_lower_priority_pod_leaves_its_node(
    victim_priority: int, preemptor_scheduler: str, expect: str | None
) -> None:
    _, _, queue, nominator, handler = _setup()
    victim = (
        make_pod("victim")
        .scheduler("x")
        .node("n1")
        .priority(victim_priority)
        .requests(cpu="3")
        .obj()
    )
    handler.on_add(victim)
    preemptor = (
        make_pod("preemptor").scheduler(preemptor_scheduler).priority(100).requests(cpu="3").obj()
    )
    handler.on_add(preemptor)
    if expect is not None:
        # an attempt that just failed: it sits with the unschedulable pods, its 10 s
        # backoff running
        await _fail_once(queue, preemptor.uid)
    nominator.add(preemptor, "n1")
    handler.on_delete(victim)
    assert queue.where(preemptor.uid) == expect


def test_a_pod_bound_elsewhere_leaves_the_queue_and_counts_in_the_cache() -> None:
    _, cache, queue, nominator, handler = _setup()
    pod = make_pod("p").scheduler(SCHED).requests(cpu="1").nominated("n1").obj()
    handler.on_add(pod)
    assert queue.where(pod.uid) == ACTIVE and nominator.nominated_node(pod) == "n1"
    bound = make_pod("p").uid(pod.uid).scheduler(SCHED).requests(cpu="1").node("n1").obj()
    handler.on_update(pod, bound)
    assert queue.where(pod.uid) is None
    assert nominator.nominated_node(pod) is None
    assert cache.get_pod(pod.uid) is not None


def test_a_pending_pod_that_starts_terminating_stays_queued_as_upstreams() -> None:
    """upstream updatePodInSchedulingQueue updates it in the queue; skipPodSchedule skips
    it with an event when popped (tests/unit/test_loop.py); it leaves the queue
    when deleted."""
    _, _, queue, _, handler = _setup()
    pod = make_pod("p").scheduler(SCHED).obj()
    handler.on_add(pod)
    terminating = make_pod("p").uid(pod.uid).scheduler(SCHED).terminating().obj()
    handler.on_update(pod, terminating)
    assert queue.where(pod.uid) == "active"
    handler.on_delete(terminating)
    assert queue.where(pod.uid) is None


def test_a_pod_with_resource_claims_is_refused_once_and_never_queued() -> None:
    _, _, queue, _, handler = _setup()
    refused: list[tuple[str, str]] = []
    handler.on_refused = lambda pod, why: refused.append((pod.key, why))
    pod = make_pod("dra").scheduler(SCHED).resource_claim("gpu").obj()
    handler.on_add(pod)
    assert queue.where(pod.uid) is None
    assert refused == [
        (
            "default/dra",
            "pod has resource claims (spec.resourceClaims: gpu); dynamic resource allocation "
            "is off in this scheduler (--feature-gates=DynamicResourceAllocation=true turns it on)",
        )
    ]
    # our own PodScheduled=False patch comes back as an update: no second refusal
    patched = make_pod("dra").uid(pod.uid).scheduler(SCHED).resource_claim("gpu")
    handler.on_update(pod, patched.condition("PodScheduled", "False", "Unschedulable").obj())
    assert len(refused) == 1
    # another scheduler's pod is none of our business
    other = make_pod("theirs").scheduler("default-scheduler").resource_claim("gpu").obj()
    handler.on_add(other)
    assert len(refused) == 1


def test_a_bound_pod_with_claims_or_unreadable_parts_still_counts_on_its_node() -> None:
    _, cache, _, _, handler = _setup()
    dra = make_pod("dra").scheduler("x").node("n1").requests(cpu="1").resource_claim("gpu")
    raw = make_pod("odd").scheduler("x").node("n1").requests(cpu="2").host_port(80).raw()
    raw["spec"]["tolerations"] = "everything"  # JSON the API server never stores
    from scheduler.model import pod_from_dict

    odd = pod_from_dict(raw)
    assert odd.problems
    handler.on_add(dra.obj())
    handler.on_add(odd)
    node = cache.new_snapshot().get("n1")
    assert node is not None
    assert node.requested["cpu"] == 3000
    assert [hp.port for hp in node.used_ports] == [80]


def test_a_pending_pod_that_becomes_unreadable_leaves_the_queue_and_is_told() -> None:
    _, _, queue, _, handler = _setup()
    refused: list[str] = []
    handler.on_refused = lambda pod, why: refused.append(why)
    pod = make_pod("p").scheduler(SCHED).obj()
    handler.on_add(pod)
    assert queue.where(pod.uid) == ACTIVE
    raw = make_pod("p").uid(pod.uid).scheduler(SCHED).raw()
    raw["spec"]["nodeSelector"] = ["not", "a", "map"]
    from scheduler.model import pod_from_dict

    handler.on_update(pod, pod_from_dict(raw))
    assert queue.where(pod.uid) is None
    assert len(refused) == 1 and "spec.nodeSelector" in refused[0]


def test_another_schedulers_nomination_reserves_nothing_here() -> None:
    # upstream's nominator holds only pods of its own profiles (found by the oracle: a
    # pod nominated by kube-scheduler made this scheduler report "Too many pods")
    _, _, _, nominator, handler = _setup()
    theirs = make_pod("t").scheduler("default-scheduler").nominated("n1").obj()
    handler.on_add(theirs)
    assert nominator.nominated_node(theirs) is None
    renominated = make_pod("t").scheduler("default-scheduler").nominated("n2").obj()
    handler.on_update(theirs, renominated)
    assert nominator.nominated_pods_for_node("n2") == []
    ours = make_pod("o").scheduler(SCHED).nominated("n1").obj()
    handler.on_add(ours)
    assert nominator.nominated_node(ours) == "n1"


def test_a_deleted_pod_in_binding_frees_its_node_at_once() -> None:
    # upstream handleAssumedPodDeletion: the assumption is dropped on the delete event,
    # not when the bind later fails; one waiting at Permit is rejected instead
    _, cache, _, _, handler = _setup()
    pod = make_pod("binding").scheduler(SCHED).container(cpu="3").obj()
    handler.on_add(pod)
    cache.assume_pod(pod, "n1")
    assert cache.node_count() == 1 and cache.is_assumed(pod)
    handler.on_delete(pod)
    assert not cache.is_assumed(pod) and cache.get_pod(pod.uid) is None
    rejected: list[str] = []
    handler.reject_waiting = lambda uid: rejected.append(uid) is None
    waiting = make_pod("waiting").scheduler(SCHED).obj()
    handler.on_add(waiting)
    cache.assume_pod(waiting, "n1")
    handler.on_delete(waiting)
    # rejected at Permit: its binding task undoes the assumption itself
    assert rejected == [waiting.uid] and cache.is_assumed(waiting)
