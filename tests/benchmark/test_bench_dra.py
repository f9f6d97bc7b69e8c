"""The pinned suite's DRA workloads and objects: pure data, no cluster."""

from __future__ import annotations

from collections import Counter

import pytest

from bench import dra_objects as do
from bench import pinned_workloads as pw


def test_dra_workloads_run_only_when_named() -> None:
    assert not any(w.dra for w in pw.select([500]))
    picked = pw.select([500], list(pw.DRA_WORKLOAD_NAMES))
    assert [w.name for w in picked] == list(pw.DRA_WORKLOAD_NAMES)
    assert all(w.dra and w.init_pods == 0 for w in picked)


def test_fill_grows_along_the_run_order_and_leaves_room_for_the_backlog() -> None:
    ws = pw.dra_workloads_for(500)
    fills = [w.filled_devices for w in ws]
    assert fills == sorted(fills) and fills[0] == 0 and fills[-1] > 0
    for w in ws:
        assert w.devices == 5000
        assert w.filled_devices + w.measured_pods <= w.devices
    full = ws[-1]
    # "full": after the fill every node has exactly as many free devices as the backlog
    # takes from it, one
    assert full.filled_devices + full.measured_pods == full.devices
    assert full.measured_pods == full.nodes


def test_a_workload_with_more_claims_than_devices_is_refused() -> None:
    with pytest.raises(ValueError, match="devices"):
        pw.PinnedWorkload("X", 2, "plain", 0, "claim-template", 5, filled_devices=16)


def test_fill_claims_spread_over_the_nodes_and_nest() -> None:
    nodes = 7
    held = [
        do.fill_allocation(k, nodes, pw.node_name(k % nodes))["status"]["allocation"]
        for k in range(3 * nodes + 2)
    ]
    results = [a["devices"]["results"][0] for a in held]
    ids = [(r["pool"], r["device"]) for r in results]
    assert len(set(ids)) == len(ids)  # never a device twice
    per_node = Counter(r["pool"] for r in results)
    assert max(per_node.values()) - min(per_node.values()) <= 1
    # the first claims of a larger fill are a smaller fill
    assert ids[:nodes] == [(do.pool_name(pw.node_name(i)), do.device_name(0)) for i in range(nodes)]
    term = held[3]["nodeSelector"]["nodeSelectorTerms"][0]["matchFields"][0]
    assert term["values"] == [pw.node_name(3)]
    with pytest.raises(ValueError):
        do.fill_allocation(do.DEVICES_PER_NODE * nodes, nodes, pw.node_name(0))


def test_the_slice_has_upstreams_devices_on_its_node() -> None:
    s = do.resource_slice("node-4")
    spec = s["spec"]
    assert spec["nodeName"] == "node-4" and spec["driver"] == do.DRIVER
    assert spec["pool"] == {"name": do.pool_name("node-4"), "generation": 1,
                            "resourceSliceCount": 1}  # fmt: skip
    devices = spec["devices"]
    assert [d["name"] for d in devices] == [do.device_name(j) for j in range(10)]
    assert devices[3]["attributes"]["resource.kubernetes.io/pciRoot"] == {"string": "pci0000:01"}
    assert devices[3]["capacity"]["memory"] == {"value": "24480Mi"}


def test_measured_pods_use_one_claim_from_the_template() -> None:
    w = pw.dra_workloads_for(500)[0]
    body = next(pw.measured_pods(w))
    assert body["spec"]["resourceClaims"] == [
        {"name": "resource", "resourceClaimTemplateName": do.CLAIM_TEMPLATE}
    ]
    assert body["spec"]["containers"][0]["resources"]["claims"] == [{"name": "resource"}]
    template = do.claim_template()["spec"]["spec"]["devices"]["requests"]
    assert template == [{"name": do.REQUEST, "exactly": {"deviceClassName": do.DEVICE_CLASS}}]
