"""Fuzzing the parsing of API objects: `pod_from_dict` and `node_from_dict` turn
whatever the API server (or a broken admission chain, or a newer API version) hands the
informers into records. Whatever they get, they must return a record or raise the
model's InvalidObject (which the informer turns into a FailedScheduling event), never
another exception (which would kill the informer's handler) and never hang.

Inputs are valid objects with a few fields replaced by arbitrary JSON values (nasty
quantities, huge numbers, wrong types, deep nesting), plus wholly arbitrary JSON.
hypothesis shrinks a failure to a minimal example, which is what the case reports."""

from __future__ import annotations

import contextlib
import copy
import signal
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduler.model.errors import InvalidObject
from scheduler.model.node import node_from_dict
from scheduler.model.pod import pod_from_dict
from tests.faults.registry import Case, RunContext
from tests.faults.result import CaseResult

HANG_SECONDS = 5.0  # one parse of a small object taking this long is a hang

NASTY_STRINGS = [
    "", " ", "0", "-1", "1e999999999", "1E308", "1e-999999", "9" * 400, "1.5.3", "Infinity",
    "NaN", "nan", "12345678901234567890Ei", "\x00", "+1", ".5", "5.", "1m", "1Mi", "100Gi",
    "0.000000001n", "1e3Ki", "--", "1_000", "\uff11", "\u202e1", "true", "null", "{}", "[]",
    "NoSchedule", "Exists", "In", "Gt", "2024-01-01T00:00:00Z", "not-a-time", "a" * 300,
    "kubernetes.io/hostname", "cpu", "memory", "pods", "Always",
]  # fmt: skip
KNOWN_KEYS = [
    "metadata", "spec", "status", "name", "namespace", "uid", "labels", "annotations",
    "containers", "initContainers", "resources", "requests", "limits", "cpu", "memory",
    "affinity", "nodeAffinity", "podAffinity", "podAntiAffinity", "tolerations", "taints",
    "key", "operator", "values", "effect", "value", "nodeSelector", "priority",
    "topologySpreadConstraints", "maxSkew", "topologyKey", "labelSelector", "matchLabels",
    "matchExpressions", "allocatable", "capacity", "images", "names", "sizeBytes",
    "conditions", "type", "unschedulable", "overhead", "ports", "hostPort", "volumes",
    "persistentVolumeClaim", "claimName", "ephemeral", "ownerReferences", "schedulingGates",
    "creationTimestamp", "deletionTimestamp", "startTime", "nodeName", "restartPolicy",
    "requiredDuringSchedulingIgnoredDuringExecution",
    "preferredDuringSchedulingIgnoredDuringExecution", "nodeSelectorTerms", "weight",
    "preference", "podAffinityTerm", "namespaceSelector", "namespaces", "matchLabelKeys",
    "minDomains", "whenUnsatisfiable", "nodeAffinityPolicy", "nodeTaintsPolicy",
    "resourceClaims", "preemptionPolicy", "hostNetwork", "hostIP", "containerPort",
    "protocol",
]  # fmt: skip

SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=20)
    | st.sampled_from(NASTY_STRINGS)
)
JSON = st.recursive(
    SCALARS,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.sampled_from(KNOWN_KEYS) | st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=25,
)

_TERM = {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a", "b"]}],
         "matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["n1"]}]}  # fmt: skip
_POD_TERM = {"labelSelector": {"matchLabels": {"app": "x"},
                               "matchExpressions": [{"key": "tier", "operator": "Exists"}]},
             "topologyKey": "kubernetes.io/hostname", "namespaces": ["a"],
             "namespaceSelector": {"matchLabels": {"team": "t"}}, "matchLabelKeys": ["app"]}  # fmt: skip

BASE_POD: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {
        "name": "p", "namespace": "ns", "uid": "u-1", "resourceVersion": "7",
        "labels": {"app": "x", "tier": "web"}, "annotations": {"a": "b"},
        "creationTimestamp": "2024-01-01T00:00:00Z",
        "ownerReferences": [{"kind": "ReplicaSet", "name": "rs", "uid": "r", "controller": True}],
    },
    "spec": {
        "schedulerName": "kube-async-scheduler", "priority": 10,
        "preemptionPolicy": "PreemptLowerPriority", "nodeSelector": {"zone": "a"},
        "containers": [{
            "name": "c", "image": "registry.local/app:1",
            "resources": {"requests": {"cpu": "100m", "memory": "64Mi", "example.com/gpu": "1"},
                          "limits": {"example.com/gpu": "1"}},
            "ports": [{"containerPort": 80, "hostPort": 8080, "protocol": "TCP", "hostIP": "0.0.0.0"}],
        }],
        "initContainers": [
            {"name": "i", "image": "x", "resources": {"requests": {"cpu": "1"}}},
            {"name": "s", "image": "y", "restartPolicy": "Always",
             "resources": {"requests": {"cpu": "200m"}}},
        ],
        "overhead": {"cpu": "10m"},
        "tolerations": [{"key": "k", "operator": "Equal", "value": "v", "effect": "NoSchedule",
                         "tolerationSeconds": 30}],
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [_TERM]},
                "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 5, "preference": _TERM}],
            },
            "podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [_POD_TERM]},
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [_POD_TERM],
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": 10, "podAffinityTerm": _POD_TERM}],
            },
        },
        "topologySpreadConstraints": [{
            "maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": "x"}}, "minDomains": 2,
            "matchLabelKeys": ["tier"], "nodeAffinityPolicy": "Honor", "nodeTaintsPolicy": "Ignore",
        }],
        "volumes": [{"name": "v", "persistentVolumeClaim": {"claimName": "c"}},
                    {"name": "e", "ephemeral": {"volumeClaimTemplate": {}}}],
        "schedulingGates": [{"name": "g"}],
    },
    "status": {"phase": "Pending", "startTime": "2024-01-01T00:00:01Z",
               "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}],
               "nominatedNodeName": "n1"},
}  # fmt: skip

