"""Random device scenarios for the allocator oracle: one node, the slices around it, device
classes, claims and devices other claims hold, as the API's JSON (what both upstream's
allocator, hack/dra-oracle, and ours read).

The generator draws from small vocabularies on purpose, so that selectors, constraints,
counters, capacities and taints collide often: the interesting decisions are the close
ones (a device that almost matches, a pool one slice short, a counter one unit short).
"""

from __future__ import annotations

import random
from typing import Any

DRIVERS = ("gpu.example.com", "nic.example.com")
MODELS = ("a100", "h100", "l4")
NODE = "node-a"
OTHER_NODE = "node-b"
ZONES = ("z1", "z2")


def _attributes(rng: random.Random, driver: str, ample: bool) -> dict[str, Any]:
    attrs: dict[str, Any] = {}
    if ample or rng.random() < 0.9:
        attrs["model"] = {"string": rng.choice(MODELS)}
    if rng.random() < 0.7:
        attrs["numa"] = {"int": rng.randint(0, 2)}
    if rng.random() < 0.5:
        attrs["healthy"] = {"bool": rng.random() < 0.8}
    if rng.random() < 0.5:
        attrs["driverVersion"] = {"version": rng.choice(("1.0.0", "1.2.0", "2.0.0-rc.1"))}
    if rng.random() < 0.3:
        attrs[f"{driver}/pcieRoot"] = {"string": rng.choice(("pci0", "pci1"))}
    return attrs


def _capacity(rng: random.Random, shareable: bool) -> dict[str, Any]:
    cap: dict[str, Any] = {}
    if rng.random() < 0.8:
        entry: dict[str, Any] = {"value": rng.choice(("8Gi", "16Gi", "40Gi"))}
        if shareable and rng.random() < 0.6:
            kind = rng.random()
            if kind < 0.4:
                entry["requestPolicy"] = {
                    "default": "1Gi",
                    "validRange": {"min": "1Gi", "step": rng.choice(("1Gi", "2Gi"))},
                }
            elif kind < 0.7:
                entry["requestPolicy"] = {"default": "4Gi", "validValues": ["4Gi", "8Gi"]}
            else:
                entry["requestPolicy"] = {"default": "2Gi"}
        cap["memory"] = entry
    if rng.random() < 0.4:
        cap["cores"] = {"value": str(rng.choice((4, 8)))}
    return cap


def _device(
    rng: random.Random, driver: str, index: int, counters: bool, ample: bool
) -> dict[str, Any]:
    shareable = rng.random() < 0.15
    device: dict[str, Any] = {
        "name": f"dev-{index}",
        "attributes": _attributes(rng, driver, ample),
    }
    capacity = _capacity(rng, shareable)
    if capacity:
        device["capacity"] = capacity
    if shareable:
        device["allowMultipleAllocations"] = True
    if counters and rng.random() < 0.8:
        device["consumesCounters"] = [
            {"counterSet": "gpu-0", "counters": {"mem": {"value": rng.choice(("10Gi", "20Gi"))}}}
        ]
    if rng.random() < 0.12:
        device["taints"] = [
            {
                "key": rng.choice(("maintenance", "degraded")),
                "value": rng.choice(("", "true")),
                "effect": rng.choice(("NoSchedule", "NoExecute", "None")),
            }
        ]
    if rng.random() < 0.05:
        device["bindingConditions"] = ["dra.example.com/ready"]
        device["bindingFailureConditions"] = ["dra.example.com/failed"]
    return device


def _slices(rng: random.Random, ample: bool) -> list[dict[str, Any]]:
    slices: list[dict[str, Any]] = []
    for p in range(rng.randint(1, 4)):
        driver = rng.choice(DRIVERS)
        pool = f"pool-{p}"
        generation = rng.randint(1, 2)
        count = rng.randint(1, 2)
        # ample scenarios keep their pools on the node (or on all nodes)
        where = rng.choice((0.0, 0.0, 0.0, 0.9)) if ample else rng.random()
        present = count if ample or rng.random() < 0.85 else count - 1
        counters = rng.random() < 0.2
        for s in range(max(present, 0)):
            spec: dict[str, Any] = {
                "driver": driver,
                "pool": {"name": pool, "generation": generation, "resourceSliceCount": count},
            }
            if where < 0.6:
                spec["nodeName"] = NODE
            elif where < 0.7:
                spec["nodeName"] = OTHER_NODE
            elif where < 0.85:
                spec["nodeSelector"] = {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {"key": "zone", "operator": "In", "values": [rng.choice(ZONES)]}
                            ]
                        }
                    ]
                }
            else:
                spec["allNodes"] = True
            if counters and s == 0:
                spec["sharedCounters"] = [
                    {"name": "gpu-0", "counters": {"mem": {"value": rng.choice(("40Gi", "30Gi"))}}}
                ]
            else:
                spec["devices"] = [
                    _device(rng, driver, 10 * s + i, counters, ample)
                    for i in range(rng.randint(2, 6) if ample else rng.randint(0, 4))
                ]
            slices.append({"metadata": {"name": f"{driver}-{pool}-{s}"}, "spec": spec})
        if rng.random() < 0.15:
            # an older generation of the same pool: ignored
            slices.append(
                {
                    "metadata": {"name": f"{driver}-{pool}-old"},
                    "spec": {
                        "driver": driver,
                        "pool": {"name": pool, "generation": 0, "resourceSliceCount": 1},
                        "nodeName": NODE,
                        "devices": [_device(rng, driver, 99, False, ample)],
                    },
                }
            )
    return slices


