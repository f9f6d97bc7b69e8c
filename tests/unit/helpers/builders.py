"""Fluent builders for raw pod/node dicts and their records.

    pod = make_pod("p").priority(100).requests(cpu="2").obj()
    node = make_node("n1").capacity(cpu="4", memory="8Gi").zone("a").obj()

`.raw()` gives the dict as the API server would send it; `.obj()` runs it through
pod_from_dict/node_from_dict.
"""

from __future__ import annotations

import copy
import itertools
from typing import Any

from scheduler.model.node import NodeInfo, node_from_dict
from scheduler.model.pod import PodInfo, pod_from_dict

_uid = itertools.count(1)


def _res_name(key: str) -> str:
    """Keyword names: ephemeral_storage -> ephemeral-storage; pass names with dots or
    slashes through **{"example.com/gpu": "1"}."""
    return key.replace("_", "-") if key in ("ephemeral_storage",) else key


def _selector(
    match_labels: dict[str, str] | None, exprs: list[dict[str, Any]] | None
) -> dict[str, Any]:
    sel: dict[str, Any] = {}
    if match_labels:
        sel["matchLabels"] = dict(match_labels)
    if exprs:
        sel["matchExpressions"] = list(exprs)
    return sel


class PodBuilder:
    def __init__(self, name: str, namespace: str = "default") -> None:
        self._raw: dict[str, Any] = {
            "metadata": {
                "name": name,
                "namespace": namespace,
                "uid": f"uid-{name}-{next(_uid)}",
                "creationTimestamp": "2024-01-01T00:00:00Z",
                "resourceVersion": "1",
                "managedFields": [{"manager": "kubectl"}],
            },
            "spec": {"containers": [{"name": "c0", "image": "busybox", "resources": {}}]},
            "status": {"phase": "Pending"},
        }

    @property
    def _spec(self) -> dict[str, Any]:
        spec: dict[str, Any] = self._raw["spec"]
        return spec

    @property
    def _meta(self) -> dict[str, Any]:
        meta: dict[str, Any] = self._raw["metadata"]
        return meta

    def uid(self, uid: str) -> PodBuilder:
        self._meta["uid"] = uid
        return self

    def namespace(self, ns: str) -> PodBuilder:
        self._meta["namespace"] = ns
        return self

    def priority(self, p: int) -> PodBuilder:
        self._spec["priority"] = p
        return self

    def preemption_policy(self, policy: str) -> PodBuilder:
        self._spec["preemptionPolicy"] = policy
        return self

    def scheduler(self, name: str) -> PodBuilder:
        self._spec["schedulerName"] = name
        return self

    def node(self, name: str) -> PodBuilder:
        self._spec["nodeName"] = name
        self._raw["status"]["phase"] = "Running"
        return self

    def nominated(self, name: str) -> PodBuilder:
        self._raw["status"]["nominatedNodeName"] = name
        return self

    def labels(self, **labels: str) -> PodBuilder:
        self._meta.setdefault("labels", {}).update(labels)
        return self

    def label(self, key: str, value: str) -> PodBuilder:
        self._meta.setdefault("labels", {})[key] = value
        return self

    def started(self, ts: str) -> PodBuilder:
        self._raw["status"]["startTime"] = ts
        return self

    def terminating(self, ts: str = "2024-01-01T00:05:00Z") -> PodBuilder:
        self._meta["deletionTimestamp"] = ts
        return self

    def gate(self, name: str) -> PodBuilder:
        self._spec.setdefault("schedulingGates", []).append({"name": name})
        return self

    def requests(self, **res: str | int) -> PodBuilder:
        """Requests of the first container; keyword names use _ for - and __ for /
        (ephemeral_storage; extended ones via **{"example.com/gpu": "1"})."""
        reqs = {_res_name(k): str(v) for k, v in res.items()}
        self._spec["containers"][0]["resources"]["requests"] = reqs
        return self

    def container(self, image: str = "busybox", **res: str | int) -> PodBuilder:
        reqs = {_res_name(k): str(v) for k, v in res.items()}
        c = {"name": f"c{len(self._spec['containers'])}", "image": image}
        c["resources"] = {"requests": reqs} if reqs else {}  # type: ignore[assignment]
        self._spec["containers"].append(c)
        return self

    def image(self, image: str) -> PodBuilder:
        self._spec["containers"][0]["image"] = image
        return self

    def init_container(self, sidecar: bool = False, **res: str | int) -> PodBuilder:
        reqs = {_res_name(k): str(v) for k, v in res.items()}
        c: dict[str, Any] = {
            "name": f"i{len(self._spec.get('initContainers', []))}",
            "image": "init",
        }
        c["resources"] = {"requests": reqs}
        if sidecar:
            c["restartPolicy"] = "Always"
        self._spec.setdefault("initContainers", []).append(c)
        return self

    def overhead(self, **res: str) -> PodBuilder:
        self._spec["overhead"] = {_res_name(k): v for k, v in res.items()}
        return self

    def host_port(self, port: int, protocol: str = "TCP", host_ip: str = "") -> PodBuilder:
        p: dict[str, Any] = {"containerPort": port, "hostPort": port, "protocol": protocol}
        if host_ip:
            p["hostIP"] = host_ip
        self._spec["containers"][0].setdefault("ports", []).append(p)
        return self

    def toleration(
        self, key: str = "", value: str = "", effect: str = "", operator: str = "Equal"
    ) -> PodBuilder:
        t: dict[str, Any] = {"operator": operator}
        if key:
            t["key"] = key
        if value:
            t["value"] = value
        if effect:
            t["effect"] = effect
        self._spec.setdefault("tolerations", []).append(t)
        return self

    def node_selector(self, **labels: str) -> PodBuilder:
        self._spec["nodeSelector"] = dict(labels)
        return self

    def _affinity(self) -> dict[str, Any]:
        aff: dict[str, Any] = self._spec.setdefault("affinity", {})
        return aff

    def node_affinity_in(self, key: str, *values: str) -> PodBuilder:
        return self.node_affinity_term([{"key": key, "operator": "In", "values": list(values)}])

    def node_affinity_term(
        self, exprs: list[dict[str, Any]], fields: list[dict[str, Any]] | None = None
    ) -> PodBuilder:
        na = self._affinity().setdefault("nodeAffinity", {})
        req = na.setdefault(
            "requiredDuringSchedulingIgnoredDuringExecution", {"nodeSelectorTerms": []}
        )
        term: dict[str, Any] = {"matchExpressions": exprs}
        if fields:
            term["matchFields"] = fields
        req["nodeSelectorTerms"].append(term)
        return self

    def preferred_node_affinity(self, weight: int, key: str, *values: str) -> PodBuilder:
        na = self._affinity().setdefault("nodeAffinity", {})
        na.setdefault("preferredDuringSchedulingIgnoredDuringExecution", []).append(
            {
                "weight": weight,
                "preference": {
                    "matchExpressions": [{"key": key, "operator": "In", "values": list(values)}]
                },
            }
        )
        return self

    def preferred_node_affinity_term(
        self, weight: int, exprs: list[dict[str, Any]]
    ) -> PodBuilder:
        """A preferred node-affinity term with arbitrary expressions (e.g. Gt/Lt)."""
        na = self._affinity().setdefault("nodeAffinity", {})
        na.setdefault("preferredDuringSchedulingIgnoredDuringExecution", []).append(
            {"weight": weight, "preference": {"matchExpressions": exprs}}
        )
        return self

    def pod_resources(self, **res: str | int) -> PodBuilder:
        """Pod-level requests (spec.resources.requests)."""
        self._spec["resources"] = {"requests": {_res_name(k): str(v) for k, v in res.items()}}
        return self

    def container_status(
        self,
        name: str,
        allocated: dict[str, str] | None = None,
        actuated: dict[str, str] | None = None,
    ) -> PodBuilder:
        """A containerStatuses entry carrying what the kubelet allocated
        (allocatedResources) and actuated (resources.requests) during a resize."""
        cs: dict[str, Any] = {"name": name}
        if allocated is not None:
            cs["allocatedResources"] = dict(allocated)
        if actuated is not None:
            cs["resources"] = {"requests": dict(actuated)}
        self._raw["status"].setdefault("containerStatuses", []).append(cs)
        return self

    def pod_status_resources(
        self, allocated: dict[str, str] | None = None, actuated: dict[str, str] | None = None
    ) -> PodBuilder:
        """Pod-level resize status: status.allocatedResources and status.resources."""
        if allocated is not None:
            self._raw["status"]["allocatedResources"] = dict(allocated)
        if actuated is not None:
            self._raw["status"]["resources"] = {"requests": dict(actuated)}
        return self

    def resource_claim(self, name: str, template: str = "tmpl") -> PodBuilder:
        self._spec.setdefault("resourceClaims", []).append(
            {"name": name, "resourceClaimTemplateName": template}
        )
        return self

    def _pod_term(
        self,
        topology_key: str,
        match_labels: dict[str, str] | None,
        exprs: list[dict[str, Any]] | None,
        namespaces: list[str] | None,
        namespace_selector: dict[str, Any] | None,
    ) -> dict[str, Any]:
        term: dict[str, Any] = {
            "topologyKey": topology_key,
            "labelSelector": _selector(match_labels, exprs),
        }
        if namespaces is not None:
            term["namespaces"] = namespaces
        if namespace_selector is not None:
            term["namespaceSelector"] = namespace_selector
        return term

    def pod_affinity(
        self,
        topology_key: str,
        match_labels: dict[str, str] | None = None,
        *,
        exprs: list[dict[str, Any]] | None = None,
        anti: bool = False,
        weight: int = 0,
        namespaces: list[str] | None = None,
        namespace_selector: dict[str, Any] | None = None,
    ) -> PodBuilder:
        """Add a pod (anti-)affinity term; weight > 0 makes it preferred."""
        kind = "podAntiAffinity" if anti else "podAffinity"
        section = self._affinity().setdefault(kind, {})
        term = self._pod_term(topology_key, match_labels, exprs, namespaces, namespace_selector)
        if weight:
            section.setdefault("preferredDuringSchedulingIgnoredDuringExecution", []).append(
                {"weight": weight, "podAffinityTerm": term}
            )
        else:
            section.setdefault("requiredDuringSchedulingIgnoredDuringExecution", []).append(term)
        return self

    def spread(
        self,
        max_skew: int,
        topology_key: str,
        match_labels: dict[str, str] | None = None,
        *,
        when: str = "DoNotSchedule",
        min_domains: int | None = None,
        node_affinity_policy: str | None = None,
        node_taints_policy: str | None = None,
        match_label_keys: list[str] | None = None,
    ) -> PodBuilder:
        c: dict[str, Any] = {
            "maxSkew": max_skew,
            "topologyKey": topology_key,
            "whenUnsatisfiable": when,
            "labelSelector": _selector(match_labels, None),
        }
        if min_domains is not None:
            c["minDomains"] = min_domains
        if node_affinity_policy:
            c["nodeAffinityPolicy"] = node_affinity_policy
        if node_taints_policy:
            c["nodeTaintsPolicy"] = node_taints_policy
        if match_label_keys:
            c["matchLabelKeys"] = match_label_keys
        self._spec.setdefault("topologySpreadConstraints", []).append(c)
        return self

    def pvc(self, claim: str) -> PodBuilder:
        vols = self._spec.setdefault("volumes", [])
        vols.append({"name": f"v{len(vols)}", "persistentVolumeClaim": {"claimName": claim}})
        return self

    def owner(self, kind: str, name: str, uid: str = "") -> PodBuilder:
        self._meta.setdefault("ownerReferences", []).append(
            {"kind": kind, "name": name, "uid": uid or f"uid-{name}", "controller": True}
        )
        return self

    def condition(self, type_: str, status: str = "True", reason: str = "") -> PodBuilder:
        self._raw["status"].setdefault("conditions", []).append(
            {"type": type_, "status": status, "reason": reason}
        )
        return self

    def raw(self) -> dict[str, Any]:
        return copy.deepcopy(self._raw)

    def obj(self) -> PodInfo:
        return pod_from_dict(self.raw())


