"""The differential oracle for gangs (GenericWorkload): upstream kube-scheduler v1.37.2 and
this scheduler, both with --feature-gates=GenericWorkload=true, decide the same PodGroups
on one cluster (`cluster up --generic-workload`), and nothing they decide changes it.

Each scenario is a random cluster of the ordinary oracle (nodes, existing pods bound by
the harness) without its single incoming pods; then its gangs, one after the other: each
is created twice, a PodGroup and its members per scheduler (`<gang>-u` / `<gang>-o`),
the PodGroup after the members (they wait for it, then enter the cycle together), or
before them when minCount is the gang's size (they wait for the last one). A member's outcome is its first bind
(recorded and refused by the webhook, so the cluster never changes) or its PodScheduled
condition. Compared per gang: which members were placed, how many, and each unplaced
member's reason and message word for word; the PodGroup's PodGroupInitiallyScheduled
condition (first seen; not for a placed gang with leftover members, see compare); the
victims whose DELETEs each scheduler sent (refused by the webhook); and, on ours alone,
that a gang placed fewer than minCount members nowhere (all or nothing).

A third of the gangs take the run's highest priority class (existing pods are below it:
pod-group preemption), the rest the lowest (no victim anywhere).
"""

from __future__ import annotations

import random
import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.differential import scenario as sc
from tests.differential.harness import VICTIM_SETTLE, Oracle
from tests.differential.processes import OURS, UPSTREAM
from tests.kube import ClusterHandle

GATES = ["--feature-gates=GenericWorkload=true"]
GANG_TIMEOUT = 30.0
# longer than a gang's decision: the outcome read is the first attempt's, not a retry's
# after the webhook refused the binds (a refused bind frees its node, so a retry could
# place other members)
BACKOFF = 60
MEMBERS_SETTLE = 1.0
# a placed member's refused bind is answered this late: until then it holds its node in
# both schedulers, so members retried at once (upstream requeues a placed group's
# leftovers straight to activeQ) meet the state of the first attempt
BIND_HOLD = 3.0
# a member's cpu request: nodes have 1-8 cpus (scenario._node), so some gangs fit whole,
# some in part, some not at all
_CPU = ("100m", "500m", "1", "2", "3", "4", "6")
_COPY = {UPSTREAM: "u", OURS: "o"}


@dataclass
class Gang:
    name: str
    namespace: str
    policy: str  # "gang" or "basic"
    min_count: int
    members: list[str]  # each member's cpu request
    pod_group_first: bool = True
    # the PriorityClass of the PodGroup and its members: oracle-low (nothing below it
    # among the existing pods: no victims) or oracle-high (pod-group preemption)
    priority_class: str = "oracle-low"


# the summary line upstream logs after each pod-group attempt (schedule_one_podgroup.go,
# V(2)): how many members the attempt had
_UPSTREAM_ATTEMPT = re.compile(
    r'"(?:Successfully scheduled a pod group|Unable to schedule a pod group|Pod group is '
    r'waiting for preemption|Error scheduling pod group)".*? podGroup="([^"]+)"(.*)$'
)
_PREEMPTING = re.compile(r"preempting (\d+) victims")
_COUNTS = re.compile(r"\b(scheduledPods|unschedulablePods|errorPods)=(\d+)")


def upstream_first_attempt_size(log_path: Path, pod_group: str) -> int | None:
    """How many members upstream's first attempt of `pod_group` (ns/name) had, from its
    log; None when it logged none."""
    with open(log_path, encoding="utf-8", errors="replace") as f:
        for line in f:
            m = _UPSTREAM_ATTEMPT.search(line)
            if m is None or m.group(1) != pod_group:
                continue
            return sum(int(n) for _, n in _COUNTS.findall(m.group(2)))
    return None


@dataclass
class MemberOutcome:
    placed: bool = False
    reason: str = ""
    message: str = ""


@dataclass
class GangResult:
    scenario: int
    gang: Gang
    upstream: list[MemberOutcome]
    ours: list[MemberOutcome]
    differences: list[str] = field(default_factory=list)
    # why the gang was not compared ("" when it was)
    excluded: str = ""


