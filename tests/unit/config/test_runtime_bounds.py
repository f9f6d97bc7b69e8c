"""The largest values the loader accepts run: score weights cannot overflow a cycle, lease
timings cannot break the elector. (The issue: a weight of 10^21 crashed every cycle, a
huge leaseDuration killed the elector task silently.)"""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np
import pytest

from scheduler.algorithm import schedule_pod
from scheduler.cache import Nominator
from scheduler.catalog import config_from_dict, default_config
from scheduler.config import ConfigError, SchedulerConfiguration, names
from scheduler.framework import (
    MAX_NODE_SCORE,
    CycleState,
    Framework,
    ScheduleResult,
    Status,
)
from scheduler.framework.interfaces import BatchScorePlugin
from scheduler.leader import LeaderElectionSettings, LeaderElector
from scheduler.plugins.registry import in_tree_registry
from tests.unit.helpers.builders import make_node, make_pod, make_snapshot
from tests.unit.test_leader_election import LeaseStore, VirtualTime

INT32_MAX = (1 << 31) - 1
INT64_MAX = (1 << 63) - 1
SCORE_PLUGINS = [r.name for r in default_config().profiles[0].enabled(names.SCORE)]


def _cfg(**fields: Any) -> SchedulerConfiguration:
    return config_from_dict(
        {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
         **fields}
    )  # fmt: skip


def _max_weight_config(weight: int) -> SchedulerConfiguration:
    return _cfg(profiles=[{"plugins": {"multiPoint": {
        "enabled": [{"name": n, "weight": weight} for n in SCORE_PLUGINS],
        "disabled": [{"name": names.DEFAULT_PREEMPTION}],  # registered by the app, not here
    }}}])  # fmt: skip


def test_the_loader_stops_at_int32_weights() -> None:
    cfg = _max_weight_config(INT32_MAX)
    assert {r.weight for r in cfg.profiles[0].enabled(names.SCORE)} == {INT32_MAX}
    for too_big in (INT32_MAX + 1, 10**21):
        with pytest.raises(ConfigError) as info:
            _max_weight_config(too_big)
        assert info.value.field == "profiles[0].plugins.multiPoint.enabled[0].weight"


def test_a_cycle_with_the_largest_weights_schedules() -> None:
    fw = Framework(_max_weight_config(INT32_MAX).profiles[0], in_tree_registry())
    assert set(fw.weights.values()) == {INT32_MAX}
    nodes = [make_node("a").label("zone", "x"), make_node("b"), make_node("c")]
    snap = make_snapshot(nodes, [make_pod("busy").requests(cpu="3").node("c")])
    pod = make_pod("p").requests(cpu="1").obj()
    result = schedule_pod(fw, CycleState(), pod, snap, Nominator())
    assert isinstance(result, ScheduleResult)
    assert result.node in ("a", "b")  # c is the busiest: least allocated wins


