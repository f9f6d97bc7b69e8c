"""Preemption's choice against the real control plane: which node, which victims.

Each scenario owns a few kwok nodes (label scenario=<id>); its preemptor selects them
with a nodeSelector, so every other node is UnschedulableAndUnresolvable for it and the
scenarios share one cluster and one scheduler without touching each other. Victims are
bound at creation and get chosen start times; everything (pods, start times, PDB status)
is in place before the scheduler starts, so its first LIST sees exactly what the
brute force in the test sees.

The brute force (tests.preemption_helpers) is written independently of the scheduler:
per node upstream's SelectVictimsOnNode (remove all lower-priority pods, PDB split,
greedy reprieve, violating pods first), then pickOneNodeForPreemption's criteria. Every
scenario's optimum is unique and each is decided by a different criterion (asserted).

"Exactly one DELETE per victim" is counted from the API server's audit log: the DELETE
requests sent with the scheduler's own identity (a client certificate of its own). The
DELETE webhook is no counter of requests: kube-apiserver may call it twice for one
graceful DELETE (see RecordingWebhook.last_old_object), and not at all for a second
DELETE of a pod already terminating (that one returns before admission). The webhook
still tells what the pod looked like at the DELETE the API server carried out.
"""

from __future__ import annotations

import datetime as dt
import random
import re
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import pytest

from kas_dev.cluster.local import LocalCluster
from kas_dev.cluster.nodes import NodeGroup
from tests.faults import audit
from tests.identity import kubeconfig_for
from tests.kube import ClusterHandle, pod_manifest, wait_for
from tests.preemption_helpers import (
    BASE_TIME,
    BPDB,
    SCHED,
    BPod,
    Choice,
    PodWatch,
    RecordingWebhook,
    bnode,
    bpod,
    brute_force,
    create_pdb,
    create_priority_classes,
    disruption_target,
    node_of,
    preempted_events,
    set_start_time,
    unique_best,
    victim_manifest,
    wait_pdb_allowed,
    wait_running,
)
from tests.scheduler_process import SchedulerProcess, write_config

pytestmark = pytest.mark.cluster

NS = "choice"
SCOPE_ALL_SCHED = "scope-all"
OTHER_SCHED = "other-scheduler"
# the schedulers' client identities (the audit policy records the group they are in)
SCHED_USER = "choice-scheduler"
SCHED_ALL_USER = "choice-scheduler-all"
PRIORITIES = {
    "floor": -2147483648,
    "low": 100,
    "low2": 150,
    "mid": 200,
    "high": 1000,
    "top": 2000,
}
NEVER_CLASS = "high-never"
PREEMPTOR_CPU = "3"


@dataclass(frozen=True)
class V:
    """A pod already running on a scenario node."""

    cls: str
    cpu: str
    start: int  # seconds after BASE_TIME
    labels: dict[str, str] = field(default_factory=dict)
    scheduler: str = SCHED


@dataclass
class Scenario:
    id: str
    nodes: list[list[V]]
    decisive: int | None  # the criterion telling the best from the runner-up
    pdbs: dict[str, int] = field(default_factory=dict)  # app label -> disruptions allowed

    def node_name(self, i: int) -> str:
        return f"{self.id}-{i}"

    def pod_name(self, i: int, j: int) -> str:
        return f"{self.id}{i}-v{j}"


def _random_scenario(seed: int) -> Scenario:
    """5 nodes with random victims (priority, size, start, PDB membership); regenerated
    (deterministically) until the optimum is unique."""
    rng = random.Random(seed)
    nodes: list[list[V]] = []
    for _ in range(5):
        free = 4000
        vs: list[V] = []
        while free >= 500:
            cpu = min(rng.choice([500, 1000, 1500, 2000]), free)
            free -= cpu
            cls = rng.choice(["low", "low2", "mid", "mid", "top"])
            labels = {"app": "guarded-r"} if rng.random() < 0.3 else {}
            vs.append(V(cls, f"{cpu}m", rng.randrange(0, 600), labels))
        nodes.append(vs)
    return Scenario("r", nodes, decisive=None, pdbs={"guarded-r": 1})


