"""The dynamic-resource-allocation objects of the pinned suite's DRA workloads, modelled
on upstream's scheduler_perf (k8s.io/kubernetes v1.37.2,
test/integration/scheduler_perf/dra/templates):

- one ResourceSlice per node (resourceslice-basic-devices.yaml): `DEVICES_PER_NODE`
  devices with the attributes and capacities of upstream's template, pool and slice
  named after the node;
- the DeviceClass test-class (deviceclass.yaml) selecting the driver by CEL;
- the ResourceClaimTemplate test-claim-template (resourceclaimtemplate.yaml): one
  request of one device of that class;
- "fill" claims (resourceclaim.yaml plus upstream's allocResourceClaims op): claims
  allocated by the harness before a run, so that a run starts with the cluster's devices
  empty, half or nearly all in use. Fill claim k holds device k // nodes of node
  k % nodes: the sets of different sizes nest, and every node is filled alike.

Pure data: unit-tested without a cluster.
"""

from __future__ import annotations

from typing import Any

from bench.workloads import NAMESPACE, ROLE_LABEL

DRIVER = "test-driver.cdi.k8s.io"
DEVICE_CLASS = "test-class"
CLAIM_TEMPLATE = "test-claim-template"
DEVICES_PER_NODE = 10  # the template's numDevices
PCI_ROOTS = 2  # the template's numPCIRoots
FILL_LABEL = "bench.kas/fill-claim"
REQUEST = "req-0"
RESOURCE_API = "/apis/resource.k8s.io/v1"
SLICES = f"{RESOURCE_API}/resourceslices"
CLASSES = f"{RESOURCE_API}/deviceclasses"
CLAIMS = f"{RESOURCE_API}/namespaces/{NAMESPACE}/resourceclaims"
TEMPLATES = f"{RESOURCE_API}/namespaces/{NAMESPACE}/resourceclaimtemplates"


def pool_name(node: str) -> str:
    return f"resourceslice-{node}"


def device_name(j: int) -> str:
    return f"basic-device-{j}"


def _device(j: int) -> dict[str, Any]:
    root = j % PCI_ROOTS
    attributes = {
        "driver": {"string": "xe"},
        "driverVersion": {"version": "1.2.3"},
        "resource.k8s.io/pciRoot": {"string": str(root)},
        "family": {"string": "Arc Pro B-Series"},
        "health": {"string": "Healthy"},
        "model": {"string": "B60"},
        "pciAddress": {"string": f"0000:0{j}:00.0"},
        "pciId": {"string": "0xe211"},
        "pciRoot": {"string": f"0{root}"},
        "resource.kubernetes.io/pciBusID": {"string": f"0000:0{j}:00.0"},
        "resource.kubernetes.io/pciRoot": {"string": f"pci0000:0{root}"},
        "sriov": {"bool": True},
        "type": {"string": "gpu"},
    }
    capacity = {"memory": {"value": "24480Mi"}, "millicores": {"value": "1k"}}
    return {"name": device_name(j), "attributes": attributes, "capacity": capacity}


def resource_slice(node: str, devices: int = DEVICES_PER_NODE) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": pool_name(node)},
        "spec": {
            "pool": {"name": pool_name(node), "generation": 1, "resourceSliceCount": 1},
            "driver": DRIVER,
            "nodeName": node,
            "devices": [_device(j) for j in range(devices)],
        },
    }


def device_class() -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": DEVICE_CLASS},
        "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]},
    }


def _claim_spec() -> dict[str, Any]:
    request = {"name": REQUEST, "exactly": {"deviceClassName": DEVICE_CLASS}}
    return {"devices": {"requests": [request]}}


def claim_template() -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": CLAIM_TEMPLATE, "namespace": NAMESPACE},
        "spec": {"spec": _claim_spec()},
    }


def fill_claim_name(k: int) -> str:
    return f"fill-{k}"


def fill_claim(k: int) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {
            "name": fill_claim_name(k),
            "namespace": NAMESPACE,
            "labels": {FILL_LABEL: "true", ROLE_LABEL: "init"},
        },
        "spec": _claim_spec(),
    }


def fill_allocation(k: int, nodes: int, node_name: str) -> dict[str, Any]:
    """The status (a merge patch) that allocates fill claim k: device k // nodes of node
    k % nodes (`node_name` names that node), restricted to that node as the allocator's
    result would be."""
    if k // nodes >= DEVICES_PER_NODE:
        raise ValueError(f"fill claim {k}: only {DEVICES_PER_NODE * nodes} devices")
    return {
        "status": {
            "allocation": {
                "devices": {
                    "results": [
                        {
                            "request": REQUEST,
                            "driver": DRIVER,
                            "pool": pool_name(node_name),
                            "device": device_name(k // nodes),
                        }
                    ]
                },
                "nodeSelector": {
                    "nodeSelectorTerms": [
                        {
                            "matchFields": [
                                {"key": "metadata.name", "operator": "In", "values": [node_name]}
                            ]
                        }
                    ]
                },
            }
        }
    }


def with_claim_template(pod: dict[str, Any]) -> dict[str, Any]:
    """templates/pod-with-claim-template.yaml: the pod's container uses one claim made
    from the template."""
    claim = {"name": "resource", "resourceClaimTemplateName": CLAIM_TEMPLATE}
    pod["spec"]["resourceClaims"] = [claim]
    pod["spec"]["containers"][0]["resources"]["claims"] = [{"name": "resource"}]
    return pod