class NodeBuilder:
    def __init__(self, name: str) -> None:
        self._raw: dict[str, Any] = {
            "metadata": {
                "name": name,
                "uid": f"uid-node-{name}",
                "resourceVersion": "1",
                "labels": {"kubernetes.io/hostname": name},
                "managedFields": [{"manager": "kubelet"}],
            },
            "spec": {},
            "status": {
                "allocatable": {
                    "cpu": "4",
                    "memory": "8Gi",
                    "pods": "110",
                    "ephemeral-storage": "100Gi",
                },
                "conditions": [{"type": "Ready", "status": "True"}],
            },
        }

    def capacity(self, **res: str | int) -> NodeBuilder:
        alloc = self._raw["status"]["allocatable"]
        for k, v in res.items():
            alloc[_res_name(k)] = str(v)
        return self

    def labels(self, **labels: str) -> NodeBuilder:
        self._raw["metadata"]["labels"].update(labels)
        return self

    def label(self, key: str, value: str) -> NodeBuilder:
        self._raw["metadata"]["labels"][key] = value
        return self

    def zone(self, zone: str) -> NodeBuilder:
        return self.label("topology.kubernetes.io/zone", zone)

    def taint(self, key: str, value: str = "", effect: str = "NoSchedule") -> NodeBuilder:
        self._raw["spec"].setdefault("taints", []).append(
            {"key": key, "value": value, "effect": effect}
        )
        return self

    def unschedulable(self, flag: bool = True) -> NodeBuilder:
        self._raw["spec"]["unschedulable"] = flag
        return self

    def image(self, name: str, size: int) -> NodeBuilder:
        self._raw["status"].setdefault("images", []).append({"names": [name], "sizeBytes": size})
        return self

    def not_ready(self) -> NodeBuilder:
        self._raw["status"]["conditions"] = [{"type": "Ready", "status": "False"}]
        return self

    def version(self, rv: str) -> NodeBuilder:
        self._raw["metadata"]["resourceVersion"] = rv
        return self

    def raw(self) -> dict[str, Any]:
        return copy.deepcopy(self._raw)

    def obj(self) -> NodeInfo:
        return node_from_dict(self.raw())


