"""bench.stats: percentiles, throughput, victims, timelines."""

from __future__ import annotations

import json

import pytest

from bench import audit, stats


def test_percentile_interpolates_like_numpy() -> None:
    xs = [1.0, 2.0, 3.0, 4.0]
    assert stats.percentile(xs, 0) == 1.0
    assert stats.percentile(xs, 100) == 4.0
    assert stats.percentile(xs, 50) == 2.5
    assert stats.percentile(xs, 90) == pytest.approx(3.7)
    assert stats.percentile(list(range(101)), 99) == 99
    assert stats.percentile([5.0], 99) == 5.0
    assert stats.percentile([], 50) is None
    assert stats.percentile([3.0, 1.0, 2.0], 50) == 2.0  # unsorted input


def test_percentile_rejects_out_of_range() -> None:
    with pytest.raises(ValueError):
        stats.percentile([1.0], 101)


def test_median_skips_missing_values() -> None:
    assert stats.median([3.0, None, 1.0, 2.0]) == 2.0
    assert stats.median([None, None]) is None


def test_ratio() -> None:
    assert stats.ratio(3.0, 2.0) == 1.5
    assert stats.ratio(None, 2.0) is None
    assert stats.ratio(1.0, 0.0) is None


def test_throughput_first_create_to_last_bind() -> None:
    assert stats.throughput([10.0, 10.5], [11.0, 12.0]) == pytest.approx(2 / 2.0)
    assert stats.throughput([], [1.0]) is None


def test_pod_figures_counts_and_latency() -> None:
    created = {"a": 0.0, "b": 1.0, "c": 2.0}
    bound = {"a": 0.5, "b": 2.0, "x": 9.0}
    f = stats.pod_figures(created, bound)
    assert f["created"] == 3 and f["bound"] == 2 and not f["complete"]
    assert f["latency_s"]["p50"] == pytest.approx(0.75)
    assert f["latency_s"]["max"] == pytest.approx(1.0)
    assert f["throughput"] == pytest.approx(2 / 2.0)
    assert stats.pod_figures({"a": 0.0}, {"a": 0.25})["complete"]


def test_bind_rate() -> None:
    assert stats.bind_rate([1.0, 1.5, 2.0]) == pytest.approx(2.0)
    assert stats.bind_rate([1.0]) is None


def test_victims_are_charged_to_the_preemptor_on_their_node() -> None:
    v = stats.victims_per_preemptor(
        {"p1": "n1", "p2": "n2"}, ["n1", "n1", "n1", "n2", "n2", "n2", "n3"]
    )
    assert v == {"total": 7, "preemptors_bound": 2, "mean": 3.0, "max": 3, "unattributed": 1}
    assert stats.victims_per_preemptor({}, [])["mean"] is None


def test_timeline_is_cumulative() -> None:
    assert stats.timeline([0.2, 0.4, 1.5], origin=0.0) == [(0.0, 0), (1.0, 2), (2.0, 3)]
    assert stats.timeline([], 0.0) == []


def test_audit_counts_each_request_once_for_the_user() -> None:
    def ev(aid: str, verb: str, user: str, ref: dict[str, str], agent: str = "x") -> str:
        return json.dumps(
            {
                "auditID": aid,
                "verb": verb,
                "user": {"username": user},
                "objectRef": ref,
                "userAgent": agent,
            }
        )

    ks = "kube-scheduler/v1 (linux)"
    lines = [
        ev("1", "watch", audit.SA_USER, {"resource": "pods"}, ks),  # ResponseStarted
        ev("1", "watch", audit.SA_USER, {"resource": "pods"}, ks),  # ResponseComplete
        ev("2", "create", audit.SA_USER, {"resource": "pods", "subresource": "binding"}),
        ev("3", "create", "admin", {"resource": "pods"}),
        "not json",
        "",
    ]
    c = audit.count_calls(lines)
    assert c["total"] == 2
    assert c["by_call"] == {"watch pods": 1, "create pods/binding": 1}
    assert c["user_agents"] == {"kube-scheduler/v1": 1, "x": 1}


def test_audit_policy_records_only_the_contender() -> None:
    p = audit.policy()
    assert p["rules"][0] == {"level": "Metadata", "users": [audit.SA_USER]}
    assert p["rules"][-1] == {"level": "None"}
