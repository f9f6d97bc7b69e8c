"""The informers behind the plugins' listers (everything but pods and nodes): PDBs,
the workloads that select pods (services, replication controllers, replica sets,
stateful sets), namespaces, and the storage kinds (storage_informers.py).

Storage events also reach the scheduling queue (the volume plugins register them);
PDB, workload and namespace changes only refresh what the plugins read, as upstream's
informers for them carry no queueing events for the in-tree plugins.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from scheduler.client.connection import Connection
from scheduler.client.informer import Informer, Resource
from scheduler.framework.handle import InMemoryListers
from scheduler.model import namespace_from_dict
from scheduler.model.pdb import PDBInfo, pdb_from_dict
from scheduler.storage_informers import ClusterEventReceiver, storage_informers
from scheduler.workload_selectors import (
    WorkloadSelectors,
    replica_set_from_dict,
    replication_controller_from_dict,
    service_from_dict,
    stateful_set_from_dict,
)

NAMESPACES = Resource("", "v1", "namespaces")
PDBS = Resource("policy", "v1", "poddisruptionbudgets")
SERVICES = Resource("", "v1", "services")
REPLICATION_CONTROLLERS = Resource("", "v1", "replicationcontrollers")
REPLICA_SETS = Resource("apps", "v1", "replicasets")
STATEFUL_SETS = Resource("apps", "v1", "statefulsets")


class ListerFeed:
    """Informer handler that keeps one kind of record in the shared listers."""

    def __init__(self, put: Callable[[Any], object], drop: Callable[[Any], object]) -> None:
        self._put = put
        self._drop = drop

    def on_add(self, obj: Any) -> None:
        self._put(obj)

    def on_update(self, old: Any, new: Any) -> None:
        self._put(new)

    def on_delete(self, obj: Any) -> None:
        self._drop(obj)


def pdb_informer(connection: Connection) -> Informer[PDBInfo]:
    """PDBs are read from the informer's own store (preemption's victim choice)."""

    def ignore(obj: Any) -> None:
        return None

    return Informer(connection, PDBS, pdb_from_dict, ListerFeed(ignore, ignore), name="pdbs")


def lister_informers(
    connection: Connection,
    listers: InMemoryListers,
    workloads: WorkloadSelectors,
    queue: ClusterEventReceiver,
) -> list[Informer[Any]]:
    ls = listers
    wl = workloads
    return [
        Informer(connection, SERVICES, service_from_dict, wl, name="services"),
        Informer(connection, REPLICATION_CONTROLLERS, replication_controller_from_dict, wl,
                 name="replicationcontrollers"),
        Informer(connection, REPLICA_SETS, replica_set_from_dict, wl, name="replicasets"),
        Informer(connection, STATEFUL_SETS, stateful_set_from_dict, wl, name="statefulsets"),
        Informer(connection, NAMESPACES, namespace_from_dict,
                 ListerFeed(ls.set_namespace, lambda o: ls.namespaces.pop(o.name, None))),
        *storage_informers(connection, ls, lambda: queue),
    ]  # fmt: skip