SCENARIOS = [
    # lowest highest-victim priority (a-2's victims top at low2; a "top" pod stays)
    Scenario("a", [
        [V("mid", "2", 10), V("low", "2", 11)],
        [V("mid", "1", 10), V("mid", "1", 12), V("low", "1", 13), V("low", "1", 14)],
        [V("top", "500m", 10), V("low", "1700m", 11), V("low2", "1800m", 12)],
        [V("mid", "3", 10), V("low", "1", 12)],
    ], decisive=1),
    # smallest priority sum, the top victims being equal
    Scenario("b", [
        [V("mid", "2", 10), V("mid", "2", 11)],
        [V("mid", "2", 10), V("low", "2", 11)],
        [V("mid", "2", 10), V("low2", "2", 11)],
    ], decisive=2),
    # fewest victims: priorities at the int32 floor make every sum 0 (upstream adds
    # MaxInt32+1 to each); a sum without that offset would prefer the most victims
    Scenario("c", [
        [V("floor", "2", 10), V("floor", "2", 11)],
        [V("floor", "3", 20), V("floor", "1", 10)],
    ], decisive=3),
    # latest start among the highest-priority victims
    Scenario("d", [
        [V("mid", "2", 10), V("low", "2", 10)],
        [V("mid", "2", 20), V("low", "2", 5)],
        [V("mid", "2", 15), V("low", "2", 30)],
    ], decisive=4),
    # PDBs: a node with no violation wins, even over lower-priority victims (p-0), and
    # p-2 has none only because violating pods are reprieved first
    Scenario("p", [
        [V("low", "2", 10, {"app": "guarded-p"}), V("low", "2", 11, {"app": "guarded-p"})],
        [V("mid", "2", 10), V("mid", "2", 11)],
        [V("low", "1", 5), V("low", "1", 10, {"app": "guarded-p"}), V("low2", "2", 11)],
    ], decisive=1, pdbs={"guarded-p": 0}),
    # PDBs: violations everywhere; the fewest win
    Scenario("q", [
        [V("low", "2", 10, {"app": "guarded-q"}), V("low", "2", 11, {"app": "guarded-q"})],
        [V("low", "3", 20, {"app": "guarded-q"}), V("low", "1", 10, {"app": "guarded-q"})],
        [V("low", "2", 10, {"app": "guarded-q"}), V("mid", "2", 11)],
        [V("low", "1", 20, {"app": "guarded-q"}), V("low", "1", 21, {"app": "guarded-q"}),
         V("low", "2", 10, {"app": "guarded-q"})],
    ], decisive=1, pdbs={"guarded-q": 0}),
    _random_scenario(11),
]  # fmt: skip

# scenarios of their own for preemptionPolicy Never and the victim scope
NEVER = Scenario("n", [[V("low", "2", 10), V("low", "2", 11)]], decisive=None)
SCOPE = Scenario(
    "s",
    [[V("low", "2", 10, scheduler=OTHER_SCHED), V("low", "2", 11, scheduler=OTHER_SCHED)]],
    decisive=None,
)
ALL = [*SCENARIOS, NEVER, SCOPE]


def _start(s: Scenario, i: int, j: int) -> dt.datetime:
    return BASE_TIME + dt.timedelta(seconds=s.nodes[i][j].start)


def _manifests(s: Scenario) -> list[dict[str, Any]]:
    out = []
    for i, vs in enumerate(s.nodes):
        for j, v in enumerate(vs):
            out.append(
                victim_manifest(
                    s.pod_name(i, j), s.node_name(i), v.cls, v.cpu,
                    labels={"scenario": s.id, **v.labels}, scheduler_name=v.scheduler,
                )
            )  # fmt: skip
    return out


