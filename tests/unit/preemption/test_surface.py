"""The preemption package's public names, and that the real collaborators satisfy the
evaluator's and executor's Protocols."""

from __future__ import annotations

import scheduler.preemption as preemption
from scheduler.cache import Nominator, Snapshot
from scheduler.client.dispatcher import Dispatcher
from scheduler.client.events import EventRecorder
from scheduler.framework.dry_run import NodeDryRun
from scheduler.preemption import evaluator, executor


def test_exported_names() -> None:
    assert sorted(preemption.__all__) == sorted(set(evaluator.__all__) | set(executor.__all__))
    for name in preemption.__all__:
        assert getattr(preemption, name) is not None


def test_the_real_parts_have_the_methods_the_protocols_name() -> None:
    for cls, methods in [
        (Snapshot, ["get"]),
        (Nominator, ["nominated_pods_for_node", "nominated_node", "add", "remove"]),
        (
            NodeDryRun,
            [
                "remove_pod",
                "remove_pods",
                "add_pod",
                "filter",
                "still_fits",
                "remove_remote_pod",
                "add_remote_pod",
            ],
        ),
        (Dispatcher, ["patch_pod_status", "delete_pod"]),
        (EventRecorder, ["event"]),
    ]:
        for m in methods:
            assert callable(getattr(cls, m, None)), f"{cls.__name__}.{m}"
