"""The slim node record (NodeInfo) built once from the API server's raw JSON.

Only what scheduling needs: labels, taints, unschedulable, allocatable (cpu in
millicores, everything else in integer units), images (name -> size), Ready.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from scheduler.model.errors import InvalidObject
from scheduler.model.json_fields import Problems, json_list, object_entries, string_map
from scheduler.model.quantity import parse_resource
from scheduler.model.taints import EFFECTS, NO_EXECUTE, NO_SCHEDULE, Taint

LABEL_HOSTNAME = "kubernetes.io/hostname"
LABEL_ZONE = "topology.kubernetes.io/zone"


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeInfo:
    name: str
    uid: str = ""
    resource_version: str = ""
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    unschedulable: bool = False
    allocatable: Mapping[str, int] = field(default_factory=dict)
    images: Mapping[str, int] = field(default_factory=dict)
    ready: bool = True
    # what the scheduler could not read (each "path: detail"); see node_from_dict
    problems: tuple[str, ...] = ()


def normalize_image(name: str) -> str:
    """A pod's image name as ImageLocality looks it up: without tag or digest it means
    ":latest" (upstream imagelocality normalizedImageName). Only the pod side is
    normalised: the node's status.images names are kept as the node reports them
    (pkg/scheduler/backend/cache/cache.go addNodeImageStates), so a node listing "nginx"
    does not hold the pod's "nginx" ("nginx:latest")."""
    if name.rfind(":") <= name.rfind("/"):
        return name + ":latest"
    return name


# Nodes the scheduler cannot fully read get these taints: no pod lands on them unless it
# tolerates every taint of both placement effects (then no unreadable taint could have
# kept it off either), and the pods' FailedScheduling messages name the reason. The
# node's readable capacity and the pods bound to it keep counting.
TAINT_UNREADABLE = "scheduler.kube-async-scheduler.io/unreadable-node"
UNREADABLE_TAINTS = (
    Taint(TAINT_UNREADABLE, "", NO_SCHEDULE),
    Taint(TAINT_UNREADABLE, "", NO_EXECUTE),
)


def node_from_dict(raw: Any) -> NodeInfo:
    """Build a NodeInfo from a raw v1.Node dict.

    Total, as pod_from_dict: nothing the API server could store makes a node invisible.
    Only a node without a readable name raises InvalidObject. Any other part of a shape
    the scheduler cannot read (the API server never stores one; a broken proxy or a
    newer API version might) is recorded in `NodeInfo.problems`, left out, and the rest
    is still read, so the node's capacity and the pods on it keep counting. Where a left
    out part could have kept pods away (taints, unschedulable, a resource amount) the
    reading errs on the safe side: unreadable taints become UNREADABLE_TAINTS, an
    unreadable unschedulable reads as True, an unreadable resource as absent (0)."""
    if not isinstance(raw, dict):
        raise InvalidObject("", "node must be an object")
    meta = raw.get("metadata")
    if not isinstance(meta, dict):
        raise InvalidObject("metadata", "must be an object")
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        raise InvalidObject("metadata.name", "must be a non-empty string")
    problems = Problems()
    spec: dict[str, Any] | None = problems.read(_object, raw.get("spec"), "spec", default=None)
    status: dict[str, Any] = problems.read(_object, raw.get("status"), "status", default={})
    labels: dict[str, str] = problems.read(
        string_map, meta.get("labels"), "metadata.labels", default={}
    )
    taints: tuple[Taint, ...]
    if spec is None:  # unreadable: it may have had taints, or said unschedulable
        taints, unschedulable = UNREADABLE_TAINTS, True
    else:
        taints = problems.read(
            _taints, spec.get("taints"), "spec.taints", default=UNREADABLE_TAINTS
        )
        unschedulable = problems.read(
            _bool, spec.get("unschedulable"), "spec.unschedulable", default=True
        )
    allocatable = _allocatable(status, problems)
    images = _images(status.get("images"), "status.images", problems)
    ready = problems.read(_ready, status.get("conditions"), "status.conditions", default=False)
    found = tuple(problems.found)
    if found and not all(t in taints for t in UNREADABLE_TAINTS):
        taints = (*taints, *UNREADABLE_TAINTS)
    return NodeInfo(
        name=name,
        uid=_text(meta.get("uid")),
        resource_version=_text(meta.get("resourceVersion")),
        labels=labels,
        taints=taints,
        unschedulable=unschedulable,
        allocatable=allocatable,
        images=images,
        ready=ready,
        problems=found,
    )


