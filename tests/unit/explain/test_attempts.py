"""AttemptLog: explain's record of each pod's last failed attempt, bounded in pods and in
node statuses, verdicts built only when asked for."""

from __future__ import annotations

from scheduler.algorithm import schedule_pod
from scheduler.cache import Nominator
from scheduler.explain import AttemptLog
from scheduler.explain.answer import attempt_dict
from scheduler.explain.pages import NodePage
from scheduler.framework import CycleState
from scheduler.framework.diagnosis import FitError
from tests.unit.helpers.builders import make_framework, make_node, make_pod, make_snapshot

NODES = [make_node(f"n{i}").capacity(cpu="1", memory="1Gi") for i in range(4)]


def _fit_error(name: str) -> FitError:
    fw = make_framework()
    snapshot = make_snapshot(NODES)
    pod = make_pod(name).requests(cpu="2").obj()
    result = schedule_pod(fw, CycleState(), pod, snapshot, Nominator())
    assert isinstance(result, FitError)
    return result


def test_record_keeps_the_message_and_one_verdict_per_node() -> None:
    log = AttemptLog(wall=lambda: 0.0)
    fit = _fit_error("big")
    log.record(fit.pod, fit, "n2")
    attempt = log.get(fit.pod.uid)
    assert attempt is not None
    assert attempt.message == "0/4 nodes are available: 4 Insufficient cpu."
    everything = NodePage(frozenset(attempt.statuses), "", 0)
    body = attempt_dict(attempt, everything)
    assert body["nominatedNode"] == "n2"
    assert [v["node"] for v in body["nodes"]] == ["n0", "n1", "n2", "n3"]
    assert {v["reason"] for v in body["nodes"]} == {"Insufficient cpu"}
    assert {v["plugin"] for v in body["nodes"]} == {"NodeResourcesFit"}


def test_the_oldest_attempts_go_when_node_entries_exceed_the_bound() -> None:
    log = AttemptLog(max_pods=100, max_node_entries=10)  # two attempts of 4 nodes fit
    fits = [_fit_error(f"p{i}") for i in range(3)]
    for fit in fits:
        log.record(fit.pod, fit, None)
    assert log.get(fits[0].pod.uid) is None
    assert log.get(fits[1].pod.uid) is not None
    assert log.get(fits[2].pod.uid) is not None
    # recording a pod again replaces its attempt and counts its nodes once
    log.record(fits[1].pod, fits[1], None)
    assert log.get(fits[2].pod.uid) is not None


def test_the_pod_bound_still_applies_and_the_newest_attempt_is_always_kept() -> None:
    log = AttemptLog(max_pods=2, max_node_entries=1)  # smaller than one attempt
    fits = [_fit_error(f"p{i}") for i in range(3)]
    for fit in fits:
        log.record(fit.pod, fit, None)
    assert [log.get(f.pod.uid) is not None for f in fits] == [False, False, True]
    log.forget(fits[2].pod.uid)
    assert log.get(fits[2].pod.uid) is None
