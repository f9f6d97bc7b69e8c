"""A digest of everything the scheduling part of a PodInfo is parsed from.

Most watch events for a pod change nothing the scheduler parsed with care: the bind
sets spec.nodeName, the kubelet (or kwok) rewrites status.phase, conditions and the
container states. Parsing the pod again for those (every container's quantities, the
affinity terms, the volumes) cost most of the informer's time. The record's expensive
part is a pure function of:

- the pod's namespace (affinity terms default to it), and its name only when a volume
  may be a generic ephemeral one (its claim is named after the pod; nothing else in
  the parse reads the name). So replicas of one template (a Deployment's, a Job's)
  share one digest, and model.pod parses that template once for all of them,
- of metadata.labels, only the values of the keys that topology spread constraints
  name in matchLabelKeys (merged into their selectors). Not the rest: the API server
  adds the node's topology labels to a pod when it is bound (PodTopologyLabels), and
  the labels themselves are read on every event,
- spec, without spec.nodeName (read separately, it is the bind itself),
- from status, only what upstream's PodRequests reads: status.allocatedResources,
  status.resources, per container name the allocatedResources and resources of its
  status (an app container's status winning over an init container's of the same
  name, as model.pod_resource_inputs reads them), and whether the first
  PodResizePending condition says Infeasible.

These are serialised to canonical bytes and hashed (BLAKE2b, 128 bits: a collision is
not a practical event). Equal digests mean equal inputs, so reusing the parsed part is
exact; the serialisation is a superset of what is read (all of spec), so any change to
a parsed field changes the digest. Anything that cannot be serialised gets no digest
and is always parsed in full.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

import orjson

from scheduler.model.pod_resources import CONDITION_RESIZE_PENDING, REASON_INFEASIBLE

__all__ = ["scheduling_digest"]

_CONTAINER_STATUS_LISTS = ("initContainerStatuses", "containerStatuses")


def _present(**fields: Any) -> dict[str, Any]:
    """The fields that are not None: an absent field and a null one read the same, and
    the key itself must hold no null (see _canonical)."""
    return {k: v for k, v in fields.items() if v is not None}


def _resource_status(status: Mapping[str, Any]) -> dict[str, Any]:
    """The parts of status the request arithmetic reads (model.pod_resource_inputs)."""
    # container name -> its status's amounts, the later entry winning as there; an
    # entry with neither amount reads as no entry (the kubelet's first status of a
    # container, which carries only its state, must not cost a parse)
    by_name: dict[str, dict[str, Any]] = {}
    for list_name in _CONTAINER_STATUS_LISTS:
        entries = status.get(list_name)
        if isinstance(entries, list):
            for cs in entries:
                if isinstance(cs, dict) and isinstance(cs.get("name"), str):
                    by_name[cs["name"]] = _present(
                        allocated=cs.get("allocatedResources"), actuated=cs.get("resources")
                    )
    resize_infeasible = None
    conditions = status.get("conditions")
    if isinstance(conditions, list):
        for c in conditions:
            if isinstance(c, dict) and c.get("type") == CONDITION_RESIZE_PENDING:
                resize_infeasible = c.get("reason") == REASON_INFEASIBLE
                break
    return _present(
        allocated=status.get("allocatedResources"),
        actuated=status.get("resources"),
        containers={name: amounts for name, amounts in sorted(by_name.items()) if amounts} or None,
        resize_infeasible=resize_infeasible,
    )


def _spread_label_values(spec: Mapping[str, Any], labels: Any) -> dict[str, str] | None:
    """The labels parse_spread_constraints can read: the values of every string in a
    matchLabelKeys list of the constraints, from the labels as the record reads them
    (json_fields.string_map: anything but a map of strings reads as none)."""
    constraints = spec.get("topologySpreadConstraints")
    if not isinstance(constraints, list):
        return None
    keys: set[str] = set()
    for c in constraints:
        match = c.get("matchLabelKeys") if isinstance(c, dict) else None
        if isinstance(match, list):
            keys.update(k for k in match if isinstance(k, str))
    if not keys or not isinstance(labels, dict):
        return None
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in labels.items()):
        return None
    return {k: labels[k] for k in sorted(keys) if k in labels} or None


def _reads_pod_name(volumes: Any) -> bool:
    """Whether model.pod_volumes may read the pod's name: for a generic ephemeral
    volume's claim. Anything but a list of volume objects without `ephemeral` counts as
    may (its parse only fails, naming no pod, but the digest stays on the safe side)."""
    if volumes is None:
        return False
    if not isinstance(volumes, list):
        return True
    return any(not isinstance(v, dict) or "ephemeral" in v for v in volumes)


def _canonical(value: Any) -> bytes:
    """Bytes equal only for equal JSON values (raises TypeError for what orjson cannot
    write: a key that is not a string, an integer beyond 64 bits). orjson writes NaN and
    +-Infinity as null, so whenever a null appears the standard library writes the value
    instead, keeping them apart; the prefix keeps the two writers' outputs from ever
    colliding."""
    data = orjson.dumps(value)
    if b"null" in data:
        return b"j" + json.dumps(value).encode()
    return b"o" + data


def scheduling_digest(
    namespace: str, name: str, meta: Mapping[str, Any], spec: Any, status: Any
) -> bytes:
    """The digest of the pod's scheduling inputs; b"" when there is none (spec or
    status is not an object, or something cannot be serialised): such a pod is always
    parsed in full."""
    if not isinstance(spec, dict) or not isinstance(status, dict):
        return b""
    if "nodeName" in spec:
        spec = {k: v for k, v in spec.items() if k != "nodeName"}
    key = _present(
        namespace=namespace,
        name=name if _reads_pod_name(spec.get("volumes")) else None,
        spread_labels=_spread_label_values(spec, meta.get("labels")),
        spec=spec,
        status=_resource_status(status) or None,
    )
    try:
        data = _canonical(key)
    except TypeError:
        return b""
    return hashlib.blake2b(data, digest_size=16).digest()
