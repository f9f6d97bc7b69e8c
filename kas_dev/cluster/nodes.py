"""Fake nodes for the local cluster: the node-mix file and the Node objects made from it.

A node mix is a small YAML file, for example:

    nodes:
      - count: 60
        namePrefix: small
        cpu: "4"
        memory: 16Gi
        pods: 110
        zones: [zone-a, zone-b, zone-c]
      - count: 10
        namePrefix: gpu
        cpu: "16"
        memory: 64Gi
        extended: {example.com/gpu: 4}
        labels: {node-type: gpu}
        taints: [{key: dedicated, value: gpu, effect: NoSchedule}]

Every node gets the annotation kwok watches for (kwok.x-k8s.io/node: fake), the labels a
real kubelet sets (kubernetes.io/hostname, os, arch) and the zone/region labels. Unknown
fields are refused with the field's path, so a typo never silently makes a different
cluster."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from kas_dev.cluster.errors import ClusterError

KWOK_ANNOTATION = "kwok.x-k8s.io/node"
ZONE_LABEL = "topology.kubernetes.io/zone"
REGION_LABEL = "topology.kubernetes.io/region"
HOSTNAME_LABEL = "kubernetes.io/hostname"
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    effect: str
    value: str = ""


@dataclass(frozen=True, slots=True)
class NodeGroup:
    count: int
    name_prefix: str = "kwok-node"
    cpu: str = "4"
    memory: str = "16Gi"
    pods: int = 110
    ephemeral_storage: str = "100Gi"
    extended: dict[str, str] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    zones: tuple[str, ...] = ("zone-a", "zone-b", "zone-c")
    region: str = "local"


_GROUP_FIELDS = {
    "count": "count",
    "namePrefix": "name_prefix",
    "cpu": "cpu",
    "memory": "memory",
    "pods": "pods",
    "ephemeralStorage": "ephemeral_storage",
    "extended": "extended",
    "labels": "labels",
    "taints": "taints",
    "zones": "zones",
    "region": "region",
}


def default_mix(count: int) -> list[NodeGroup]:
    return [NodeGroup(count=count)]


def _str_map(value: Any, where: str) -> dict[str, str]:
    if not isinstance(value, dict):
        raise ClusterError(f"{where}: must be a mapping")
    return {str(k): str(v) for k, v in value.items()}


def parse_node_mix(data: Any, source: str = "node mix") -> list[NodeGroup]:
    if not isinstance(data, dict) or set(data) != {"nodes"} or not isinstance(data["nodes"], list):
        extra = sorted(set(data) - {"nodes"}) if isinstance(data, dict) else []
        hint = f" (unknown field {extra[0]!r})" if extra else ""
        raise ClusterError(
            f"{source}: expected a mapping with one key 'nodes' holding a list{hint}"
        )
    groups: list[NodeGroup] = []
    for i, raw in enumerate(data["nodes"]):
        where = f"{source}: nodes[{i}]"
        if not isinstance(raw, dict):
            raise ClusterError(f"{where}: must be a mapping")
        unknown = sorted(set(raw) - set(_GROUP_FIELDS))
        if unknown:
            raise ClusterError(
                f"{where}.{unknown[0]}: unknown field (known: {', '.join(_GROUP_FIELDS)})"
            )
        kw: dict[str, Any] = {}
        for key, attr in _GROUP_FIELDS.items():
            if key not in raw:
                continue
            value = raw[key]
            if key in ("count", "pods"):
                if (
                    not isinstance(value, int)
                    or isinstance(value, bool)
                    or value < (1 if key == "pods" else 0)
                ):
                    raise ClusterError(f"{where}.{key}: must be a non-negative whole number")
            elif key in ("extended", "labels"):
                value = _str_map(value, f"{where}.{key}")
            elif key == "zones":
                if not isinstance(value, list) or not value:
                    raise ClusterError(f"{where}.zones: must be a non-empty list")
                value = tuple(str(z) for z in value)
            elif key == "taints":
                value = _parse_taints(value, f"{where}.taints")
            else:
                value = str(value)
            kw[attr] = value
        if "count" not in kw:
            raise ClusterError(f"{where}.count: required")
        groups.append(NodeGroup(**kw))
    return groups


def _parse_taints(value: Any, where: str) -> tuple[Taint, ...]:
    if not isinstance(value, list):
        raise ClusterError(f"{where}: must be a list")
    out = []
    for j, t in enumerate(value):
        if not isinstance(t, dict) or "key" not in t or "effect" not in t:
            raise ClusterError(f"{where}[{j}]: needs key and effect")
        unknown = sorted(set(t) - {"key", "value", "effect"})
        if unknown:
            raise ClusterError(f"{where}[{j}].{unknown[0]}: unknown field")
        if t["effect"] not in TAINT_EFFECTS:
            raise ClusterError(f"{where}[{j}].effect: must be one of {', '.join(TAINT_EFFECTS)}")
        out.append(Taint(str(t["key"]), str(t["effect"]), str(t.get("value", ""))))
    return tuple(out)


def load_node_mix(path: Path) -> list[NodeGroup]:
    try:
        text = path.read_text()
    except OSError as exc:
        raise ClusterError(f"cannot read node mix {path}: {exc.strerror}") from exc
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ClusterError(f"node mix {path}: not valid YAML ({exc.__class__.__name__})") from exc
    return parse_node_mix(data, str(path))


def node_manifests(groups: list[NodeGroup]) -> list[dict[str, Any]]:
    """Node objects (as dicts) for every node of the mix; names are unique per prefix."""
    out: list[dict[str, Any]] = []
    for g in groups:
        for i in range(g.count):
            name = f"{g.name_prefix}-{i}"
            zone = g.zones[i % len(g.zones)]
            labels = {
                "type": "kwok",
                HOSTNAME_LABEL: name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                ZONE_LABEL: zone,
                REGION_LABEL: g.region,
                **g.labels,
            }
            resources = {
                "cpu": g.cpu,
                "memory": g.memory,
                "pods": str(g.pods),
                "ephemeral-storage": g.ephemeral_storage,
                **g.extended,
            }
            node: dict[str, Any] = {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {
                    "name": name,
                    "labels": labels,
                    "annotations": {KWOK_ANNOTATION: "fake", "node.alpha.kubernetes.io/ttl": "0"},
                },
                "spec": {},
                "status": {"allocatable": resources, "capacity": dict(resources)},
            }
            if g.taints:
                node["spec"]["taints"] = [
                    {"key": t.key, "value": t.value, "effect": t.effect} for t in g.taints
                ]
            out.append(node)
    return out
