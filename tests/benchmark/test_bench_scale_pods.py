"""The scale pods of `--init-pods` (bench/scale_pods.py): what they look like, where they
go, and that they never over-commit a node. No cluster."""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

import pytest

from bench import pinned_cli, scale_fill
from bench import pinned_workloads as pw
from bench import scale_pods as sp
from bench.workloads import NAMESPACE, ROLE_LABEL
from kas_dev.cluster.local import KWOK_IGNORED_LABEL


def _uids(total: int) -> dict[str, str]:
    return {d.owner_name: f"uid-{d.index}" for d in sp.deployments(total)}


def _cpu_m(q: str) -> int:
    return int(q[:-1]) if q.endswith("m") else int(float(q) * 1000)


def _mem_mi(q: str) -> int:
    assert q.endswith("Mi")
    return int(q[:-2])


def _requests(pod: dict[str, Any]) -> tuple[int, int]:
    cpu = mem = 0
    for c in pod["spec"]["containers"]:
        r = c["resources"]["requests"]
        cpu += _cpu_m(r["cpu"])
        mem += _mem_mi(r["memory"])
    return cpu, mem


def test_deployments_make_exactly_the_pods_asked_for() -> None:
    for total in (1, 7, 5000, 150_000):
        deps = sp.deployments(total)
        assert sum(d.replicas for d in deps) == total
        assert [d.first_pod for d in deps] == [sum(x.replicas for x in deps[:i])
                                               for i in range(len(deps))]  # fmt: skip
        assert len({d.owner_name for d in deps}) == len(deps)
    assert sp.deployments(0) == []


def test_a_pod_looks_like_a_deployments_replica() -> None:
    d = sp.deployments(100)[0]
    pod = sp.scale_pod(d, 3, 500, "the-uid")
    meta, spec = pod["metadata"], pod["spec"]
    assert meta["namespace"] == sp.SCALE_NAMESPACE != NAMESPACE
    assert meta["name"].startswith(f"{d.name}-{d.template_hash}-")
    assert len(meta["name"].rsplit("-", 1)[1]) == 5
    labels = meta["labels"]
    assert labels["app"] == d.name
    assert labels["pod-template-hash"] == d.template_hash
    assert labels[ROLE_LABEL] == sp.SCALE_ROLE
    # kwok leaves them alone: no status writes of its own through the measured runs
    assert labels[KWOK_IGNORED_LABEL[0]] == KWOK_IGNORED_LABEL[1]
    assert len(labels) >= 5
    [owner] = meta["ownerReferences"]
    assert owner == {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "name": d.owner_name,
        "uid": "the-uid",
        "controller": True,
        "blockOwnerDeletion": True,
    }
    # bound: no scheduler works on it
    assert spec["nodeName"] == "node-3"
    assert "schedulerName" not in spec
    assert 2 <= len(spec["containers"]) <= 3
    for c in spec["containers"]:
        assert set(c["resources"]["requests"]) == {"cpu", "memory"}
    assert {t["key"] for t in spec["tolerations"]} >= {
        "node.kubernetes.io/not-ready",
        "node.kubernetes.io/unreachable",
    }


def test_the_shapes_carry_affinity_and_spread_and_every_node_satisfies_them() -> None:
    deps = sp.deployments(1000)
    pods = [sp.scale_pod(d, 0, 30, "u") for d in deps[: len(sp.SHAPES)]]
    assert any("affinity" in p["spec"] for p in pods)
    assert any("topologySpreadConstraints" in p["spec"] for p in pods)
    assert any("affinity" not in p["spec"] for p in pods)
    node = pw.node_manifest(0)["metadata"]["labels"]
    for p in pods:
        terms = (p["spec"].get("affinity") or {}).get("nodeAffinity", {})
        required = terms.get("requiredDuringSchedulingIgnoredDuringExecution")
        for term in (required or {}).get("nodeSelectorTerms", []):
            for e in term["matchExpressions"]:
                assert e["operator"] == "In" and node[e["key"]] in e["values"]
        for c in p["spec"].get("topologySpreadConstraints", []):
            # a running pod's constraint never makes its own placement wrong
            assert c["whenUnsatisfiable"] == "ScheduleAnyway"
            assert c["labelSelector"] == {"matchLabels": {"app": p["metadata"]["labels"]["app"]}}
        # no label a workload's selector or the churn Service selects
        assert "color" not in p["metadata"]["labels"]
        assert p["metadata"]["labels"]["app"] != "foo"


def test_names_are_unique_and_stable() -> None:
    total, nodes = 20_000, 1000
    first = [p["metadata"]["name"] for p in sp.scale_pods(total, nodes, _uids(total))]
    again = [p["metadata"]["name"] for p in sp.scale_pods(total, nodes, _uids(total))]
    assert first == again
    assert len(set(first)) == total


def test_pods_spread_round_robin_without_over_committing_a_node() -> None:
    total, nodes = 150_000, 5000
    count: Counter[str] = Counter()
    cpu: defaultdict[str, int] = defaultdict(int)
    mem: defaultdict[str, int] = defaultdict(int)
    for p in sp.scale_pods(total, nodes, _uids(total)):
        node = p["spec"]["nodeName"]
        c, m = _requests(p)
        count[node] += 1
        cpu[node] += c
        mem[node] += m
        assert p["metadata"]["ownerReferences"][0]["uid"].startswith("uid-")
    assert len(count) == nodes
    assert set(count.values()) == {30}
    a = sp.NODE_ALLOCATABLE
    assert max(cpu.values()) <= a["cpu_m"] * sp.NODE_SHARE
    assert max(mem.values()) <= a["memory_mi"] * sp.NODE_SHARE
    assert max(count.values()) <= a["pods"] * sp.NODE_SHARE
    # the node the pinned suite makes is what the budget assumes
    status = pw.node_manifest(0)["status"]["allocatable"]
    assert (_cpu_m(status["cpu"]), status["memory"], int(status["pods"])) == (
        a["cpu_m"], f"{a['memory_mi'] // 1024}Gi", a["pods"],
    )  # fmt: skip


def test_too_many_pods_for_the_nodes_are_refused() -> None:
    cap = sp.max_per_node()
    sp.check_fits(cap * 500, 500)
    with pytest.raises(ValueError, match="at most"):
        sp.check_fits(cap * 500 + 1, 500)
    with pytest.raises(ValueError, match="at most"):
        next(sp.scale_pods(cap * 10 + 1, 10, {}))


def test_the_cli_refuses_init_pods_beside_a_workload_that_fills_the_nodes() -> None:
    ws = pw.select([500], ["SchedulingBasic", "PreemptionBasic"], memory=False)
    with pytest.raises(ValueError, match="PreemptionBasic"):
        pinned_cli.check_init_pods(5000, [500], ws)
    pinned_cli.check_init_pods(0, [500], ws)
    basic = [w for w in ws if w.name == "SchedulingBasic"]
    pinned_cli.check_init_pods(5000, [500], basic)
    with pytest.raises(ValueError):
        pinned_cli.check_init_pods(10**6, [500], basic)


def test_eta_reads_as_minutes_and_seconds() -> None:
    assert scale_fill._eta(0, 100, 5.0) == "?"
    assert scale_fill._eta(50, 100, 30.0) == "0m30s"
    assert scale_fill._eta(1000, 150_000, 4.0) == "9m56s"