def generate(seed: int, index: int) -> tuple[sc.Scenario, list[Gang]]:
    base = sc.generate(seed, index)
    base.incoming = []
    rng = random.Random(f"gangs/{seed}/{index}")
    namespaces = [ns["metadata"]["name"] for ns in base.namespaces]
    gangs = []
    for j in range(rng.randint(1, 3)):
        size = rng.randint(2, 8)
        cpu = rng.choice(_CPU)
        # mostly one shape per gang, as a Job's workers; sometimes a bigger leader
        members = [cpu] * size
        if size > 1 and rng.random() < 0.3:
            members[0] = rng.choice(_CPU)
        gang = rng.random() < 0.8
        min_count = rng.randint(1, size) if gang else 1
        gangs.append(
            Gang(
                name=f"{base.prefix}-g{j}",
                namespace=rng.choice(namespaces),
                policy="gang" if gang else "basic",
                min_count=min_count,
                members=members,
                # the PodGroup comes first only when no member can be tried before the
                # last one exists (minCount = size); otherwise members created one by one
                # would be tried as they arrive, each scheduler at its own pace, and a
                # refused bind holds its node for a moment: the outcome would be a race
                pod_group_first=gang and min_count == size and rng.random() < 0.5,
                priority_class="oracle-high" if rng.random() < 0.35 else "oracle-low",
            )
        )
    return base, gangs


