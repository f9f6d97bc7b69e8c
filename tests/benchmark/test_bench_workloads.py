"""bench.workloads: the suites produce valid Node and Pod objects.

"Valid" is checked with the project's own model parsers (the same code the scheduler
uses to read what the API server sends) plus the few API rules that matter here."""

from __future__ import annotations

import re
from typing import Any

import pytest

from bench import workloads as wl
from bench.procs import scheduler_config
from kas_dev.cluster.nodes import node_manifests
from scheduler.catalog import config_from_dict
from scheduler.model.node import node_from_dict
from scheduler.model.pod import pod_from_dict

DNS1123 = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
ALL = [w for ws in wl.SUITES.values() for w in ws]


def _check_pod(p: dict[str, Any]) -> None:
    meta, spec = p["metadata"], p["spec"]
    assert p["apiVersion"] == "v1" and p["kind"] == "Pod"
    assert DNS1123.match(meta["name"]) and len(meta["name"]) <= 63
    assert meta["namespace"] == wl.NAMESPACE
    assert meta["labels"][wl.ROLE_LABEL] in ("init", "measured", "churn", "warmup")
    assert spec["schedulerName"] == wl.SCHEDULER_NAME
    assert "priority" not in spec  # the Priority admission plugin sets it from the class
    c = spec["containers"][0]
    assert c["resources"]["requests"] == c["resources"]["limits"]
    rec = pod_from_dict({**p, "metadata": {**meta, "uid": "u-" + meta["name"]}})
    assert rec.key == f"{wl.NAMESPACE}/{meta['name']}"


@pytest.mark.parametrize("w", ALL, ids=lambda w: f"{w.name}-{w.nodes}")
def test_every_object_of_every_workload_is_valid(w: wl.Workload) -> None:
    nodes = node_manifests(wl.node_groups(w))
    assert len(nodes) == w.nodes
    names = {n["metadata"]["name"] for n in nodes}
    assert names == set(wl.all_node_names(w))
    for n in nodes:
        node_from_dict({**n, "metadata": {**n["metadata"], "uid": "u"}})
    init = list(wl.init_pods(w))
    measured = list(wl.measured_pods(w))
    assert len(init) == w.init_pods and len(measured) == w.measured_pods
    for p in init:
        assert p["spec"]["nodeName"] in set(wl.schedulable_node_names(w))
    for p in [*init, *measured, wl.warmup_pod()]:
        _check_pod(p)
    all_names = [p["metadata"]["name"] for p in [*init, *measured, wl.warmup_pod()]]
    if w.churn_role:
        churn = [wl.churn_pod(w, i) for i in range(w.churn_max)]
        for p in churn:
            _check_pod(p)
        all_names += [p["metadata"]["name"] for p in churn]
    assert len(all_names) == len(set(all_names)), "pod names must be unique in a run"


def test_preemption_workloads_fill_nodes_as_upstream() -> None:
    w = wl.suite("smoke", only=["PreemptionAsync"])[0]
    init = list(wl.init_pods(w))
    per_node: dict[str, int] = {}
    for p in init:
        assert p["spec"]["containers"][0]["resources"]["requests"]["cpu"] == "900m"
        per_node[p["spec"]["nodeName"]] = per_node.get(p["spec"]["nodeName"], 0) + 1
    assert set(per_node.values()) == {4}
    pre = wl.churn_pod(w, 0)
    assert pre["spec"]["priorityClassName"] == wl.HIGH_PRIORITY_CLASS
    assert pre["spec"]["containers"][0]["resources"]["requests"]["cpu"] == "3000m"
    assert w.churn_per_second == 5.0
    measured = next(wl.measured_pods(w))
    assert measured["spec"]["containers"][0]["resources"]["requests"]["cpu"] == "100m"


def test_mixed_workload_has_every_shape_and_tainted_nodes() -> None:
    w = wl.suite("smoke", only=["SchedulingMixed"])[0]
    shapes = {p["metadata"]["labels"][wl.KIND_LABEL] for p in wl.measured_pods(w)}
    assert shapes == set(wl.MIXED_SHAPES)
    tainted = [n for n in node_manifests(wl.node_groups(w)) if n["spec"].get("taints")]
    assert tainted and len(tainted) == w.nodes // 10
    anti = [p for p in wl.measured_pods(w) if "podAntiAffinity" in p["spec"].get("affinity", {})]
    groups: dict[str, int] = {}
    for p in anti:
        g = p["metadata"]["labels"]["bench.kas/anti"]
        groups[g] = groups.get(g, 0) + 1
    assert max(groups.values()) <= len(wl.schedulable_node_names(w))


def test_scaling_keeps_the_ratios() -> None:
    w = wl.suite("default", nodes=100, only=["PreemptionAsync"])[0]
    assert (w.nodes, w.init_pods, w.measured_pods, w.churn_max) == (100, 400, 200, 100)
    w = wl.suite("smoke", pods=7, only=["SchedulingBasic"])[0]
    assert w.measured_pods == 7 and w.nodes == 50


def test_unknown_names_are_refused() -> None:
    with pytest.raises(ValueError, match="unknown suite"):
        wl.suite("nope")
    with pytest.raises(ValueError, match="unknown workload"):
        wl.suite("smoke", only=["Nope"])
    with pytest.raises(ValueError, match="unknown kind"):
        wl.Workload("x", "weird", 1, 0, 1)


@pytest.mark.parametrize("contender", ["upstream", "ours-async", "ours-sync"])
def test_scheduler_configuration_is_accepted_by_our_loader(contender: str, tmp_path: Any) -> None:
    raw = scheduler_config(contender, tmp_path / "kubeconfig", qps=5000.0, burst=5000)
    assert raw["leaderElection"] == {"leaderElect": False}
    cfg = config_from_dict(raw)
    assert [p.scheduler_name for p in cfg.profiles] == [wl.SCHEDULER_NAME]
    assert cfg.client_connection.qps == 5000.0 and cfg.client_connection.burst == 5000
    if contender == "upstream":
        assert "pluginConfig" not in raw["profiles"][0]  # upstream's decoder is strict
