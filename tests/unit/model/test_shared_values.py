"""model.shared_values: replicas' records share their repeated parts, values unchanged."""

from __future__ import annotations

import copy
from typing import Any

from scheduler.model.pod import pod_from_dict
from scheduler.model.shared_values import Canonical, shared_labels


def replica(name: str, uid: str) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "namespace": "team-a",
            "uid": uid,
            "resourceVersion": "7",
            "labels": {"app": "web", "pod-template-hash": "5d8f"},
            "ownerReferences": [
                {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-5d8f",
                 "uid": "rs-1", "controller": True}
            ],
        },
        "spec": {"nodeName": "node-3", "containers": [{"name": "c", "image": "web:1"}]},
        "status": {
            "phase": "Running",
            "conditions": [
                {"type": "Ready", "status": "True"},
                {"type": "PodScheduled", "status": "True"},
            ],
        },
    }  # fmt: skip


def test_replicas_share_labels_owners_conditions_and_names_of_places() -> None:
    a = pod_from_dict(replica("web-5d8f-aaaaa", "u1"))
    b = pod_from_dict(replica("web-5d8f-bbbbb", "u2"))
    assert a.labels is b.labels
    assert a.owner_refs is b.owner_refs
    assert a.conditions is b.conditions
    assert a.namespace is b.namespace and a.node_name is b.node_name and a.phase is b.phase
    assert (a.name, a.uid) != (b.name, b.uid)


def test_a_shared_part_is_equal_to_what_the_pod_says() -> None:
    raw = replica("web-5d8f-ccccc", "u3")
    pod_from_dict(raw)  # an earlier replica fills the tables
    other = copy.deepcopy(raw)
    other["metadata"]["labels"]["app"] = "api"
    other["metadata"]["ownerReferences"][0]["controller"] = False
    other["status"]["conditions"][0]["status"] = "False"
    rec = pod_from_dict(other)
    assert dict(rec.labels) == {"app": "api", "pod-template-hash": "5d8f"}
    assert [o.controller for o in rec.owner_refs] == [False]
    assert [(c.type, c.status) for c in rec.conditions] == [
        ("Ready", "False"),
        ("PodScheduled", "True"),
    ]
    assert pod_from_dict(raw).labels == {"app": "web", "pod-template-hash": "5d8f"}


def test_labels_are_shared_by_content_and_empty_labels_by_one_map() -> None:
    first = shared_labels({"k": "v"})
    assert shared_labels({"k": "v"}) is first
    assert shared_labels({"k": "w"}) == {"k": "w"}
    assert shared_labels({}) is shared_labels({})


def test_a_full_table_drops_its_oldest_entry_first() -> None:
    built: list[str] = []
    table: Canonical[str, list[str]] = Canonical(limit=2)

    def build(key: str) -> list[str]:
        built.append(key)
        return [key]

    a = table.get("a", lambda: build("a"))
    assert table.get("a", lambda: build("a")) is a
    table.get("b", lambda: build("b"))
    table.get("c", lambda: build("c"))  # "a" goes
    assert len(table) == 2
    assert table.get("a", lambda: build("a")) is not a
    assert built == ["a", "b", "c", "a"]