class GangOracle:
    def __init__(self, cluster: ClusterHandle, workdir: Path) -> None:
        self.oracle = Oracle(cluster, workdir, gates=GATES, backoff=BACKOFF)
        self.oracle.recorder.bind_hold = BIND_HOLD
        self.api = cluster.local.admin(timeout=30)

    def start(self) -> None:
        self.oracle.start()

    def stop(self) -> None:
        self.oracle.stop()

    def _post(self, path: str, body: dict[str, Any]) -> None:
        status, out = self.api.request("POST", path, body)
        if status >= 300:
            raise AssertionError(f"POST {path}: HTTP {status}: {out}")

    def _pod_group(self, gang: Gang, copy: str) -> None:
        policy: dict[str, Any] = (
            {"gang": {"minCount": gang.min_count}} if gang.policy == "gang" else {"basic": {}}
        )
        self._post(
            f"/apis/scheduling.k8s.io/v1beta1/namespaces/{gang.namespace}/podgroups",
            {
                "apiVersion": "scheduling.k8s.io/v1beta1",
                "kind": "PodGroup",
                "metadata": {"name": f"{gang.name}-{copy}"},
                "spec": {"schedulingPolicy": policy, "priorityClassName": gang.priority_class},
            },
        )

    def _member(self, gang: Gang, sched: str, i: int) -> None:
        copy = _COPY[sched]
        self._post(
            f"/api/v1/namespaces/{gang.namespace}/pods",
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": f"{gang.name}-{i}-{copy}", "labels": {"gang": gang.name}},
                "spec": {
                    "schedulerName": sched,
                    "priorityClassName": gang.priority_class,
                    "schedulingGroup": {"podGroupName": f"{gang.name}-{copy}"},
                    "tolerations": [{"operator": "Exists"}],
                    "containers": [
                        {
                            "name": "c",
                            "image": "busybox:1.36",
                            "resources": {"requests": {"cpu": gang.members[i], "memory": "64Mi"}},
                        }
                    ],
                },
            },
        )

    def _outcome(self, sched: str, gang: Gang, i: int) -> MemberOutcome | None:
        name = f"{gang.name}-{i}-{_COPY[sched]}"
        if self.oracle.recorder.bind_of(sched, f"{gang.namespace}/{name}") is not None:
            return MemberOutcome(placed=True)
        status, body = self.api.request("GET", f"/api/v1/namespaces/{gang.namespace}/pods/{name}")
        if status != 200:
            return None
        for c in body.get("status", {}).get("conditions") or []:
            if c.get("type") == "PodScheduled" and c.get("status") == "False":
                # a refused bind is followed at once by its SchedulerError condition,
                # possibly between the look at the binds above and this read
                if self.oracle.recorder.bind_of(sched, f"{gang.namespace}/{name}") is not None:
                    return MemberOutcome(placed=True)
                return MemberOutcome(reason=c.get("reason", ""), message=c.get("message", ""))
        return None

    def _group_condition(self, sched: str, gang: Gang) -> MemberOutcome | None:
        path = (
            f"/apis/scheduling.k8s.io/v1beta1/namespaces/{gang.namespace}/podgroups/"
            f"{gang.name}-{_COPY[sched]}"
        )
        status, body = self.api.request("GET", path)
        if status != 200:
            return None
        for c in body.get("status", {}).get("conditions") or []:
            if c.get("type") == "PodGroupInitiallyScheduled":
                return MemberOutcome(
                    placed=c.get("status") == "True",
                    reason=c.get("reason", ""),
                    message=c.get("message", ""),
                )
        return None

    def decide(self, gang: Gang) -> tuple[list[MemberOutcome], list[MemberOutcome]]:
        scheds = (UPSTREAM, OURS)
        victims_before = {s: len(self.oracle.recorder.victims_of(s)) for s in scheds}
        self.group_outcome: dict[str, MemberOutcome | None] = {s: None for s in scheds}
        self.victims: dict[str, list[str]] = {s: [] for s in scheds}
        if gang.pod_group_first:
            for s in scheds:
                self._pod_group(gang, _COPY[s])
        for i in range(len(gang.members)):
            for s in scheds:
                self._member(gang, s, i)
        if not gang.pod_group_first:
            # every member reaches both schedulers' pod informers before the PodGroup
            # reaches their PodGroup informers (two watches, no order between them):
            # else a scheduler may try the group with the members it has seen so far
            time.sleep(MEMBERS_SETTLE)
            for s in scheds:
                self._pod_group(gang, _COPY[s])
        seen: dict[str, list[MemberOutcome | None]] = {s: [None] * len(gang.members) for s in scheds}
        deadline = time.monotonic() + GANG_TIMEOUT
        while time.monotonic() < deadline:
            self.oracle._check_alive()
            for s in scheds:
                for i, got in enumerate(seen[s]):
                    if got is None:
                        seen[s][i] = self._outcome(s, gang, i)
                if self.group_outcome[s] is None:
                    self.group_outcome[s] = self._group_condition(s, gang)
            if all(o is not None for s in scheds for o in seen[s]) and all(
                self.group_outcome[s] is not None for s in scheds
            ):
                break
            time.sleep(0.05)
        if gang.priority_class == "oracle-high":
            # a preemption's DELETEs come from a background task after the verdict
            time.sleep(VICTIM_SETTLE)
        for s in scheds:
            # the first decision's victims as the webhook saw them: with N victims, the
            # first N-1 (in parallel); the last is left alone once any of those failed,
            # and the webhook refuses them all (executor.go). A refused task activates
            # the members, and a retry's calls come after these, which the webhook holds
            sent = self.oracle.recorder.victims_of(s)[victims_before[s] :]
            outcome = self.group_outcome[s]
            m = _PREEMPTING.search(outcome.message) if outcome is not None else None
            first = max(int(m.group(1)) - 1, 1) if m else len(sent)
            self.victims[s] = sorted(sent[:first])
        for s in scheds:
            for i in range(len(gang.members)):
                self.api.request(
                    "DELETE",
                    f"/api/v1/namespaces/{gang.namespace}/pods/{gang.name}-{i}-{_COPY[s]}"
                    "?gracePeriodSeconds=0",
                )
        if any(o is not None and o.placed for s in scheds for o in seen[s]):
            # the held binds are refused only now: until then each scheduler still
            # counts its placed members, which the next gang must not meet
            time.sleep(BIND_HOLD + 0.5)
        return (
            [o or MemberOutcome(reason="(no decision)") for o in seen[UPSTREAM]],
            [o or MemberOutcome(reason="(no decision)") for o in seen[OURS]],
        )