@dataclass
class Env:
    cluster: ClusterHandle
    sched: SchedulerProcess
    sched_all: SchedulerProcess
    hook: RecordingWebhook
    watch: PodWatch
    nodes: dict[str, dict[str, Any]]
    audit: audit.AuditLog


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    d = tmp_path_factory.mktemp("choice")
    groups = [
        NodeGroup(count=len(s.nodes), name_prefix=s.id, cpu="4", memory="16Gi",
                  labels={"scenario": s.id})
        for s in ALL
    ]  # fmt: skip
    log = audit.AuditLog(d / "audit.log")
    local = LocalCluster(d / "cluster")
    local.up(groups, extra_apiserver_args=audit.apiserver_args(d / "audit-policy.json", log.path))
    cluster = ClusterHandle(local)

    def identity(user: str) -> str:
        groups = ("system:masters", audit.SCHEDULER_GROUP)
        return str(kubeconfig_for(local, user, d / "identities", groups))

    sched = SchedulerProcess(identity(SCHED_USER), write_config(d / "config.yaml"), d / "s.log")
    all_cfg = write_config(
        d / "all.yaml",
        profiles=[{
            "schedulerName": SCOPE_ALL_SCHED,
            "pluginConfig": [{"name": "DefaultPreemption", "args": {"victimScope": "All"}}],
        }],
    )  # fmt: skip
    sched_all = SchedulerProcess(identity(SCHED_ALL_USER), all_cfg, d / "all.log")
    hook = RecordingWebhook(cluster, NS)
    watch = PodWatch(cluster, NS)
    try:
        create_priority_classes(cluster, PRIORITIES)
        cluster.api(
            "POST",
            "/apis/scheduling.k8s.io/v1/priorityclasses",
            {"metadata": {"name": NEVER_CLASS}, "value": PRIORITIES["high"],
             "preemptionPolicy": "Never"},
        )  # fmt: skip
        cluster.create_namespace(NS)
        manifests = [m for s in ALL for m in _manifests(s)]
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(lambda m: cluster.create_pod(NS, m), manifests))
            wait_running(cluster, NS, [m["metadata"]["name"] for m in manifests])
            starts = [
                (s.pod_name(i, j), _start(s, i, j))
                for s in ALL for i, vs in enumerate(s.nodes) for j in range(len(vs))
            ]  # fmt: skip
            list(pool.map(lambda a: set_start_time(cluster, NS, *a), starts))
        pdbs = []
        for s in ALL:
            for app, allowed in s.pdbs.items():
                members = sum(1 for vs in s.nodes for v in vs if v.labels.get("app") == app)
                create_pdb(cluster, NS, app, {"app": app}, members - allowed)
                pdbs.append((app, allowed))
        hook.start()
        watch.start()
        for app, allowed in pdbs:
            wait_pdb_allowed(cluster, NS, app, allowed)
        # the scheduler starts after everything is in place: its LIST sees it all
        sched.start()
        sched_all.start()
        nodes = {n["metadata"]["name"]: n for n in cluster.api("GET", "/api/v1/nodes")["items"]}
        yield Env(cluster, sched, sched_all, hook, watch, nodes, log)
    finally:
        watch.stop()
        sched.stop()
        sched_all.stop()
        hook.stop()
        local.down()


def _expected(env: Env, s: Scenario, with_pdbs: bool = True) -> list[Choice]:
    pods_by_node: dict[str, list[BPod]] = {}
    for i, vs in enumerate(s.nodes):
        pods_by_node[s.node_name(i)] = [
            bpod(victim_manifest(s.pod_name(i, j), s.node_name(i), v.cls, v.cpu,
                                 labels={"scenario": s.id, **v.labels}),
                 NS, PRIORITIES[v.cls], _start(s, i, j))
            for j, v in enumerate(vs)
        ]  # fmt: skip
    preemptor = bpod(pod_manifest("x", cpu=PREEMPTOR_CPU), NS, PRIORITIES["high"], None)
    pdbs = [BPDB(NS, {"matchLabels": {"app": app}}, allowed) for app, allowed in s.pdbs.items()]
    nodes = [bnode(env.nodes[s.node_name(i)]) for i in range(len(s.nodes))]
    return brute_force(preemptor, nodes, pods_by_node, pdbs if with_pdbs else [])


def _decisive(a: Choice, b: Choice) -> int:
    return next(i for i, (x, y) in enumerate(zip(a.key, b.key, strict=True)) if x != y)


def _preemptor(s: Scenario, name: str, **kw: Any) -> dict[str, Any]:
    kw.setdefault("priority_class", "high")
    return pod_manifest(name, cpu=PREEMPTOR_CPU, nodeSelector={"scenario": s.id}, **kw)


def _scenario_deletes(env: Env, s: Scenario, user: str = SCHED_USER) -> dict[str, int]:
    """DELETE requests `user` sent for the scenario's own pods (named <id><node>-v<j>),
    per pod, from the audit log: every request, whatever its answer."""
    names = _all_names(s)
    sent = Counter(
        c.name for c in env.audit.pod_deletes({NS}) if c.user == user and c.name in names
    )
    return dict(sent)


def _wait_deletes_audited(env: Env, victims: set[str], user: str = SCHED_USER) -> None:
    """The audit record of a DELETE is written after its update is committed, so a
    victim can be gone a moment before its DELETE is in the log."""
    wait_for(
        lambda: victims <= {c.name for c in env.audit.pod_deletes({NS}) if c.user == user},
        timeout=10,
        what=f"{user}'s DELETEs of {sorted(victims)} in the audit log",
    )


