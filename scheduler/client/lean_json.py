"""LIST pages and watch events of pods and nodes decoded without their managedFields.

A pod as the API server lists it carries managedFields: one entry per writer, each a
tree of `"f:..."` keys mapping to small objects. In a Deployment's pod that is about
half of its JSON and most of the Python objects decoding it makes, and nothing in the
scheduler reads it (the records are built from metadata, spec and status). Decoding a
page with orjson builds that tree for every pod and then frees it; here the page is
decoded against a schema (msgspec) in which managedFields is kept as the unparsed bytes
(`msgspec.Raw`, a view into the page) and dropped. Measured on a page of 500 pods of the
scale suite (8.8 KB of JSON each, 4.1 KB of it managedFields): decode and free 82-108
us per pod with orjson, 52 us with this (docs/performance.md, "Start-up at scale").

The result is the same dict a JSON decode gives, less each object's managedFields: the
page's kind, apiVersion and metadata as they are, and per object apiVersion, kind,
metadata, spec and status, the only top-level fields of a v1 Pod and a v1 Node. Every
value is decoded as generic JSON (`Any`), so a malformed object reaches the informer's
transform as before and is reported there. A page that does not have this shape at all
(items not a list, an object's metadata not an object) or is not JSON for msgspec is
decoded by json_codec instead, with its usual errors.

A watch event is the same: the object of an ADDED, MODIFIED or DELETED event without its
managedFields; any other event (BOOKMARK, ERROR: a Status, not an object of the kind)
and any line of another shape decoded by json_codec as it is.
"""

from __future__ import annotations

from typing import Any

import msgspec

from scheduler.client import json_codec

__all__ = ["list_page", "watch_event"]

_UNSET: Any = msgspec.UNSET


class _ObjectMeta(msgspec.Struct):
    # every field of apimachinery's v1 ObjectMeta; managedFields is left unparsed
    name: Any = _UNSET
    generateName: Any = _UNSET
    namespace: Any = _UNSET
    selfLink: Any = _UNSET
    uid: Any = _UNSET
    resourceVersion: Any = _UNSET
    generation: Any = _UNSET
    creationTimestamp: Any = _UNSET
    deletionTimestamp: Any = _UNSET
    deletionGracePeriodSeconds: Any = _UNSET
    labels: Any = _UNSET
    annotations: Any = _UNSET
    ownerReferences: Any = _UNSET
    finalizers: Any = _UNSET
    managedFields: msgspec.Raw = msgspec.Raw()


class _Object(msgspec.Struct):
    apiVersion: Any = _UNSET
    kind: Any = _UNSET
    metadata: _ObjectMeta | None = None
    spec: Any = _UNSET
    status: Any = _UNSET


class _Page(msgspec.Struct):
    kind: Any = _UNSET
    apiVersion: Any = _UNSET
    metadata: Any = _UNSET
    items: list[_Object] | None = None


_META_FIELDS = tuple(f for f in _ObjectMeta.__struct_fields__ if f != "managedFields")
_OBJECT_FIELDS = ("apiVersion", "kind", "spec", "status")
_PAGE_FIELDS = ("kind", "apiVersion", "metadata")


class _Event(msgspec.Struct):
    type: Any = _UNSET
    object: msgspec.Raw = msgspec.Raw()


_decoder = msgspec.json.Decoder(_Page)
_event_decoder = msgspec.json.Decoder(_Event)
_object_decoder = msgspec.json.Decoder(_Object)
_OBJECT_EVENTS = frozenset({"ADDED", "MODIFIED", "DELETED"})


def _as_dict(obj: _Object) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in _OBJECT_FIELDS[:2]:
        value = getattr(obj, name)
        if value is not _UNSET:
            out[name] = value
    meta = obj.metadata
    if meta is not None:
        fields: dict[str, Any] = {}
        for name in _META_FIELDS:
            value = getattr(meta, name)
            if value is not _UNSET:
                fields[name] = value
        out["metadata"] = fields
    for name in _OBJECT_FIELDS[2:]:
        value = getattr(obj, name)
        if value is not _UNSET:
            out[name] = value
    return out


def _plain(data: bytes) -> dict[str, Any]:
    parsed = json_codec.loads(data) if data else {}
    return parsed if isinstance(parsed, dict) else {"items": parsed}


def list_page(data: bytes) -> dict[str, Any]:
    """A LIST page of pods or nodes as a dict, each object without its managedFields."""
    try:
        page = _decoder.decode(data)
    except (msgspec.ValidationError, msgspec.DecodeError):
        return _plain(data)
    out: dict[str, Any] = {}
    for name in _PAGE_FIELDS:
        value = getattr(page, name)
        if value is not _UNSET:
            out[name] = value
    out["items"] = [_as_dict(obj) for obj in page.items or ()]
    return out


def watch_event(line: bytes) -> Any:
    """One line of a watch of pods or nodes: the event, its object without managedFields.
    Whatever is not an object event is decoded by json_codec as it is (the caller checks
    that it is an object)."""
    try:
        event = _event_decoder.decode(line)
        if not isinstance(event.type, str) or event.type not in _OBJECT_EVENTS or not event.object:
            return json_codec.loads(line)
        obj = _object_decoder.decode(event.object)
    except (msgspec.ValidationError, msgspec.DecodeError):
        return json_codec.loads(line)
    return {"type": event.type, "object": _as_dict(obj)}
