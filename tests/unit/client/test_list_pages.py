"""client.list_pages: a LIST page decoded as JSON less each object's managedFields."""

from __future__ import annotations

import copy
import json
from typing import Any

import orjson
import pytest

from scheduler.client.list_pages import decode_without_managed_fields

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
    lean = decode_without_managed_fields(orjson.dumps(page))
    assert lean == _without_managed(page)
    assert "metadata" not in lean["items"][2]  # absent stays absent


def test_a_null_or_missing_item_list_reads_as_none() -> None:
    assert decode_without_managed_fields(b'{"metadata":{},"items":null}')["items"] == []
    assert decode_without_managed_fields(b'{"metadata":{}}')["items"] == []


@pytest.mark.parametrize(
    "page",
    [
        {"metadata": {}, "items": {"not": "a list"}},
        {"metadata": {}, "items": [{"metadata": ["not", "an", "object"]}]},
        {"metadata": {}, "items": [{"metadata": {"managedFields": MANAGED}}, 5]},
    ],
)
def test_a_page_of_another_shape_is_decoded_as_plain_json(page: dict[str, Any]) -> None:
    assert decode_without_managed_fields(json.dumps(page).encode()) == page


def test_what_msgspec_cannot_read_falls_back_to_the_json_codec() -> None:
    # NaN is not JSON for msgspec or orjson; the standard library reads it
    data = b'{"metadata":{},"items":[{"metadata":{"name":"a"},"spec":{"x":NaN}}]}'
    lean = decode_without_managed_fields(data)
    assert lean["items"][0]["metadata"] == {"name": "a"}
    with pytest.raises(ValueError):
        decode_without_managed_fields(b'{"items": [')
