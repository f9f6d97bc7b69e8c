"""The default selector for PodTopologySpread's system defaults: the AND of the selectors
of every Service, ReplicationController, ReplicaSet and StatefulSet selecting the pod."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.model import pod_from_dict
from scheduler.workload_selectors import (
    WorkloadSelectors,
    replica_set_from_dict,
    replication_controller_from_dict,
    service_from_dict,
    stateful_set_from_dict,
)


def _pod(labels: dict[str, str], ns: str = "app") -> Any:
    return pod_from_dict({"metadata": {"name": "p", "namespace": ns, "uid": "u", "labels": labels},
                          "spec": {"containers": [{"name": "c", "image": "x"}]}})  # fmt: skip


def _svc(name: str, selector: dict[str, str] | None, ns: str = "app") -> Any:
    return service_from_dict(
        {"metadata": {"name": name, "namespace": ns}, "spec": {"selector": selector}}
    )


def _rs(name: str, selector: dict[str, Any], ns: str = "app") -> Any:
    return replica_set_from_dict(
        {"metadata": {"name": name, "namespace": ns}, "spec": {"selector": selector}}
    )


CASES = [
    ("no workload selects the pod", [], {"app": "web"}, None),
    ("a service selects it", [_svc("web", {"app": "web"})], {"app": "web", "x": "1"}, {"app": "web"}),
    ("a service with no selector selects nothing", [_svc("headless", None)], {"app": "web"}, None),
    ("a service in another namespace is ignored", [_svc("web", {"app": "web"}, ns="other")], {"app": "web"}, None),
    ("a non-matching service is ignored", [_svc("db", {"app": "db"})], {"app": "web"}, None),
    ("service and replica set are ANDed",
     [_svc("web", {"app": "web"}), _rs("web-1", {"matchLabels": {"app": "web", "pod-template-hash": "1"}})],
     {"app": "web", "pod-template-hash": "1"}, {"app": "web", "pod-template-hash": "1"}),
    ("a replica set with an empty selector is skipped", [_rs("all", {})], {"app": "web"}, None),
]  # fmt: skip


@pytest.mark.parametrize(("case", "objects", "labels", "expect"), CASES, ids=[c[0] for c in CASES])
def test_default_selector(
    case: str, objects: list[Any], labels: dict[str, str], expect: dict[str, str] | None
) -> None:
    ws = WorkloadSelectors()
    for o in objects:
        ws.on_add(o)
    sel = ws.default_selector(_pod(labels))
    if expect is None:
        assert sel is None
        return
    assert sel is not None
    assert sel.matches(expect)
    # every requirement of every selecting workload is in it: dropping one key fails it
    for key in expect:
        assert not sel.matches({k: v for k, v in expect.items() if k != key})


def test_deletes_and_updates_are_followed() -> None:
    ws = WorkloadSelectors()
    svc = _svc("web", {"app": "web"})
    ws.on_add(svc)
    assert ws.default_selector(_pod({"app": "web"})) is not None
    ws.on_update(svc, _svc("web", {"app": "other"}))
    assert ws.default_selector(_pod({"app": "web"})) is None
    ws.on_delete(svc)
    assert ws.default_selector(_pod({"app": "other"})) is None


def test_rc_and_statefulset_records() -> None:
    rc = replication_controller_from_dict(
        {"metadata": {"name": "r", "namespace": "a"}, "spec": {"selector": {"k": "v"}}}
    )
    ss = stateful_set_from_dict({"metadata": {"name": "s", "namespace": "a"},
                                 "spec": {"selector": {"matchExpressions": [{"key": "k", "operator": "Exists"}]}}})  # fmt: skip
    assert rc.selector.matches({"k": "v"}) and not rc.selector.matches({"k": "w"})
    assert ss.selector.matches({"k": "anything"}) and not ss.selector.matches({})