def _text(value: Any) -> str:
    """An optional string field (uid, resourceVersion): anything else reads as ""."""
    return value if isinstance(value, str) else ""


def _object(value: Any, path: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InvalidObject(path, "must be an object")
    return value


def _bool(value: Any, path: str) -> bool:
    if value is None:
        return False
    if not isinstance(value, bool):
        raise InvalidObject(path, f"must be a boolean, got {_short(value)}")
    return value


def _taints(value: Any, path: str) -> tuple[Taint, ...]:
    """spec.taints; one unreadable entry makes the whole list unreadable (a node must
    not lose a taint that may have kept pods away)."""
    out: list[Taint] = []
    for where, t in object_entries(value, path):
        key, taint_value, effect = t.get("key"), t.get("value"), t.get("effect")
        if not isinstance(key, str) or not key:
            raise InvalidObject(f"{where}.key", "must be a non-empty string")
        if taint_value is not None and not isinstance(taint_value, str):
            raise InvalidObject(f"{where}.value", "must be a string")
        if not isinstance(effect, str) or effect not in EFFECTS:
            raise InvalidObject(f"{where}.effect", f"unknown effect {_short(effect)}")
        out.append(Taint(key, taint_value or "", effect))
    return tuple(out)


@functools.lru_cache(maxsize=4096)
def _amount(resource: str, quantity: str) -> int:
    """Allocatable amounts repeat across nodes ("4", "32Gi", "110"): parse each once
    (the re-list of 5000 nodes spent most of its node parsing here)."""
    return parse_resource(resource, quantity)


def _allocatable(status: dict[str, Any], problems: Problems) -> dict[str, int]:
    """status.allocatable (status.capacity when absent). An unreadable amount is left
    out: the resource reads as 0 on this node, so nothing is placed against it."""
    path = "status.allocatable"
    raw = status.get("allocatable")
    if raw is None or raw == {}:
        path, raw = "status.capacity", status.get("capacity")
    empty: dict[str, Any] = {}
    amounts = problems.read(_object, raw, path, default=empty)
    out: dict[str, int] = {}
    for res, q in amounts.items():
        try:
            out[res] = _amount(res, q) if isinstance(q, str) else parse_resource(res, q)
        except InvalidObject as e:
            problems.add(f"{path}.{res}", e.detail)
    return out


def _images(value: Any, path: str, problems: Problems) -> dict[str, int]:
    """status.images (ImageLocality scores with it). Unreadable entries are left out."""
    images: dict[str, int] = {}
    none: list[Any] = []
    for i, img in enumerate(problems.read(json_list, value, path, default=none)):
        where = f"{path}[{i}]"
        if not isinstance(img, dict):
            problems.add(where, "must be an object")
            continue
        size = img.get("sizeBytes")
        if size is None:
            size = 0
        if isinstance(size, bool) or not isinstance(size, int) or size < 0:
            problems.add(
                f"{where}.sizeBytes", f"must be a non-negative integer, got {_short(size)}"
            )
            continue
        names = problems.read(json_list, img.get("names"), f"{where}.names", default=none)
        for j, n in enumerate(names):
            if isinstance(n, str):
                # as reported (not normalised); a name listed twice keeps its first size,
                # as upstream's cache does
                images.setdefault(n, size)
            else:
                problems.add(f"{where}.names[{j}]", "must be a string")
    return images


def _ready(value: Any, path: str) -> bool:
    """The Ready condition's status is "True" (last one wins, as before)."""
    ready = False
    for _, c in object_entries(value, path):
        if c.get("type") == "Ready":
            ready = c.get("status") == "True"
    return ready


def _short(value: Any) -> str:
    """A bad value for an error text, cut short (fuzzed values may be huge)."""
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
