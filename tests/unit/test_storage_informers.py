"""Storage informer events reach the queue: a pod VolumeBinding rejected moves when its
claim appears or a class's allowedTopologies change, and stays for anything else (the
plugins' queueing hints, as upstream's)."""

from __future__ import annotations

import asyncio

from scheduler.framework import Handle, InMemoryListers
from scheduler.framework.cluster_event import EventResource
from scheduler.model.volume import pvc_from_dict, storage_class_from_dict
from scheduler.queue import SchedulingQueue
from scheduler.storage_informers import StorageFeed
from tests.unit.helpers.builders import make_framework, make_pod
from tests.unit.helpers.fake_clock import FakeClock


def _pvc(name: str) -> dict[str, object]:
    return {"metadata": {"name": name, "namespace": "default", "resourceVersion": "1"},
            "spec": {"storageClassName": "local"}}  # fmt: skip


def _sc(zones: list[str]) -> dict[str, object]:
    return {"metadata": {"name": "local"}, "volumeBindingMode": "WaitForFirstConsumer",
            "provisioner": "x", "allowedTopologies": [{"matchLabelExpressions": [
                {"key": "topology.kubernetes.io/zone", "values": zones}]}]}  # fmt: skip


async def test_claim_and_class_events_requeue_only_the_pods_they_can_help() -> None:
    ls = InMemoryListers()
    fw = make_framework(handle=Handle.from_listers(ls))
    q: SchedulingQueue = SchedulingQueue(  # type: ignore[type-arg]
        events_to_register=fw.events_to_register(), clock=FakeClock(1000.0)
    )
    pvcs = StorageFeed(EventResource.PVC, ls.set_pvc, lambda o: None, lambda: q)
    classes = StorageFeed(
        EventResource.STORAGE_CLASS, ls.set_storage_class, lambda o: None, lambda: q
    )
    q.add(make_pod("p").pvc("c").obj())
    q.add(make_pod("q").pvc("d").obj())
    for _ in range(2):
        info = await asyncio.wait_for(q.pop(), timeout=1)
        assert info is not None
        q.add_unschedulable_if_not_present(info, {"VolumeBinding"}, q.scheduling_cycle)
        q.done(info.uid)
    assert q.statistics().unschedulable == 2

    pvcs.on_add(pvc_from_dict(_pvc("other")))  # nobody's claim
    assert q.statistics().unschedulable == 2
    pvcs.on_add(pvc_from_dict(_pvc("c")))  # p's claim: p moves, q stays
    assert q.statistics().unschedulable == 1
    assert ls.get_pvc("default", "c") is not None

    old = storage_class_from_dict(_sc(["z1"]))
    classes.on_update(old, storage_class_from_dict(_sc(["z1"])))  # nothing that matters
    assert q.statistics().unschedulable == 1
    classes.on_update(old, storage_class_from_dict(_sc(["z1", "z2"])))
    assert q.statistics().unschedulable == 0
