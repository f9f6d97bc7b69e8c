"""The cache's count of each PodGroup's members (upstream podgroupstate.go): pending
members reported by the pod handler, assume/forget by the cycle, binds and deletes by
the informer, PodGroup objects arriving before or after their pods."""

from __future__ import annotations

import dataclasses

from scheduler.cache import Cache
from scheduler.model.pod import PodInfo
from scheduler.model.pod_group import PodGroupInfo
from tests.unit.helpers.builders import make_node, make_pod
from tests.unit.helpers.fake_clock import FakeClock

GROUP = PodGroupInfo(namespace="default", name="g", policy="gang", min_count=2)


def _member(name: str) -> PodInfo:
    return dataclasses.replace(make_pod(name).container(cpu="100m").obj(), pod_group="g")


def _counts(cache: Cache) -> tuple[int, int, int, int]:
    state = cache.gang("default", "g")
    assert state is not None
    return (state.all_count, len(state.unscheduled), len(state.assumed), len(state.assigned))


def test_members_move_through_unscheduled_assumed_and_assigned() -> None:
    cache = Cache()
    cache.add_node(make_node("n0").obj())
    a, b = _member("a"), _member("b")
    cache.add_gang_member(a)
    cache.add_gang_member(b)
    assert cache.gang("default", "g").pod_group is None  # type: ignore[union-attr]
    assert _counts(cache) == (2, 2, 0, 0)
    assumed = cache.assume_pod(a, "n0")
    assert _counts(cache) == (2, 1, 1, 0)
    cache.forget_pod(assumed)
    assert _counts(cache) == (2, 2, 0, 0)
    cache.assume_pod(a, "n0")
    # the informer confirms the bind
    cache.add_pod(dataclasses.replace(a, node_name="n0"))
    assert _counts(cache) == (2, 1, 0, 1)
    assert cache.gang("default", "g").scheduled_count == 1  # type: ignore[union-attr]
    # b bound by someone else, then deleted
    cache.add_pod(dataclasses.replace(b, node_name="n0"))
    assert _counts(cache) == (2, 0, 0, 2)
    cache.remove_pod(dataclasses.replace(b, node_name="n0"))
    assert _counts(cache) == (1, 0, 0, 1)


def test_a_group_lives_while_its_object_or_any_member_is_known() -> None:
    cache = Cache()
    cache.set_pod_group(GROUP)
    assert cache.gang("default", "g") is not None
    a = _member("a")
    cache.add_gang_member(a)
    cache.remove_pod_group(GROUP)
    assert cache.gang("default", "g") is not None  # a member still names it
    cache.remove_gang_member(a)
    assert cache.gang("default", "g") is None
    # a pod of no group is never counted
    cache.add_gang_member(make_pod("solo").obj())
    assert cache.gang("default", "") is None


def test_a_member_deleted_while_assumed_leaves_when_its_assumption_is_undone() -> None:
    # the Permit-waiting case: the deletion arrives first, the binding task forgets later
    clock = FakeClock()
    cache = Cache(clock, ttl=30.0)
    cache.add_node(make_node("n0").obj())
    a, b = _member("a"), _member("b")
    cache.add_gang_member(a)
    cache.add_gang_member(b)
    assumed = cache.assume_pod(a, "n0")
    cache.remove_gang_member(a)
    assert _counts(cache) == (2, 1, 1, 0)  # still held by its cycle
    cache.forget_pod(assumed)
    assert _counts(cache) == (1, 1, 0, 0)  # gone, not back to unscheduled
    # an expired assumption of a deleted member leaves the same way
    assumed_b = cache.assume_pod(b, "n0")
    cache.finish_binding(assumed_b)
    cache.remove_gang_member(b)
    clock.advance(31.0)
    assert [p.uid for p in cache.cleanup_assumed_pods()] == [b.uid]
    assert cache.gang("default", "g") is None
