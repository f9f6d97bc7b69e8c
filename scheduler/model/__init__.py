"""Slim internal records built once from the API server's raw JSON.

Public surface: `pod_from_dict` (and `pod_update_from_dict`), `node_from_dict` (and
the volume/namespace transforms), the records `PodInfo`, `NodeInfo`, quantities, and
`InvalidObject`.
"""

from scheduler.model.errors import InvalidObject, InvalidQuantity
from scheduler.model.namespace import NamespaceInfo, namespace_from_dict
from scheduler.model.node import NodeInfo, node_from_dict
from scheduler.model.pod import PodInfo, pod_from_dict, pod_update_from_dict
from scheduler.model.quantity import parse_quantity, parse_resource
from scheduler.model.volume import (
    PVCInfo,
    PVInfo,
    StorageClassInfo,
    pv_from_dict,
    pvc_from_dict,
    storage_class_from_dict,
)

__all__ = [
    "InvalidObject",
    "InvalidQuantity",
    "NamespaceInfo",
    "NodeInfo",
    "PVCInfo",
    "PVInfo",
    "PodInfo",
    "StorageClassInfo",
    "namespace_from_dict",
    "node_from_dict",
    "parse_quantity",
    "parse_resource",
    "pod_from_dict",
    "pod_update_from_dict",
    "pv_from_dict",
    "pvc_from_dict",
    "storage_class_from_dict",
]