def make_pod(name: str, namespace: str = "default") -> PodBuilder:
    return PodBuilder(name, namespace)


def make_node(name: str) -> NodeBuilder:
    return NodeBuilder(name)


# ---------------------------------------------------------------- harness for plugin tests


def make_framework(
    plugins: list[str] | None = None,
    args: dict[str, Any] | None = None,
    handle: Any = None,
    percentage: int | None = None,
) -> Any:
    """A Framework with the default plugins (minus DefaultPreemption) or `plugins` as
    multiPoint; `args` maps plugin name -> raw args dict."""
    from scheduler.catalog import profile_for
    from scheduler.config import names
    from scheduler.config.args import parse_plugin_args
    from scheduler.framework import Framework
    from scheduler.plugins.registry import in_tree_registry

    refs = tuple(r for r in names.DEFAULT_MULTI_POINT if r.name != names.DEFAULT_PREEMPTION)
    if plugins is not None:
        refs = tuple(names.PluginRef(p) for p in plugins)
    parsed = {n: parse_plugin_args(n, a, n) for n, a in (args or {}).items()}
    profile = profile_for(refs, plugin_args=parsed, percentage_of_nodes_to_score=percentage)
    return Framework(profile, in_tree_registry(), handle)


def make_snapshot(nodes: list[NodeBuilder], pods: list[PodBuilder] | None = None) -> Any:
    from scheduler.cache import Cache

    cache = Cache()
    for n in nodes:
        cache.add_node(n.obj())
    for p in pods or []:
        cache.add_pod(p.obj())
    return cache.new_snapshot()


