"""An independent placement checker: reads only the API server's state (raw JSON) and
proves every bound pod satisfies its constraints and no node is over-committed.

It shares no code with the scheduler (its own quantity parser, selector matching and
taint logic), so a bug in the scheduler's plugins cannot hide in the checker too.
It checks final state, which is valid for workloads that only add pods: required node
affinity and selectors, taints (NoSchedule/NoExecute), host ports, resources on each
node counting every pod bound there (whoever bound it), required pod affinity and
anti-affinity (both directions), and DoNotSchedule topology spread skew.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

_SUFFIX = {
    "n": Decimal("1e-9"), "u": Decimal("1e-6"), "m": Decimal("1e-3"), "": Decimal(1),
    "k": Decimal(10**3), "M": Decimal(10**6), "G": Decimal(10**9), "T": Decimal(10**12),
    "Ki": Decimal(2**10), "Mi": Decimal(2**20), "Gi": Decimal(2**30), "Ti": Decimal(2**40),
}  # fmt: skip


def quantity(q: str | int) -> Decimal:
    s = str(q)
    m = re.fullmatch(r"([0-9.]+)(e[0-9]+)?([a-zA-Z]*)", s)
    if not m:
        raise ValueError(f"bad quantity {s}")
    num = Decimal(m.group(1) + (m.group(2) or ""))
    return num * _SUFFIX[m.group(3)]


def pod_requests(pod: dict[str, Any]) -> dict[str, Decimal]:
    spec = pod["spec"]
    total: dict[str, Decimal] = defaultdict(Decimal)
    for c in spec.get("containers", []):
        for k, v in (c.get("resources", {}).get("requests") or {}).items():
            total[k] += quantity(v)
    sidecars: dict[str, Decimal] = defaultdict(Decimal)
    for c in spec.get("initContainers", []) or []:
        req = {k: quantity(v) for k, v in (c.get("resources", {}).get("requests") or {}).items()}
        if c.get("restartPolicy") == "Always":
            for k, v in req.items():
                sidecars[k] += v
                total[k] += v
        else:
            for k, v in req.items():
                total[k] = max(total[k], v + sidecars[k])
    for k, v in (spec.get("overhead") or {}).items():
        total[k] += quantity(v)
    return dict(total)


def match_expressions(labels: dict[str, str], exprs: list[dict[str, Any]]) -> bool:
    for e in exprs:
        key, op, values = e["key"], e["operator"], e.get("values") or []
        has = key in labels
        if op == "In" and not (has and labels[key] in values):
            return False
        if op == "NotIn" and has and labels[key] in values:
            return False
        if op == "Exists" and not has:
            return False
        if op == "DoesNotExist" and has:
            return False
        if op in ("Gt", "Lt"):
            if not has:
                return False
            a, b = int(labels[key]), int(values[0])
            if (op == "Gt" and not a > b) or (op == "Lt" and not a < b):
                return False
    return True


def label_selector_matches(sel: dict[str, Any] | None, labels: dict[str, str]) -> bool:
    if sel is None:
        return False
    if any(labels.get(k) != v for k, v in (sel.get("matchLabels") or {}).items()):
        return False
    return match_expressions(labels, sel.get("matchExpressions") or [])


def node_affinity_ok(pod: dict[str, Any], node: dict[str, Any]) -> bool:
    labels = node["metadata"].get("labels") or {}
    spec = pod["spec"]
    if any(labels.get(k) != v for k, v in (spec.get("nodeSelector") or {}).items()):
        return False
    req = (
        (spec.get("affinity") or {})
        .get("nodeAffinity", {})
        .get("requiredDuringSchedulingIgnoredDuringExecution")
    )
    if not req:
        return True
    for term in req.get("nodeSelectorTerms", []):
        fields = {"metadata.name": node["metadata"]["name"]}
        exprs, fexprs = term.get("matchExpressions") or [], term.get("matchFields") or []
        # an empty term matches nothing
        if (exprs or fexprs) and match_expressions(labels, exprs) and match_expressions(fields, fexprs):
            return True
    return False


def tolerates(pod: dict[str, Any], taint: dict[str, Any]) -> bool:
    for t in pod["spec"].get("tolerations") or []:
        if t.get("effect") and t["effect"] != taint["effect"]:
            continue
        op = t.get("operator", "Equal")
        if not t.get("key") and op == "Exists":
            return True
        if t.get("key") != taint["key"]:
            continue
        if op == "Exists" or t.get("value", "") == taint.get("value", ""):
            return True
    return False


@dataclass
class Report:
    violations: list[str] = field(default_factory=list)
    bound: int = 0
    pending: int = 0

    def add(self, msg: str) -> None:
        self.violations.append(msg)


def check(
    pods: list[dict[str, Any]],
    nodes: list[dict[str, Any]],
    namespaces: dict[str, dict[str, str]],
    scheduler_name: str,
) -> Report:
    report = Report()
    by_name = {n["metadata"]["name"]: n for n in nodes}
    live = [p for p in pods if p.get("status", {}).get("phase") not in ("Succeeded", "Failed")]
    on_node: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for p in live:
        if p["spec"].get("nodeName"):
            on_node[p["spec"]["nodeName"]].append(p)

    # resources and ports: every pod on the node counts, whoever bound it
    for node_name, node_pods in on_node.items():
        node = by_name.get(node_name)
        if node is None:
            report.add(f"pods bound to missing node {node_name}")
            continue
        alloc = {k: quantity(v) for k, v in node["status"]["allocatable"].items()}
        used: dict[str, Decimal] = defaultdict(Decimal)
        for p in node_pods:
            for k, v in pod_requests(p).items():
                used[k] += v
        for k, v in used.items():
            if v > alloc.get(k, Decimal(0)):
                report.add(f"node {node_name} over-committed on {k}: {v} > {alloc.get(k, 0)}")
        if len(node_pods) > alloc.get("pods", Decimal(110)):
            report.add(f"node {node_name} has {len(node_pods)} pods > allowed {alloc['pods']}")
        seen_ports: set[tuple[str, int]] = set()
        for p in node_pods:
            for c in p["spec"]["containers"]:
                for port in c.get("ports") or []:
                    if port.get("hostPort"):
                        key = (port.get("protocol", "TCP"), int(port["hostPort"]))
                        if key in seen_ports:
                            report.add(f"host port {key} used twice on {node_name}")
                        seen_ports.add(key)

    ours = [p for p in live if p["spec"].get("schedulerName") == scheduler_name]
    for p in ours:
        node_name = p["spec"].get("nodeName")
        key = f"{p['metadata']['namespace']}/{p['metadata']['name']}"
        if not node_name:
            report.pending += 1
            continue
        report.bound += 1
        node = by_name.get(node_name)
        if node is None:
            continue
        if not node_affinity_ok(p, node):
            report.add(f"{key} on {node_name} violates its node selector/affinity")
        for taint in node["spec"].get("taints") or []:
            if taint["effect"] in ("NoSchedule", "NoExecute") and not tolerates(p, taint):
                report.add(f"{key} on {node_name} does not tolerate taint {taint['key']}")
        if node["spec"].get("unschedulable"):
            report.add(f"{key} placed on unschedulable node {node_name}")
        _check_inter_pod(report, p, node, live, by_name, namespaces)
        _check_spread(report, p, live, by_name)
    return report


def _term_namespaces(
    term: dict[str, Any], pod_ns: str, namespaces: dict[str, dict[str, str]]
) -> set[str]:
    names = set(term.get("namespaces") or [])
    sel = term.get("namespaceSelector")
    if sel is not None:
        if not sel:  # {} selects every namespace
            return set(namespaces)
        names |= {ns for ns, labels in namespaces.items() if label_selector_matches(sel, labels)}
    if not names and sel is None:
        names = {pod_ns}
    return names


def _domain(node: dict[str, Any] | None, key: str) -> str | None:
    if node is None:
        return None
    return (node["metadata"].get("labels") or {}).get(key)


def _check_inter_pod(
    report: Report,
    pod: dict[str, Any],
    node: dict[str, Any],
    live: list[dict[str, Any]],
    nodes: dict[str, dict[str, Any]],
    namespaces: dict[str, dict[str, str]],
) -> None:
    key = f"{pod['metadata']['namespace']}/{pod['metadata']['name']}"
    aff = pod["spec"].get("affinity") or {}
    others = [
        o
        for o in live
        if o["spec"].get("nodeName") and o["metadata"]["uid"] != pod["metadata"]["uid"]
    ]

    def matching(term: dict[str, Any], owner_ns: str) -> list[dict[str, Any]]:
        nss = _term_namespaces(term, owner_ns, namespaces)
        return [
            o for o in others
            if o["metadata"]["namespace"] in nss
            and label_selector_matches(term.get("labelSelector"), o["metadata"].get("labels") or {})
        ]  # fmt: skip

    for term in (aff.get("podAntiAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or []:
        tk = term["topologyKey"]
        mine = _domain(node, tk)
        if mine is None:
            continue
        for o in matching(term, pod["metadata"]["namespace"]):
            if _domain(nodes.get(o["spec"]["nodeName"]), tk) == mine:
                report.add(
                    f"{key} shares {tk}={mine} with {o['metadata']['name']} against its anti-affinity"
                )
    for term in (aff.get("podAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or []:
        tk = term["topologyKey"]
        mine = _domain(node, tk)
        ms = matching(term, pod["metadata"]["namespace"])
        if any(_domain(nodes.get(o["spec"]["nodeName"]), tk) == mine for o in ms):
            continue
        # upstream lets the first pod of a group land anywhere when it matches its own term
        # and no other pod matches anywhere; the final state then shows later members beside it
        self_match = label_selector_matches(
            term.get("labelSelector"), pod["metadata"].get("labels") or {}
        )
        if not (self_match and mine is not None):
            report.add(f"{key} has no pod matching its affinity in {tk}={mine}")


def _check_spread(
    report: Report,
    pod: dict[str, Any],
    live: list[dict[str, Any]],
    nodes: dict[str, dict[str, Any]],
) -> None:
    key = f"{pod['metadata']['namespace']}/{pod['metadata']['name']}"
    for c in pod["spec"].get("topologySpreadConstraints") or []:
        if c.get("whenUnsatisfiable", "DoNotSchedule") != "DoNotSchedule":
            continue
        tk = c["topologyKey"]
        # eligible domains: nodes that pass the pod's node affinity (policy Honor)
        domains: dict[str, int] = {}
        for n in nodes.values():
            d = _domain(n, tk)
            if d is not None and node_affinity_ok(pod, n):
                domains.setdefault(d, 0)
        for o in live:
            if o["metadata"]["namespace"] != pod["metadata"]["namespace"] or not o["spec"].get(
                "nodeName"
            ):
                continue
            if not label_selector_matches(
                c.get("labelSelector"), o["metadata"].get("labels") or {}
            ):
                continue
            n = nodes.get(o["spec"]["nodeName"])
            d = _domain(n, tk)
            if d in domains and n is not None and node_affinity_ok(pod, n):
                domains[d] += 1
        if domains and max(domains.values()) - min(domains.values()) > int(c["maxSkew"]):
            report.add(
                f"{key}: skew over {tk} is {max(domains.values()) - min(domains.values())} > {c['maxSkew']}"
            )