def _old_at_delete(env: Env, victim: str, user: str = SCHED_USER) -> dict[str, Any]:
    old = env.hook.last_old_object(victim, user)
    assert old is not None, f"no DELETE of {victim} by {user} reached the webhook"
    return old


def _all_names(s: Scenario) -> set[str]:
    return {s.pod_name(i, j) for i, vs in enumerate(s.nodes) for j in range(len(vs))}


@pytest.fixture(scope="module")
def launched(env: Env) -> Env:
    """Every scenario's preemptor, created at once: the scenarios' preemptions run side
    by side (their nodes are disjoint), each test then checks its own."""
    for s in SCENARIOS:
        env.cluster.create_pod(NS, _preemptor(s, f"pre-{s.id}"))
    return env


@pytest.mark.parametrize("s", SCENARIOS, ids=[s.id for s in SCENARIOS])
def test_the_preemptor_lands_on_the_brute_force_optimum_evicting_exactly_its_victims(
    launched: Env, s: Scenario
) -> None:
    env = launched
    cluster, hook, watch = env.cluster, env.hook, env.watch
    choices = _expected(env, s)
    best = unique_best(choices)
    if s.decisive is not None:
        assert _decisive(best, choices[1]) == s.decisive, (best, choices[1])
    if s.pdbs and s.id == "p":
        # without the PDBs the choice would differ: the test sees whether they count
        assert unique_best(_expected(env, s, with_pdbs=False)).node != best.node
        assert best.violations == 0 and any(c.violations for c in choices)
    if s.id == "q":
        assert all(c.violations > 0 for c in choices)
        assert best.violations == min(c.violations for c in choices)
    victims = set(best.victims)
    name = f"pre-{s.id}"

    wait_for(lambda: node_of(cluster, NS, name) == best.node, timeout=45,
             what=f"{name} bound to {best.node} (chose {node_of(cluster, NS, name)!r})\n"
                  f"{env.sched.tail()}")  # fmt: skip

    # exactly the optimum's victims are gone, every other pod of the scenario stays
    present = {p["metadata"]["name"] for p in cluster.list_pods(NS, f"scenario={s.id}")}
    assert present == _all_names(s) - victims
    # one DELETE request per victim from the scheduler, none for anyone else (audit log)
    _wait_deletes_audited(env, victims)
    assert _scenario_deletes(env, s) == dict.fromkeys(victims, 1)
    for v in victims:
        # as the API server held it at the DELETE it carried out: DisruptionTarget set
        # by the scheduler, no one else's DELETE before it
        assert set(hook.users.get(v, [])) == {SCHED_USER}, hook.users.get(v)
        old = _old_at_delete(env, v)
        cond = disruption_target(old)
        assert cond is not None, f"{v} deleted without DisruptionTarget"
        assert cond["status"] == "True" and cond["reason"] == "PreemptionByScheduler"
        assert cond["message"] == f"{SCHED}: preempting to accommodate a higher priority pod"
        assert old["metadata"].get("deletionTimestamp") is None
        wait_for(partial(watch.first_terminating, v), timeout=10, what=f"{v} terminating")

    # the preemptor carried its nomination, before any victim was deleted
    nominated = watch.wait(
        name, lambda o: (o.get("status") or {}).get("nominatedNodeName") == best.node,
        what=f"{name} nominated to {best.node}",
    )  # fmt: skip
    assert not nominated["spec"].get("nodeName")
    first_delete = min(
        int(t["metadata"]["resourceVersion"])
        for v in victims
        if (t := watch.first_terminating(v)) is not None
    )
    assert int(nominated["metadata"]["resourceVersion"]) < first_delete
    never_elsewhere = {
        (o.get("status") or {}).get("nominatedNodeName") for _, o in watch.history(name)
    } - {None, "", best.node}
    assert never_elsewhere == set()

    # Preempted events on each victim, naming the preemptor as upstream does: its uid in
    # the note (default_preemption.go, "Preempted by pod %v on node %v"), the pod itself
    # as the related object
    def events() -> dict[str, list[dict[str, Any]]] | None:
        evs = preempted_events(cluster, NS)
        return evs if victims <= set(evs) else None

    evs = wait_for(events, timeout=20, what="Preempted events")
    for v in victims:
        (ev,) = evs[v]
        assert ev["type"] == "Normal"
        uid = nominated["metadata"]["uid"]
        assert ev["note"] == f"Preempted by pod {uid} on node {best.node}", ev["note"]
        assert (ev.get("related") or {}).get("name") == name, ev.get("related")
    assert (set(evs) & _all_names(s)) == victims


