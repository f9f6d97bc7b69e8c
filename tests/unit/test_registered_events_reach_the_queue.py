"""Every resource a plugin registers cluster events for (EnqueueExtensions) is watched by
an informer whose handler reports those events to the scheduling queue: otherwise a pod
rejected by that plugin would wait for an unrelated event or the 5-minute flush."""

from __future__ import annotations

from scheduler.app import RunOptions, SchedulerApp
from scheduler.catalog import default_config
from scheduler.eventhandlers import NodeEventHandler, PodEventHandler
from scheduler.framework.cluster_event import EventResource
from scheduler.storage_informers import StorageFeed
from tests.unit.test_metrics_wiring import ScriptedConnection

# the pod and node handlers report these (eventhandlers.py)
POD_KINDS = {EventResource.POD, EventResource.ASSIGNED_POD, EventResource.UNSCHEDULED_POD}
NODE_KINDS = {EventResource.NODE}


def test_every_registered_resource_has_an_informer_reporting_it() -> None:
    app = SchedulerApp(default_config(), ScriptedConnection(), RunOptions(leader_elect=False))  # type: ignore[arg-type]
    registered = {
        ev.event.resource
        for fwk in app.frameworks.values()
        for events in fwk.events_to_register().values()
        for ev in events
    } - {EventResource.WILDCARD}
    reported: set[EventResource] = set()
    for informer in app._informers():
        handler = informer.handler
        if isinstance(handler, PodEventHandler) and handler.queue is app.queue:
            reported |= POD_KINDS
        elif isinstance(handler, NodeEventHandler) and handler.queue is app.queue:
            reported |= NODE_KINDS
        elif isinstance(handler, StorageFeed):
            reported.add(handler.resource)
    # the storage kinds must be registered at all, or this test proves nothing about them
    assert {EventResource.PVC, EventResource.STORAGE_CLASS, EventResource.CSI_NODE} <= registered
    assert registered - reported == set(), "registered but never reported to the queue"