BASE_NODE: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Node",
    "metadata": {"name": "n1", "uid": "u", "resourceVersion": "3",
                 "labels": {"zone": "a", "kubernetes.io/hostname": "n1"}},
    "spec": {"unschedulable": False,
             "taints": [{"key": "k", "value": "v", "effect": "NoSchedule"}]},
    "status": {
        "allocatable": {"cpu": "4", "memory": "16Gi", "pods": "110", "ephemeral-storage": "100Gi"},
        "capacity": {"cpu": "4", "memory": "16Gi", "pods": "110"},
        "images": [{"names": ["registry.local/app:1"], "sizeBytes": 1000}],
        "conditions": [{"type": "Ready", "status": "True"}],
    },
}  # fmt: skip


def _paths(obj: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield prefix
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _paths(v, (*prefix, k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from _paths(v, (*prefix, i))


def _replace(obj: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    parent = obj
    for step in path[:-1]:
        parent = parent[step]
    parent[path[-1]] = value
    return obj


def mutants(base: dict[str, Any]) -> st.SearchStrategy[Any]:
    """The base object with up to 4 of its fields (at any depth) replaced, or arbitrary JSON."""
    paths = list(_paths(base))[1:]

    @st.composite
    def mutate(draw: st.DrawFn) -> Any:
        obj = copy.deepcopy(base)
        for _ in range(draw(st.integers(1, 4))):
            path = draw(st.sampled_from(paths))
            value = draw(JSON)
            # an earlier replacement may have removed the path
            with contextlib.suppress(KeyError, IndexError, TypeError):
                obj = _replace(obj, path, value)
        return obj

    return mutate() | JSON


class Hang(Exception):
    pass


@contextmanager
def hang_alarm(seconds: float) -> Iterator[None]:
    """Raises Hang in the main thread if the block runs longer than `seconds`."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def fire(signum: int, frame: Any) -> None:
        raise Hang(f"no answer after {seconds:.0f}s")

    old = signal.signal(signal.SIGALRM, fire)
    # pytest-timeout may run its own SIGALRM timer: it is put back, less the time spent
    outer, _ = signal.setitimer(signal.ITIMER_REAL, seconds)
    t0 = time.monotonic()
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
        if outer > 0:
            signal.setitimer(signal.ITIMER_REAL, max(outer - (time.monotonic() - t0), 0.001))


def fuzz(
    parse: Callable[[Any], Any], base: dict[str, Any], examples: int, derandomize: bool
) -> tuple[str, int, float]:
    """(the distinct failures found, each minimal after shrinking, or ""; examples run;
    slowest call)."""
    stats = {"runs": 0, "slowest": 0.0}

    @settings(max_examples=examples, deadline=None, database=None, derandomize=derandomize,
              suppress_health_check=list(HealthCheck), print_blob=False)  # fmt: skip
    @given(mutants(base))
    def prop(raw: Any) -> None:
        stats["runs"] += 1
        t0 = time.perf_counter()
        try:
            with hang_alarm(HANG_SECONDS):
                parse(raw)
        except InvalidObject:
            pass
        except Hang as exc:
            raise AssertionError(f"hang: {exc} on {raw!r:.300}") from exc
        except Exception as exc:
            frame = traceback.extract_tb(exc.__traceback__)[-1]
            where = f"{Path(frame.filename).name}:{frame.lineno}"
            raise AssertionError(f"{type(exc).__name__} at {where}: {exc}") from exc
        finally:
            stats["slowest"] = max(stats["slowest"], time.perf_counter() - t0)

    failures: list[str] = []
    try:
        prop()
    except AssertionError as exc:
        failures.append(str(exc).splitlines()[0])
    except ExceptionGroup as group:  # hypothesis found several distinct failures
        failures.extend(str(e).splitlines()[0] for e in group.exceptions)
    return " | ".join(sorted(set(failures))), int(stats["runs"]), float(stats["slowest"])


def run(ctx: RunContext, result: CaseResult) -> None:
    examples = 20000 if ctx.full else 1500
    for what, parse, base in (("pod_from_dict", pod_from_dict, BASE_POD),
                              ("node_from_dict", node_from_dict, BASE_NODE)):  # fmt: skip
        ctx.say(f"fuzzing {what} with {examples} examples")
        failure, runs, slowest = fuzz(parse, base, examples, derandomize=not ctx.full)
        result.figure(f"{what}: examples run", runs)
        result.figure(f"{what}: slowest call (s)", round(slowest, 4))
        result.check(
            f"{what} raises nothing but InvalidObject and never hangs (> {HANG_SECONDS:.0f}s)",
            not failure,
            failure or f"{runs} examples",
        )


CASE = Case(
    "parse_fuzz",
    "hypothesis fuzzing of pod_from_dict / node_from_dict: only InvalidObject, no hang",
    needs_cluster=False,
    run=run,
)