def test_preemption_policy_never_does_not_preempt(env: Env) -> None:
    cluster, sched = env.cluster, env.sched
    s = NEVER
    cluster.create_pod(NS, _preemptor(s, "never", priority_class=NEVER_CLASS))
    pod = cluster.get_pod(NS, "never")
    assert pod is not None and pod["spec"]["preemptionPolicy"] == "Never"
    assert pod["spec"]["priority"] == PRIORITIES["high"]

    def unschedulable() -> dict[str, Any] | None:
        p = cluster.get_pod(NS, "never") or {}
        for c in (p.get("status") or {}).get("conditions") or []:
            if c["type"] == "PodScheduled" and c["status"] == "False":
                return dict(c)
        return None

    cond = wait_for(unschedulable, timeout=20, what="never: PodScheduled=False")
    assert "not eligible due to preemptionPolicy=Never" in cond["message"]
    assert not (cluster.get_pod(NS, "never") or {}).get("status", {}).get("nominatedNodeName")
    victims = _all_names(s)
    for v in victims:
        p = cluster.get_pod(NS, v)
        assert p is not None and not p["metadata"].get("deletionTimestamp")
        assert disruption_target(p) is None
    assert not _scenario_deletes(env, s)

    # the control: the same pod allowed to preempt does, on the same node
    cluster.api("DELETE", f"/api/v1/namespaces/{NS}/pods/never")
    cluster.create_pod(NS, _preemptor(s, "may"))
    wait_for(lambda: node_of(cluster, NS, "may") == "n-0", timeout=30,
             what=f"may bound\n{sched.tail()}")  # fmt: skip
    _wait_deletes_audited(env, victims)
    assert _scenario_deletes(env, s) == dict.fromkeys(victims, 1)


def test_pods_of_another_scheduler_are_victims_only_with_victim_scope_all(env: Env) -> None:
    cluster, hook = env.cluster, env.hook
    s = SCOPE
    victims = _all_names(s)
    cluster.create_pod(NS, _preemptor(s, "own"))

    def failed() -> dict[str, Any] | None:
        p = cluster.get_pod(NS, "own") or {}
        for c in (p.get("status") or {}).get("conditions") or []:
            if c["type"] == "PodScheduled" and c["status"] == "False":
                return dict(c)
        return None

    cond = wait_for(failed, timeout=20, what="own: PodScheduled=False")
    # upstream's form: the other scheduler's pods are no victims on the dry-run nodes
    assert re.search(
        r"preemption: 0/\d+ nodes are available: \d+ No preemption victims found for incoming pod",
        cond["message"],
    ), cond["message"]
    for v in victims:
        p = cluster.get_pod(NS, v)
        assert p is not None and not p["metadata"].get("deletionTimestamp")
        assert disruption_target(p) is None
    assert not _scenario_deletes(env, s)
    assert not _scenario_deletes(env, s, SCHED_ALL_USER)
    assert env.sched.metric("scheduler_preemption_goroutines_execution_total", result="error") == 0

    # a scheduler with victimScope All evicts them
    cluster.api("DELETE", f"/api/v1/namespaces/{NS}/pods/own")
    cluster.create_pod(NS, _preemptor(s, "all", scheduler_name=SCOPE_ALL_SCHED))
    wait_for(lambda: node_of(cluster, NS, "all") == "s-0", timeout=30,
             what=f"all bound\n{env.sched_all.tail()}")  # fmt: skip
    _wait_deletes_audited(env, victims, SCHED_ALL_USER)
    assert _scenario_deletes(env, s, SCHED_ALL_USER) == dict.fromkeys(victims, 1)
    assert not _scenario_deletes(env, s)
    for v in victims:
        assert set(hook.users.get(v, [])) == {SCHED_ALL_USER}, hook.users.get(v)
        cond = disruption_target(_old_at_delete(env, v, SCHED_ALL_USER))
        assert cond is not None and cond["reason"] == "PreemptionByScheduler"
        assert cond["message"].startswith(f"{SCOPE_ALL_SCHED}: ")