def filter_statuses(fw: Any, pod: PodInfo, snapshot: Any) -> dict[str, Any]:
    """node -> Status from the per-node Filter path, after checking that the batch path
    (filter_batch over the whole table) gives the same verdicts and reasons."""
    import numpy as np

    from scheduler.framework import CycleState, Status
    from scheduler.framework.status import Code

    state = CycleState()
    _, st = fw.run_pre_filter(state, pod, snapshot)
    names_ = snapshot.node_names()
    if not st.ok:
        return dict.fromkeys(names_, st)
    per_node = {n: fw.run_filter(state, pod, snapshot.get(n)) for n in names_}
    # batch path, plugin by plugin on the survivors, as the runtime does
    alive = snapshot.live_slots()
    batch: dict[str, Any] = {}
    for p in fw.filter_plugins:
        if p.name in state.skip_filter:
            continue
        if hasattr(p, "filter_batch"):
            res = p.filter_batch(state, pod, snapshot, alive)
            for i, slot in enumerate(alive.tolist()):
                if not res.passed[i]:
                    idx = 0 if res.reasons is None else int(res.reasons[i])
                    batch[snapshot.view(slot).name] = res.statuses[idx]
            alive = alive[res.passed]
        else:
            keep = []
            for slot in alive.tolist():
                s = p.filter(state, pod, snapshot.view(slot))
                if not s.ok:
                    batch[snapshot.view(slot).name] = s
                keep.append(s.ok)
            alive = alive[np.asarray(keep, dtype=np.bool_)] if keep else alive
    for n in names_:
        b = batch.get(n, Status.success())
        assert (b.code, b.reasons) == (per_node[n].code, per_node[n].reasons), (n, b, per_node[n])
    return {n: s for n, s in per_node.items() if s.code != Code.SUCCESS}


def reasons_of(statuses: dict[str, Any]) -> dict[str, str]:
    return {n: s.message() for n, s in statuses.items()}
