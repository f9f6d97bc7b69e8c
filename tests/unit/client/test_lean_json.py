"""client.lean_json: a LIST page decoded as JSON less each object's managedFields."""

from __future__ import annotations

import copy
import json
from typing import Any

import orjson
import pytest

from scheduler.client.lean_json import list_page, watch_event

MANAGED = [
    {
        "manager": "kubectl",
        "operation": "Update",
        "apiVersion": "v1",
        "time": "2026-12-06T02:19:36Z",
        "fieldsType": "FieldsV1",
        "fieldsV1": {"f:metadata": {"f:labels": {".": {}, "f:app": {}}}, "f:spec": {}},
    }
]


def _pod(name: str, **meta: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "generateName": "web-",
            "namespace": "default",
            "selfLink": "",
            "uid": f"uid-{name}",
            "resourceVersion": "42",
            "generation": 3,
            "creationTimestamp": "2026-12-06T02:19:36Z",
            "deletionTimestamp": "2026-12-06T02:20:00Z",
            "deletionGracePeriodSeconds": 30,
            "labels": {"app": "web"},
            "annotations": {"a": "b"},
            "ownerReferences": [{"kind": "ReplicaSet", "name": "web", "uid": "u"}],
            "finalizers": ["x/y"],
            "managedFields": MANAGED,
            **meta,
        },
        "spec": {"nodeName": "n1", "containers": [{"name": "c", "resources": {}}]},
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
    }


def _without_managed(page: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(page)
    for item in out.get("items") or []:
        item.get("metadata", {}).pop("managedFields", None)
    return out


def test_every_field_but_managed_fields_comes_through_as_json_gives_it() -> None:
    page = {
        "kind": "PodList",
        "apiVersion": "v1",
        "metadata": {"resourceVersion": "7", "continue": "tok", "remainingItemCount": 3},
        "items": [_pod("a"), _pod("b", labels=None, annotations={}), {"kind": "Pod"}],
    }
    lean = list_page(orjson.dumps(page))
    assert lean == _without_managed(page)
    assert "metadata" not in lean["items"][2]  # absent stays absent


def test_a_null_or_missing_item_list_reads_as_none() -> None:
    assert list_page(b'{"metadata":{},"items":null}')["items"] == []
    assert list_page(b'{"metadata":{}}')["items"] == []


@pytest.mark.parametrize(
    "page",
    [
        {"metadata": {}, "items": {"not": "a list"}},
        {"metadata": {}, "items": [{"metadata": ["not", "an", "object"]}]},
        {"metadata": {}, "items": [{"metadata": {"managedFields": MANAGED}}, 5]},
    ],
)
def test_a_page_of_another_shape_is_decoded_as_plain_json(page: dict[str, Any]) -> None:
    assert list_page(json.dumps(page).encode()) == page


def test_what_msgspec_cannot_read_falls_back_to_the_json_codec() -> None:
    # NaN is not JSON for msgspec or orjson; the standard library reads it
    data = b'{"metadata":{},"items":[{"metadata":{"name":"a"},"spec":{"x":NaN}}]}'
    lean = list_page(data)
    assert lean["items"][0]["metadata"] == {"name": "a"}
    with pytest.raises(ValueError):
        list_page(b'{"items": [')


@pytest.mark.parametrize("kind", ["ADDED", "MODIFIED", "DELETED"])
def test_an_object_event_comes_without_managed_fields(kind: str) -> None:
    event = {"type": kind, "object": _pod("a")}
    lean = watch_event(orjson.dumps(event))
    assert lean == {"type": kind, "object": _without_managed({"items": [_pod("a")]})["items"][0]}


@pytest.mark.parametrize(
    "event",
    [
        # a Status, not a pod: its fields are not an object's and must all come through
        {
            "type": "ERROR",
            "object": {"kind": "Status", "code": 410, "reason": "Expired", "message": "m"},
        },
        {"type": "BOOKMARK", "object": {"kind": "Pod", "metadata": {"resourceVersion": "9"}}},
        {"type": ["odd"], "object": {}},
        {"type": "ADDED"},
        {"type": "MODIFIED", "object": [1, 2]},
        {"type": "MODIFIED", "object": {"metadata": "not an object"}},
        [1, 2],
    ],
)
def test_any_other_line_is_decoded_as_plain_json(event: Any) -> None:
    assert watch_event(json.dumps(event).encode()) == event


def test_a_line_that_is_not_json_raises_a_value_error() -> None:
    with pytest.raises(ValueError):
        watch_event(b'{"type": "ADDED", "object": {')