def test_added_affinity_with_the_largest_term_weights_schedules() -> None:
    """NodeAffinityArgs preferred weights are int32 with no upper bound upstream; many
    matching terms at the largest weight still sum and normalize inside int64."""
    term = {
        "weight": INT32_MAX,
        "preference": {"matchExpressions": [{"key": "zone", "operator": "Exists"}]},
    }
    cfg = _cfg(profiles=[{
        "plugins": {"multiPoint": {"disabled": [{"name": names.DEFAULT_PREEMPTION}]}},
        "pluginConfig": [{"name": "NodeAffinity", "args": {"addedAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [term] * 1000}}}],
    }])  # fmt: skip
    fw = Framework(cfg.profiles[0], in_tree_registry())
    snap = make_snapshot([make_node("a").label("zone", "x"), make_node("b")])
    result = schedule_pod(fw, CycleState(), make_pod("p").obj(), snap, Nominator())
    assert isinstance(result, ScheduleResult)
    assert result.node == "a"  # the only node the terms prefer
    with pytest.raises(ConfigError, match="range"):
        _cfg(profiles=[{"pluginConfig": [{"name": "NodeAffinity", "args": {"addedAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [{**term, "weight": -1}]}}}]}])  # fmt: skip


class _FullMarks(BatchScorePlugin):
    """A score plugin that gives every node the maximum normalized score."""

    def __init__(self, name: str) -> None:
        self.name = name

    def score_batch(self, state: Any, pod: Any, snapshot: Any, slots: Any) -> Any:
        return np.full(len(slots), MAX_NODE_SCORE, dtype=np.int64)


def test_the_worst_case_total_fits_int64() -> None:
    """Every score plugin at its largest accepted weight and a full 100: the weighted total
    (upstream sums in int64 and caps at MaxTotalScore = int64 max) is exact."""
    fw = Framework(_max_weight_config(INT32_MAX).profiles[0], in_tree_registry())
    fw.score_plugins = [_FullMarks(n) for n in SCORE_PLUGINS]
    slots = np.arange(3, dtype=np.int64)
    total, _, status = fw.run_score(CycleState(), None, None, slots)
    assert status == Status.success()
    expected = len(SCORE_PLUGINS) * MAX_NODE_SCORE * INT32_MAX
    assert total.dtype == np.int64
    assert total.tolist() == [expected] * 3
    assert expected < INT64_MAX // 1000  # three orders of magnitude of headroom


# ---------------------------------------------------------------- leader election

MAX_LEASE = "596523h14m7s"  # 2^31-1 seconds: the Lease's int32 leaseDurationSeconds


def _settings(cfg: SchedulerConfiguration, identity: str) -> LeaderElectionSettings:
    le = cfg.leader_election  # as the app builds them
    return LeaderElectionSettings(
        namespace=le.resource_namespace,
        name=le.resource_name,
        identity=identity,
        lease_duration=le.lease_duration,
        renew_deadline=le.renew_deadline,
        retry_period=le.retry_period,
    )


def test_the_loader_stops_at_the_leases_int32_seconds() -> None:
    cfg = _cfg(leaderElection={"leaseDuration": MAX_LEASE})
    assert cfg.leader_election.lease_duration == INT32_MAX
    for too_long in ("596523h14m8s", "2562047h", "2562047h47m16.854775808s"):
        with pytest.raises(ConfigError) as info:
            _cfg(leaderElection={"leaseDuration": too_long})
        assert info.value.field == "leaderElection.leaseDuration"
    with pytest.raises(ConfigError, match="between 1s and"):
        _cfg(leaderElection={"leaseDuration": "999ms", "renewDeadline": "500ms",
                             "retryPeriod": "100ms"})  # fmt: skip


@pytest.mark.parametrize(
    ("lease", "renew", "retry"),
    [
        (MAX_LEASE, "596523h14m6s", "1s"),
        (MAX_LEASE, "596523h14m6s", "497102h41m44s"),
        (MAX_LEASE, "10s", "2s"),
        # ordinary values where the jittered poll (up to 2.2 * 74s) outlasts lease + 20s:
        # the follower's /healthz used to fail between two polls
        ("100s", "90s", "74s"),
    ],
    ids=["longest lease, huge renew", "longest lease, huge retry", "longest lease, small renew",
         "retry near its bound"],
)  # fmt: skip
async def test_the_elector_leads_renews_and_hands_over(lease: str, renew: str, retry: str) -> None:
    cfg = _cfg(leaderElection={"leaseDuration": lease, "renewDeadline": renew,
                               "retryPeriod": retry})  # fmt: skip
    vt, store = VirtualTime(), LeaseStore()

    def elector(identity: str) -> LeaderElector:
        # rand 0.99: the longest jitter client-go allows (retryPeriod * 2.2)
        return LeaderElector(store, _settings(cfg, identity), clock=vt.clock, wall=vt.wall,
                             sleep=vt.sleep, rand=lambda: 0.99)  # fmt: skip

    a = elector("a")
    a_task = asyncio.create_task(a.run())
    await vt.run_for(1)
    assert a.is_leader
    # whole seconds that fit the Lease's int32
    assert store.spec["leaseDurationSeconds"] == round(cfg.leader_election.lease_duration)
    assert 1 <= store.spec["leaseDurationSeconds"] <= INT32_MAX
    b = elector("b")
    b_task = asyncio.create_task(b.run())
    retry_s = cfg.leader_election.retry_period
    for _ in range(70):  # over ~3 of b's polls, looked at every tenth of a retryPeriod
        await vt.run_for(retry_s / 10)
        assert a.is_leader and not b.is_leader  # a renews; b waits, the lease is fresh
        assert a.healthz() is None and b.healthz() is None
        assert not a_task.done() and not b_task.done()
    writes = len(store.writes)
    assert writes >= 2  # renewals went through
    a.stop()  # release: holder "" and 1s, so b takes over on its next poll
    await vt.run_for(0)
    await asyncio.wait_for(a_task, 5)
    await vt.run_for(retry_s * 2.3)
    assert b.is_leader
    assert store.spec["holderIdentity"] == "b"
    b.stop()
    await vt.run_for(0)
    await asyncio.wait_for(b_task, 5)
    assert a_task.exception() is None and b_task.exception() is None