SELECTORS = (
    'device.attributes["{d}"].model == "a100"',
    'device.attributes["{d}"].model != "l4"',
    '"numa" in device.attributes["{d}"] && device.attributes["{d}"].numa <= 1',
    'device.attributes["{d}"].?healthy.orValue(true)',
    'device.capacity["{d}"].?memory.orValue(quantity("0")).compareTo(quantity("16Gi")) >= 0',
    'has(device.attributes["{d}"].driverVersion) && '
    'device.attributes["{d}"].driverVersion.isGreaterThan(semver("1.1.0"))',
    # errs on a device without a model: a CEL runtime error, as upstream
    'device.attributes["{d}"].model.startsWith("a")',
)


def _classes(rng: random.Random) -> list[dict[str, Any]]:
    classes = []
    for driver in DRIVERS:
        name = driver.split(".")[0]
        selectors = [{"cel": {"expression": f'device.driver == "{driver}"'}}]
        if rng.random() < 0.3:
            expression = rng.choice(SELECTORS[:5]).format(d=driver)
            selectors.append({"cel": {"expression": expression}})
        spec: dict[str, Any] = {"selectors": selectors}
        if rng.random() < 0.3:
            spec["config"] = [
                {"opaque": {"driver": driver, "parameters": {"kind": "class", "n": name}}}
            ]
        classes.append({"metadata": {"name": name}, "spec": spec})
    return classes


def _exactly(rng: random.Random, classes: list[dict[str, Any]], ample: bool) -> dict[str, Any]:
    klass = rng.choice(classes)["metadata"]["name"]
    if not ample and rng.random() < 0.05:
        klass = "missing-class"
    driver = next((d for d in DRIVERS if d.startswith(klass)), DRIVERS[0])
    request: dict[str, Any] = {"deviceClassName": klass}
    if rng.random() < 0.12:
        request["allocationMode"] = "All"
    else:
        request["allocationMode"] = "ExactCount"
        request["count"] = rng.choice((1, 1, 1, 2) if ample else (1, 1, 1, 2, 3))
    if rng.random() < 0.4:
        # the last selector errs on devices without a model: not in ample scenarios
        choices = SELECTORS[:-1] if ample else SELECTORS
        request["selectors"] = [{"cel": {"expression": rng.choice(choices).format(d=driver)}}]
    if rng.random() < 0.08:
        request["adminAccess"] = True
    if rng.random() < 0.2:
        request["tolerations"] = [
            {"key": rng.choice(("maintenance", "degraded")), "operator": "Exists"}
        ]
    if rng.random() < 0.15:
        request["capacity"] = {"requests": {"memory": rng.choice(("1Gi", "3Gi", "5Gi"))}}
    return request


def _claim(
    rng: random.Random, index: int, classes: list[dict[str, Any]], ample: bool
) -> dict[str, Any]:
    requests = []
    for r in range(rng.randint(1, 3)):
        if rng.random() < 0.25:
            requests.append(
                {
                    "name": f"req-{r}",
                    "firstAvailable": [
                        {"name": f"alt-{a}", **_exactly(rng, classes, ample)}
                        for a in range(rng.randint(1, 3))
                    ],
                }
            )
        else:
            requests.append({"name": f"req-{r}", "exactly": _exactly(rng, classes, ample)})
    devices: dict[str, Any] = {"requests": requests}
    if rng.random() < 0.3:
        names = [r["name"] for r in requests]
        constraint: dict[str, Any] = {}
        if rng.random() < 0.7:
            constraint["requests"] = rng.sample(names, k=rng.randint(1, len(names)))
        attribute = rng.choice(("model", "numa", "pcieRoot", "driverVersion"))
        driver = rng.choice(DRIVERS)
        key = "matchAttribute" if rng.random() < 0.6 else "distinctAttribute"
        constraint[key] = f"{driver}/{attribute}"
        devices["constraints"] = [constraint]
    if rng.random() < 0.2:
        devices["config"] = [
            {
                "requests": rng.sample(
                    [r["name"] for r in requests], k=rng.randint(1, len(requests))
                ),
                "opaque": {"driver": DRIVERS[0], "parameters": {"kind": "claim"}},
            }
        ]
    return {
        "metadata": {"name": f"claim-{index}", "namespace": "default", "uid": f"uid-{index}"},
        "spec": {"devices": devices},
    }


def scenario(seed: int) -> dict[str, Any]:
    rng = random.Random(seed)
    # half the scenarios are "ample": more devices, complete pools, no missing class and
    # no selector that errs, so that most of them end in an allocation to compare; the
    # other half collide on purpose and end in "cannot allocate" or an error more often
    ample = rng.random() < 0.5
    slices = _slices(rng, ample)
    classes = _classes(rng)
    claims = [_claim(rng, i, classes, ample) for i in range(1 if ample else rng.randint(1, 2))]
    allocated = []
    for s in slices:
        spec = s["spec"]
        for d in spec.get("devices") or ():
            if rng.random() < 0.15:
                allocated.append([spec["driver"], spec["pool"]["name"], d["name"]])
    return {
        "node": {"metadata": {"name": NODE, "labels": {"zone": rng.choice(ZONES)}}},
        "slices": slices,
        "classes": classes,
        "claims": claims,
        "allocatedDevices": allocated,
    }
