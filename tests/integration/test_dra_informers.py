"""The DRA informers against the real API server (resource.k8s.io/v1, served by default
in v1.37.2): a DeviceClass, a node's ResourceSlice and ResourceClaims written through the
API reach the DeviceState; the allocator fed from it never hands out a device an
allocated claim holds, and gets it back when that claim is deallocated or deleted."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest

from scheduler.client.connection import Connection
from scheduler.dra.allocator import Allocator
from scheduler.dra.device_state import DeviceState
from scheduler.dra.pools import Node
from scheduler.dra.selector_cache import SelectorCache
from scheduler.framework.cluster_event import ClusterEvent
from tests.dra_cluster import RESOURCE, cluster_scoped, running_dra_informers
from tests.kube import ClusterHandle, until

pytestmark = pytest.mark.cluster


class Events:
    """The queue's side: which cluster events the informers reported."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def move_all_to_active_or_backoff(
        self, event: ClusterEvent, old: Any = None, new: Any = None
    ) -> int:
        self.seen.append(event.label)
        return 0


@pytest.fixture
async def conn(cluster: ClusterHandle) -> AsyncIterator[Connection]:
    connection = await Connection.from_kubeconfig(cluster.kubeconfig)
    yield connection
    await connection.close()


def _claim(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": CLASS}}]}},
    }


CLASS = "test-gpu"


async def test_allocated_claims_hold_their_devices_through_the_informers(
    cluster: ClusterHandle, conn: Connection
) -> None:
    suffix = uuid.uuid4().hex[:6]
    ns = cluster.create_namespace(f"dra-{suffix}")
    driver = f"gpu-{suffix}.example.com"
    node = "dra-node"  # slices name a node; the API server does not check that it exists
    cluster.api(
        "POST",
        f"{RESOURCE}/deviceclasses",
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": CLASS},
            "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{driver}"'}}]},
        },
    )
    cluster.api(
        "POST",
        f"{RESOURCE}/resourceslices",
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceSlice",
            "metadata": {"name": f"{node}-{suffix}"},
            "spec": {
                "driver": driver,
                "nodeName": node,
                "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                "devices": [{"name": "gpu-0"}, {"name": "gpu-1"}],
            },
        },
    )
    held = cluster.api("POST", f"{RESOURCE}/namespaces/{ns}/resourceclaims", _claim("held"))
    cluster.api("POST", f"{RESOURCE}/namespaces/{ns}/resourceclaims", _claim("wants"))

    state = DeviceState()
    events = Events()
    with cluster_scoped(cluster, f"deviceclasses/{CLASS}", f"resourceslices/{node}-{suffix}"):
        async with running_dra_informers(conn, state, lambda: events):
            assert CLASS in state.classes
            assert any(s.driver == driver for s in state.slices.values())
            assert state.get_claim(ns, "wants") is not None

            def allocate() -> list[str] | None:
                wants = state.get_claim(ns, "wants")
                assert wants is not None
                slices = [s for s in state.slices.values() if s.driver == driver]
                allocator = Allocator(
                    state.allocated_state(), state.classes, slices, SelectorCache()
                )
                results = allocator.allocate(Node(node, {}), [wants])
                return None if results is None else [d.device for d in results[0].devices]

            assert allocate() == ["gpu-0"]  # nothing held: the first device

            # another claim is allocated gpu-0 (as a scheduler's PreBind writes it)
            held["status"] = {
                "allocation": {
                    "devices": {
                        "results": [
                            {"request": "gpu", "driver": driver, "pool": node, "device": "gpu-0"}
                        ]
                    },
                    "nodeSelector": {
                        "nodeSelectorTerms": [
                            {
                                "matchFields": [
                                    {"key": "metadata.name", "operator": "In", "values": [node]}
                                ]
                            }
                        ]
                    },
                }
            }
            held = cluster.api(
                "PUT", f"{RESOURCE}/namespaces/{ns}/resourceclaims/held/status", held
            )
            await until(lambda: state.allocated_state().devices == {(driver, node, "gpu-0")})
            assert "ResourceClaimUpdate" in events.seen
            assert allocate() == ["gpu-1"]

            # gpu-1 goes to a third claim: nothing is left for "wants" on this node
            third = cluster.api(
                "POST", f"{RESOURCE}/namespaces/{ns}/resourceclaims", _claim("third")
            )
            third["status"] = {
                "allocation": {
                    "devices": {
                        "results": [
                            {"request": "gpu", "driver": driver, "pool": node, "device": "gpu-1"}
                        ]
                    }
                }
            }
            cluster.api("PUT", f"{RESOURCE}/namespaces/{ns}/resourceclaims/third/status", third)
            await until(lambda: len(state.allocated_state().devices) == 2)
            assert allocate() is None

            # deallocating one and deleting the other frees both
            held["status"] = {}
            cluster.api("PUT", f"{RESOURCE}/namespaces/{ns}/resourceclaims/held/status", held)
            cluster.api("DELETE", f"{RESOURCE}/namespaces/{ns}/resourceclaims/third")
            await until(lambda: state.allocated_state().devices == set())
            assert "ResourceClaimDelete" in events.seen
            assert allocate() == ["gpu-0"]
            assert all(count == 1 for count in state.holders().values())
