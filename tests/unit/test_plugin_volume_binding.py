"""VolumeBinding-lite: bound PVs constrain nodes; unbound claims are never placed."""

from __future__ import annotations

import pytest
from builders import filter_statuses, make_framework, make_node, make_pod, make_snapshot, reasons_of

from scheduler.framework import Handle, InMemoryListers
from scheduler.framework.status import Code
from scheduler.model.volume import pv_from_dict, pvc_from_dict, storage_class_from_dict

ZONE = "topology.kubernetes.io/zone"


def _listers() -> InMemoryListers:
    ls = InMemoryListers()
    ls.set_pvc(
        pvc_from_dict(
            {
                "metadata": {"name": "bound", "namespace": "default"},
                "spec": {"volumeName": "pv1"},
                "status": {"phase": "Bound"},
            }
        )
    )
    ls.set_pv(
        pv_from_dict(
            {
                "metadata": {"name": "pv1"},
                "spec": {
                    "nodeAffinity": {
                        "required": {
                            "nodeSelectorTerms": [
                                {
                                    "matchExpressions": [
                                        {"key": ZONE, "operator": "In", "values": ["z1"]}
                                    ]
                                }
                            ]
                        }
                    }
                },
            }
        )
    )
    ls.set_pvc(
        pvc_from_dict(
            {
                "metadata": {"name": "immediate", "namespace": "default"},
                "spec": {"storageClassName": "fast"},
            }
        )
    )
    ls.set_pvc(
        pvc_from_dict(
            {
                "metadata": {"name": "wffc", "namespace": "default"},
                "spec": {"storageClassName": "local"},
            }
        )
    )
    ls.set_pvc(
        pvc_from_dict(
            {
                "metadata": {
                    "name": "gone",
                    "namespace": "default",
                    "deletionTimestamp": "2024-01-01T00:00:00Z",
                },
                "spec": {"volumeName": "pv1"},
            }
        )
    )
    ls.set_storage_class(storage_class_from_dict({"metadata": {"name": "fast"}}))
    ls.set_storage_class(
        storage_class_from_dict(
            {"metadata": {"name": "local"}, "volumeBindingMode": "WaitForFirstConsumer"}
        )
    )
    return ls  # fmt: skip


@pytest.mark.parametrize(
    ("claim", "expected"),
    [
        ("bound", {"b": "node(s) had volume node affinity conflict"}),
        ("immediate", "pod has unbound immediate PersistentVolumeClaims"),
        ("wffc", 'this scheduler cannot bind volumes: persistentvolumeclaim "wffc" '
                 '(storage class "local") waits for its first consumer'),
        ("missing", 'persistentvolumeclaim "missing" not found'),
        ("gone", 'persistentvolumeclaim "gone" is being deleted'),
    ],
)  # fmt: skip
def test_volume_binding(claim: str, expected: object) -> None:
    fw = make_framework(handle=Handle.from_listers(_listers()))
    snap = make_snapshot([make_node("a").zone("z1"), make_node("b").zone("z2")])
    statuses = filter_statuses(fw, make_pod("p").pvc(claim).obj(), snap)
    if isinstance(expected, dict):
        assert reasons_of(statuses) == expected
    else:
        assert reasons_of(statuses) == {"a": expected, "b": expected}
    assert all(s.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE for s in statuses.values())


def test_pod_without_claims_skips_the_plugin() -> None:
    fw = make_framework(handle=Handle.from_listers(_listers()))
    assert filter_statuses(fw, make_pod("p").obj(), make_snapshot([make_node("a")])) == {}