def compare(
    gang: Gang,
    upstream: list[MemberOutcome],
    ours: list[MemberOutcome],
    groups: dict[str, MemberOutcome | None] | None = None,
    victims: dict[str, list[str]] | None = None,
) -> list[str]:
    out = []
    leftovers = any(m.placed for m in upstream) and not all(m.placed for m in upstream)
    if groups is not None and not leftovers:
        # with leftovers (placed group, members that fit nowhere) upstream retries them at
        # once and may overwrite its own True with False from a PodGroup copy its
        # informer has not refreshed yet (a race of its own): compared only without
        u, o = groups.get(UPSTREAM), groups.get(OURS)
        uk = None if u is None else (u.placed, u.reason, u.message)
        ok = None if o is None else (o.placed, o.reason, o.message)
        if uk != ok:
            out.append(f"podgroup condition: {gang.name}: upstream {uk!r}; ours {ok!r}")
    # the leftovers' own attempt (retried at once while the placed members' binds are
    # held) may preempt too; what it finds depends on both schedulers' in-flight binds,
    # so only a first attempt's victims are compared (docs/fidelity.md: a known gap)
    if victims is not None and not leftovers and victims.get(UPSTREAM) != victims.get(OURS):
        out.append(
            f"victims: {gang.name}: upstream {victims.get(UPSTREAM)}; ours {victims.get(OURS)}"
        )
    for i, (u, o) in enumerate(zip(upstream, ours, strict=True)):
        who = f"{gang.name}-{i}"
        if u.placed != o.placed:
            said = u if not u.placed else o
            out.append(
                f"placement: {who}: upstream placed={u.placed}, ours placed={o.placed} "
                f"(the other: {said.reason}: {said.message!r})"
            )
        elif not u.placed and (u.reason, u.message) != (o.reason, o.message):
            out.append(
                f"message: {who}: upstream {u.reason}: {u.message!r}; ours {o.reason}: {o.message!r}"
            )
    placed = sum(o.placed for o in ours)
    if gang.policy == "gang" and 0 < placed < gang.min_count:
        out.append(f"partial gang: {gang.name}: ours placed {placed} of minCount {gang.min_count}")
    return out


@dataclass
class GangTally:
    scenarios: int = 0
    gangs: int = 0
    members: int = 0
    placed_gangs: int = 0
    pending_gangs: int = 0
    excluded: int = 0
    preempting_gangs: int = 0
    results: list[GangResult] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    @property
    def differences(self) -> list[str]:
        return [d for r in self.results for d in r.differences]

    def table(self) -> str:
        return "\n".join(
            [
                "| scenarios | gangs compared | members | placed gangs | pending gangs "
                "| gangs with victims | excluded (upstream race) | differences |",
                "|---|---|---|---|---|---|---|---|",
                f"| {self.scenarios} | {self.gangs} | {self.members} | {self.placed_gangs} "
                f"| {self.pending_gangs} | {self.preempting_gangs} | {self.excluded} "
                f"| {len(self.differences)} |",
            ]
        )


def run_gang_oracle(
    cluster: ClusterHandle,
    workdir: Path,
    seed: int,
    indices: Iterable[int],
    progress: Callable[[str], None] | None = None,
) -> GangTally:
    say = progress or (lambda _s: None)
    tally = GangTally()
    g = GangOracle(cluster, workdir)
    t0 = time.monotonic()
    g.start()
    try:
        todo = list(indices)
        for k, index in enumerate(todo, 1):
            scenario, gangs = generate(seed, index)
            try:
                g.oracle.setup(scenario)
                for gang in gangs:
                    up, ours = g.decide(gang)
                    first = upstream_first_attempt_size(
                        g.oracle.upstream.log_path, f"{gang.namespace}/{gang.name}-u"
                    )
                    if first is not None and first < len(gang.members):
                        # upstream's queue let the group out before every member joined
                        # it (its event handler and scheduling loop race): not comparable
                        r = GangResult(index, gang, up, ours, excluded=(
                            f"upstream's first attempt had {first} of {len(gang.members)} members"
                        ))  # fmt: skip
                        tally.excluded += 1
                        tally.results.append(r)
                        say(f"    excluded {gang.name}: {r.excluded}")
                        continue
                    r = GangResult(
                        index, gang, up, ours,
                        compare(gang, up, ours, g.group_outcome, g.victims),
                    )  # fmt: skip
                    if any(g.victims.values()):
                        tally.preempting_gangs += 1
                    tally.results.append(r)
                    tally.gangs += 1
                    tally.members += len(gang.members)
                    if any(o.placed for o in up):
                        tally.placed_gangs += 1
                    else:
                        tally.pending_gangs += 1
                    for d in r.differences:
                        say(f"    {d}")
            except AssertionError as exc:
                tally.errors.append(f"scenario {index}: {exc}")
                say(f"scenario {index}: harness error: {exc}")
                g.oracle.forget_scenario()
                continue
            tally.scenarios += 1
            say(
                f"[{k}/{len(todo)}] scenario {index}: {len(scenario.nodes)} nodes, "
                f"{len(scenario.existing)} existing pods, {len(gangs)} gang(s) "
                f"({time.monotonic() - t0:.0f}s)"
            )
    finally:
        g.stop()
    return tally
