"""The verdict cache gives what a fresh search gives: random clusters of nodes with
devices, classes with CEL selectors and pods with claims, each pod filtered on every
node by a DynamicResources with the cache and by one whose cache never remembers, both
reading one device state; devices then taken (Reserve), given back (Unreserve), a
claim's allocation seen and dropped, a slice republished. Every node's Status and
allocation must be the same, and the cache must have answered some of them."""

from __future__ import annotations

import random
from typing import Any

import pytest

from scheduler.cache.node_view import NodeView
from scheduler.dra.device_state import DeviceState
from scheduler.dra.resources import claim_from_dict, device_class_from_dict, slice_from_dict
from scheduler.dra.verdict_cache import VerdictCache
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.handle import Handle
from scheduler.model.node import node_from_dict
from scheduler.model.pod import PodInfo, pod_from_dict
from scheduler.plugins.dynamic_resources import DynamicResources

DRIVER = "gpu.example.com"


class _Forgetful(VerdictCache):
    """A cache that never remembers: every Filter searches."""

    def put(self, *args: Any, **kwargs: Any) -> None:
        return None


def _slice(node: str, devices: int, generation: int, rng: random.Random) -> dict[str, Any]:
    return {
        "metadata": {"name": f"slice-{node}"},
        "spec": {
            "driver": DRIVER,
            "nodeName": node,
            "pool": {"name": node, "generation": generation, "resourceSliceCount": 1},
            "devices": [
                {
                    "name": f"d{j}-g{generation}",
                    "attributes": {"model": {"string": rng.choice(["a", "b"])}},
                    **(
                        {"taints": [{"key": "k", "value": "v", "effect": "NoSchedule"}]}
                        if rng.random() < 0.1
                        else {}
                    ),
                }
                for j in range(devices)
            ],
        },
    }


def _class(name: str, expression: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {"selectors": [{"cel": {"expression": expression}}]},
    }


def _pod_and_claim(i: int, rng: random.Random) -> tuple[PodInfo, dict[str, Any]]:
    request: dict[str, Any] = {"name": "r", "exactly": {"deviceClassName": "any", "count": 1}}
    if rng.random() < 0.4:  # else the common claim, which the cache is for
        request["exactly"] = {
            "deviceClassName": rng.choice(["any", "model-a"]),
            "count": rng.randint(1, 2),
        }
    if rng.random() < 0.3:
        request["exactly"]["selectors"] = [
            {"cel": {"expression": 'device.attributes["gpu.example.com"].model == "b"'}}
        ]
    if rng.random() < 0.2:
        request["exactly"]["tolerations"] = [{"key": "k", "operator": "Exists"}]
    claim = {
        "metadata": {"name": f"c{i}", "namespace": "ns", "uid": f"claim-{i}"},
        "spec": {"devices": {"requests": [request]}},
    }
    pod = pod_from_dict(
        {
            "metadata": {"name": f"p{i}", "namespace": "ns", "uid": f"pod-{i}"},
            "spec": {
                "containers": [{"name": "c"}],
                "resourceClaims": [{"name": "x", "resourceClaimName": f"c{i}"}],
            },
        }
    )
    return pod, claim


@pytest.mark.parametrize("seed", range(12))
def test_cached_verdicts_are_what_a_fresh_search_finds(seed: int) -> None:
    rng = random.Random(seed)
    state = DeviceState()
    state.set_class(device_class_from_dict(_class("any", f'device.driver == "{DRIVER}"')))
    state.set_class(device_class_from_dict(_class(
        "model-a", f'device.attributes["{DRIVER}"].model == "a"')))  # fmt: skip
    nodes = [f"n{k}" for k in range(rng.randint(3, 8))]
    generation = {n: 1 for n in nodes}
    for n in nodes:
        state.set_slice(_published(n, rng, generation[n]))
    views = [NodeView(node_from_dict({"metadata": {"name": n, "labels": {}}})) for n in nodes]
    cached = DynamicResources(Handle(device_state=state))
    fresh = DynamicResources(Handle(device_state=state))
    fresh.verdicts = _Forgetful()
    reserved: list[tuple[CycleState, PodInfo, str]] = []
    compared = 0
    for i in range(40):
        pod, claim = _pod_and_claim(i, rng)
        state.set_claim(claim_from_dict(claim))
        answers = []
        for plugin in (cached, fresh):
            cycle = CycleState()
            plugin.pre_filter(cycle, pod, None)  # type: ignore[arg-type]
            per_node = []
            for view in views:
                status = plugin.filter(cycle, pod, view)
                s = cycle.get("DynamicResources")
                allocation = s.node_allocations.get(view.name) if s is not None else None
                devices = (
                    [[(d.pool, d.device, d.request) for d in r.devices] for r in allocation.results]
                    if allocation is not None
                    else None
                )
                per_node.append((view.name, status.code, status.reasons, devices))
            answers.append((cycle, per_node))
        assert answers[0][1] == answers[1][1], f"pod {i}"
        compared += len(views)
        cycle, per_node = answers[0]
        feasible = [name for name, code, _, _ in per_node if code.name == "SUCCESS"]
        if feasible and rng.random() < 0.8:
            node = rng.choice(feasible)
            assert cached.reserve(cycle, pod, node).ok
            reserved.append((cycle, pod, node))
        roll = rng.random()
        if reserved and roll < 0.15:  # Unreserve: the devices come back
            c, p, n = reserved.pop(rng.randrange(len(reserved)))
            cached.unreserve(c, p, n)
        if rng.random() < 0.2:  # a node's slice republished (a new generation, new devices)
            n = rng.choice(nodes)
            generation[n] += 1
            state.set_slice(_published(n, rng, generation[n]))
    assert compared > 0
    assert cached.verdicts.hits > 0, "the cache never answered"


def _published(node: str, rng: random.Random, generation: int) -> Any:
    return slice_from_dict(_slice(node, rng.randint(1, 4), generation, rng))
